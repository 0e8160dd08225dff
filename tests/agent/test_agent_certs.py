"""The certificate writer inside the agent: each change of the ControllerConfig reaches the
node's files (and a registry dropped from it loses its directory), the node records the
resourceVersion written, none of it is drift, and a bad bundle writes nothing, is told by a
Warning event and stops nothing."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from builders import ign_file, mc_object
from harness import NODE, Agent, done_on, make_root
from simcluster import Cluster

from mcd.node import annotations as ann
from mcd.planner.managed_paths import CLOUD_CA, INTERNAL_REGISTRY_PULL_SECRET, KUBELET_CA

pytestmark = pytest.mark.allow_commands

CC = "machine-config-controller"
CERTS_D = "etc/docker/certs.d"
ROTATE = "machineconfiguration.openshift.io/service-ca-rotate"


def pem(n: int) -> bytes:
    der = bytes([0x30, 0x03, 0x02, 0x01, n])
    return b"-----BEGIN CERTIFICATE-----\n" + base64.b64encode(der) + b"\n-----END CERTIFICATE-----\n"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _spec(kubelet: int, registries: dict[str, int], secret: dict[str, Any]) -> dict[str, Any]:
    return {
        "kubeAPIServerServingCAData": b64(pem(kubelet)),
        "cloudProviderCAData": b64(pem(99)),
        "internalRegistryPullSecret": b64(json.dumps(secret).encode()),
        "imageRegistryBundleData": [{"file": f, "data": b64(pem(n))} for f, n in registries.items()],
        "imageRegistryBundleUserData": [],
    }


def _read(root: Path, path: str) -> bytes:
    return (root / path.lstrip("/")).read_bytes()


def _synced(rv: str) -> Callable[[dict[str, Any]], bool]:
    def pred(node: dict[str, Any]) -> bool:
        return (node["metadata"].get("annotations") or {}).get(ann.LAST_SYNCED_CONTROLLER_CONFIG) == rv

    return pred


def test_controllerconfig_changes_are_written_not_drift_and_a_bad_bundle_writes_nothing(
    cluster: Cluster, start_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    # the rendered config declares the kubelet CA too, with other contents: the writer's wins
    a = mc_object("rendered-worker-a", files=[ign_file("/etc/mcd-test/a.conf", "a=1\n"),
                                              ign_file(KUBELET_CA, "the MachineConfig's CA\n")])  # fmt: skip
    root = make_root(tmp_path, a)
    stale = root / CERTS_D / "gone.example"
    stale.mkdir(parents=True)
    (stale / "ca.crt").write_bytes(pem(50))
    cluster.add_mc(a)
    cluster.answer_drains()
    cluster.add_node(NODE, {ann.CURRENT_CONFIG: "rendered-worker-a", ann.DESIRED_CONFIG: "rendered-worker-a",
                            ann.STATE: "Done"})  # fmt: skip
    secret = {"auths": {"image-registry.openshift-image-registry.svc:5000": {"auth": "eDp5"}}}
    cc = cluster.sim.put({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "ControllerConfig",
        "metadata": {"name": CC, "annotations": {ROTATE: "false"}},
        "spec": _spec(1, {"image-registry.openshift-image-registry.svc..5000": 2}, secret),
    })  # fmt: skip
    agent = start_agent(cluster, root)

    # first start: everything written, the stale registry gone, the version recorded
    node = cluster.wait_node(NODE, _synced(cc["metadata"]["resourceVersion"]))
    assert node["metadata"]["annotations"][ann.LAST_OBSERVED_SERVER_CA] == "false"
    assert _read(root, KUBELET_CA) == pem(1)
    assert _read(root, CLOUD_CA) == pem(99)
    assert json.loads(_read(root, INTERNAL_REGISTRY_PULL_SECRET)) == secret
    assert _read(root, f"{CERTS_D}/image-registry.openshift-image-registry.svc:5000/ca.crt") == pem(2)
    assert not stale.exists()
    cluster.wait_node(NODE, done_on("rendered-worker-a"))
    cluster.wait_event("ConfigDriftMonitorStarted")

    # a change while the drift monitor watches /etc/kubernetes: written, and no drift
    cc = cluster.sim.patch("ControllerConfig", CC, {"spec": _spec(3, {"quay.example": 4}, secret)})
    cluster.wait_node(NODE, _synced(cc["metadata"]["resourceVersion"]))
    assert _read(root, KUBELET_CA) == pem(3)
    assert _read(root, f"{CERTS_D}/quay.example/ca.crt") == pem(4)
    assert sorted(p.name for p in (root / CERTS_D).iterdir()) == ["quay.example"]

    # a bad bundle: nothing written, the version not recorded, a Warning event, the agent runs on
    good_rv = cc["metadata"]["resourceVersion"]
    bad = _spec(5, {}, secret)
    bad["kubeAPIServerServingCAData"] = b64(b"not a certificate\n")
    cluster.sim.patch("ControllerConfig", CC, {"spec": bad})
    cluster.wait_event("InvalidControllerConfig")
    [message] = cluster.event_messages("InvalidControllerConfig")
    assert "spec.kubeAPIServerServingCAData: no PEM certificate in it" in message
    assert "nothing changed on disk" in message
    agent.wait_log("spec.kubeAPIServerServingCAData: no PEM certificate in it")
    assert _read(root, KUBELET_CA) == pem(3)
    assert (root / CERTS_D / "quay.example" / "ca.crt").exists()
    assert cluster.annotations()[ann.LAST_SYNCED_CONTROLLER_CONFIG] == good_rv

    # fixed: written again
    cc = cluster.sim.patch("ControllerConfig", CC, {"spec": _spec(6, {}, secret)})
    cluster.wait_node(NODE, _synced(cc["metadata"]["resourceVersion"]))
    assert _read(root, KUBELET_CA) == pem(6)
    assert list((root / CERTS_D).iterdir()) == []

    # none of it was drift: the node never left Done, and no update ran
    assert cluster.state_history() == ["Done"]
    assert "ConfigDriftDetected" not in cluster.event_reasons()
    assert agent.proc is not None and agent.proc.poll() is None
    assert cluster.noop_node_writes() == 0
