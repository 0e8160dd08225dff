"""The controller/operator stand-in: desiredConfig, the drain handshake, pool status and the
MachineConfiguration status the daemon waits for."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from mcd_sim.apiserver import ApiServer
from mcd_sim.controller import DESIRED_CONFIG, DESIRED_DRAIN, LAST_APPLIED_DRAIN, ControllerStandIn

from mcd.policy import DEFAULT_POLICIES


@pytest.fixture
def cluster() -> Iterator[ApiServer]:
    with ApiServer(tls=False) as sim:
        sim.add_node("worker-0")
        sim.add_node("worker-1")
        yield sim


def _annotation(sim: ApiServer, node: str, key: str) -> str | None:
    obj = sim.get("Node", node)
    assert obj is not None
    return (obj["metadata"].get("annotations") or {}).get(key)


def test_set_desired_config_on_the_pool(cluster: ApiServer) -> None:
    ctrl = ControllerStandIn(cluster)
    ctrl.set_desired_config("rendered-worker-1", nodes=["worker-1"])
    assert _annotation(cluster, "worker-1", DESIRED_CONFIG) == "rendered-worker-1"
    assert _annotation(cluster, "worker-0", DESIRED_CONFIG) is None
    ctrl.set_desired_config("rendered-worker-1")
    assert _annotation(cluster, "worker-0", DESIRED_CONFIG) == "rendered-worker-1"
    pool = cluster.get("MachineConfigPool", "worker")
    assert pool is not None and pool["spec"]["configuration"]["name"] == "rendered-worker-1"


def test_pool_status_counts_updated_nodes(cluster: ApiServer) -> None:
    ctrl = ControllerStandIn(cluster)
    ctrl.set_desired_config("rendered-worker-1")
    ctrl.step()
    status: Any = (cluster.get("MachineConfigPool", "worker") or {})["status"]
    assert (status["machineCount"], status["updatedMachineCount"]) == (2, 0)
    for node in ("worker-0", "worker-1"):
        cluster.patch("Node", node, {"metadata": {"annotations": {
            "machineconfiguration.openshift.io/currentConfig": "rendered-worker-1",
            "machineconfiguration.openshift.io/state": "Done"}}})  # fmt: skip
    ctrl.step()
    status = (cluster.get("MachineConfigPool", "worker") or {})["status"]
    assert (status["updatedMachineCount"], status["configuration"]["name"]) == (2, "rendered-worker-1")
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "Updated": "True", "Updating": "False", "NodeDegraded": "False", "Degraded": "False"
    }  # fmt: skip


def test_drain_handshake_evicts_and_waits_for_the_pdb(cluster: ApiServer) -> None:
    cluster.put({"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": "web-1", "namespace": "default", "labels": {"app": "web"}},
                 "spec": {"nodeName": "worker-0", "terminationGracePeriodSeconds": 0,
                          "containers": [{"name": "c", "image": "x"}]}})  # fmt: skip
    cluster.put({"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": "mcd-x", "namespace": "openshift-machine-config-operator",
                              "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet",
                                                   "name": "mcd", "uid": "u", "controller": True}]},
                 "spec": {"nodeName": "worker-0", "containers": [{"name": "c", "image": "x"}]}})  # fmt: skip
    cluster.put({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                 "metadata": {"name": "web", "namespace": "default"},
                 "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}})  # fmt: skip
    with ControllerStandIn(cluster, evict_retry=0.05) as ctrl:
        cluster.patch(
            "Node", "worker-0", {"metadata": {"annotations": {DESIRED_DRAIN: "drain-rendered-worker-1"}}}
        )
        cluster.wait_for(lambda: (cluster.get("Node", "worker-0") or {})["spec"].get("unschedulable"))
        assert cluster.get("Pod", "web-1", "default") is not None  # the PDB holds it
        assert _annotation(cluster, "worker-0", LAST_APPLIED_DRAIN) is None
        cluster.patch("PodDisruptionBudget", "web", {"spec": {"minAvailable": 0}}, "default")
        cluster.wait_for(
            lambda: _annotation(cluster, "worker-0", LAST_APPLIED_DRAIN) == "drain-rendered-worker-1"
        )
        assert cluster.get("Pod", "web-1", "default") is None
        assert cluster.get("Pod", "mcd-x", "openshift-machine-config-operator") is not None
        cluster.patch(
            "Node", "worker-0", {"metadata": {"annotations": {DESIRED_DRAIN: "uncordon-rendered-worker-1"}}}
        )
        cluster.wait_for(
            lambda: _annotation(cluster, "worker-0", LAST_APPLIED_DRAIN) == "uncordon-rendered-worker-1"
        )
        assert not (cluster.get("Node", "worker-0") or {})["spec"].get("unschedulable")
        assert ctrl.errors == []


def test_machineconfiguration_status_follows_the_spec(cluster: ApiServer) -> None:
    with ControllerStandIn(cluster) as ctrl:
        obj = cluster.wait_for(lambda: (cluster.get("MachineConfiguration", "cluster") or {}).get("status"))
        assert obj["observedGeneration"] == 1
        assert obj["nodeDisruptionPolicyStatus"]["clusterPolicies"] == DEFAULT_POLICIES.to_api()
        restart = {"type": "Restart", "restart": {"serviceName": "my-app.service"}}
        user = {"files": [{"path": "/etc/my-app.conf", "actions": [restart]}]}
        cluster.patch("MachineConfiguration", "cluster", {"spec": {"nodeDisruptionPolicy": user}})

        def observed() -> Any:
            got = cluster.get("MachineConfiguration", "cluster") or {}
            return got if got.get("status", {}).get("observedGeneration") == 2 else None

        got = cluster.wait_for(observed)
        files = got["status"]["nodeDisruptionPolicyStatus"]["clusterPolicies"]["files"]
        assert files[-1] == user["files"][0]
        assert len(files) == len(DEFAULT_POLICIES.files) + 1
        assert ctrl.errors == []
