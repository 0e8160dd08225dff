"""The real agent and `mcd pool-controller` together on the stand-in API server: the controller
renders the pool's MachineConfigs, points the node at the result, answers the agent's drain
handshake (a budget holding the eviction for a while), and the pool reports the node updated."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from builders import ign_file, mc_object
from harness import NODE, Agent, config_a, done_on, make_root
from simcluster import Cluster

from mcd.controller.run import ControllerOptions, PoolController
from mcd.kube.client import CONTROLLER_USER_AGENT, KubeClient
from mcd.kube.lease import LeaseSettings
from mcd.node import annotations as ann

pytestmark = pytest.mark.allow_commands

ROLE = "machineconfiguration.openshift.io/role"
WORKER = "node-role.kubernetes.io/worker"


@pytest.fixture
def controller(cluster: Cluster, tmp_path: Path) -> Iterator[Callable[[], None]]:
    stop = threading.Event()
    threads: list[threading.Thread] = []

    def start() -> None:
        api = KubeClient.from_kubeconfig(str(cluster.write_kubeconfig(tmp_path / "ctl.kubeconfig")),
                                         CONTROLLER_USER_AGENT)  # fmt: skip
        lease = LeaseSettings("openshift-machine-config-operator", "machine-config-controller", "test",
                              duration=6, renew_deadline=4, retry_period=0.2)  # fmt: skip
        ctl = PoolController(api, ControllerOptions(lease, interval=0.2))
        ctl.drains.retry_seconds = 0.5
        thread = threading.Thread(target=ctl.run, args=(stop,), daemon=True)
        thread.start()
        threads.append(thread)

    yield start
    stop.set()
    for t in threads:
        t.join(10)


def test_the_controller_rolls_the_agents_node_onto_the_rendered_config(
    cluster: Cluster, start_agent: Callable[..., Agent], controller: Callable[[], None], tmp_path: Path
) -> None:
    a = config_a()
    root = make_root(tmp_path, a)
    cluster.add_mc(a)
    admin = mc_object(
        "00-worker", files=[ign_file("/etc/mcd-test/a.conf", "a=2\n")], kernelArguments=["nosmt"]
    )
    admin["metadata"]["labels"] = {ROLE: "worker"}
    cluster.add_mc(admin)
    cluster.sim.put({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
                     "metadata": {"name": "worker"},
                     "spec": {"machineConfigSelector": {"matchLabels": {ROLE: "worker"}},
                              "nodeSelector": {"matchLabels": {WORKER: ""}}}})  # fmt: skip
    cluster.add_node(NODE, {ann.CURRENT_CONFIG: "rendered-worker-a", ann.DESIRED_CONFIG: "rendered-worker-a",
                            ann.STATE: "Done"})  # fmt: skip
    cluster.add_pod("shop", "web-1", NODE, labels={"app": "web"},
                    ownerReferences=[{"kind": "ReplicaSet", "name": "web", "controller": True}])  # fmt: skip
    cluster.add_pdb("shop", "web-budget", {"matchLabels": {"app": "web"}}, min_available=1)
    start_agent(cluster, root)
    controller()  # it answers the agent's first uncordon request too
    cluster.wait(lambda: bool(_target(cluster)), "the pool's rendered config")
    target = _target(cluster)
    assert target.startswith("rendered-worker-")
    cluster.wait_event("DrainBlockedByPodDisruptionBudget", timeout=30)
    cluster.set_pdb_min_available("shop", "web-budget", 0)
    node = cluster.wait_node(NODE, done_on(target), timeout=60)
    assert not node["spec"].get("unschedulable")
    assert (root / "etc/mcd-test/a.conf").read_text() == "a=2\n"
    # (the agent's first start may ask to uncordon on rendered-worker-a before)
    assert cluster.annotation_values(ann.DESIRED_DRAIN)[-2:] == [f"drain-{target}", f"uncordon-{target}"]
    assert ("shop", "web-1") not in cluster.pods()
    cluster.wait(
        lambda: (_status(cluster).get("configuration") or {}).get("name") == target, "the pool updated"
    )
    assert (_status(cluster)["updatedMachineCount"], _status(cluster)["readyMachineCount"]) == (1, 1)


def _target(cluster: Cluster) -> str:
    pool = cluster.sim.get("MachineConfigPool", "worker") or {}
    return str(((pool.get("spec") or {}).get("configuration") or {}).get("name") or "")


def _status(cluster: Cluster) -> dict[str, object]:
    return dict((cluster.sim.get("MachineConfigPool", "worker") or {}).get("status") or {})


def test_a_node_provisioned_without_the_operator_joins_on_its_own_config_then_rolls(
    cluster: Cluster, start_agent: Callable[..., Agent], controller: Callable[[], None], tmp_path: Path
) -> None:
    """No Machine Config Server hands the node its annotations: the agent reports the config on
    its disk as `currentConfig` only (as upstream's), and the controller names that same config
    as the desired one, so the node is Done and can be rolled like the others."""
    a = config_a()
    root = make_root(tmp_path, a)  # provisioned with `mcd start --once-from`: a config on its disk
    cluster.add_mc(a)
    admin = mc_object("00-worker", files=[ign_file("/etc/mcd-test/a.conf", "a=3\n")])
    admin["metadata"]["labels"] = {ROLE: "worker"}
    cluster.add_mc(admin)
    cluster.sim.put({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
                     "metadata": {"name": "worker"},
                     "spec": {"machineConfigSelector": {"matchLabels": {ROLE: "worker"}},
                              "nodeSelector": {"matchLabels": {WORKER: ""}}}})  # fmt: skip
    cluster.add_node(NODE)  # no annotations at all
    start_agent(cluster, root)
    cluster.wait_node(NODE, lambda n: (n["metadata"].get("annotations") or {}).get(ann.CURRENT_CONFIG)
                      == "rendered-worker-a")  # fmt: skip
    controller()
    cluster.wait(lambda: bool(_target(cluster)), "the pool's rendered config")
    target = _target(cluster)
    cluster.wait_node(NODE, done_on(target), timeout=60)
    assert (root / "etc/mcd-test/a.conf").read_text() == "a=3\n"
    # it joined on its own config first (no drain for that), then was moved once to the target
    assert cluster.annotation_values(ann.DESIRED_CONFIG) == ["rendered-worker-a", target]
