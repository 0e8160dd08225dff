"""The stand-ins a fleet simulation adds: the controller stand-in's maxUnavailable rollout, and
the workload that replaces evicted pods (the agents are played by the test's own writes)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from mcd_sim import nodephase as np
from mcd_sim.apiserver import ApiError, ApiServer
from mcd_sim.apiserver.lifecycle import pod_ready
from mcd_sim.controller import ControllerStandIn
from mcd_sim.reboots import SlowReboots
from mcd_sim.workload import Workload

OLD, NEW = "rendered-worker-old", "rendered-worker-new"
NODES = ["worker-0", "worker-1", "worker-2", "worker-3", "worker-4"]


@pytest.fixture
def cluster() -> Iterator[ApiServer]:
    with ApiServer(tls=False) as sim:
        for name in NODES:
            sim.add_node(name)
            sim.patch("Node", name, {"metadata": {"annotations": {
                np.CURRENT_CONFIG: OLD, np.DESIRED_CONFIG: OLD, np.STATE: "Done"}}})  # fmt: skip
        yield sim


def _pool(sim: ApiServer, max_unavailable: object) -> None:
    ControllerStandIn(sim)._ensure_pool()
    sim.patch(
        "MachineConfigPool",
        "worker",
        {"spec": {"configuration": {"name": NEW}, "maxUnavailable": max_unavailable}},
    )


def _targeted(sim: ApiServer) -> list[str]:
    return [
        n["metadata"]["name"] for n in sim.objects("Node")
        if (n["metadata"].get("annotations") or {}).get(np.DESIRED_CONFIG) == NEW
    ]  # fmt: skip


def _agent(sim: ApiServer, node: str, **annotations: str) -> None:
    sim.patch("Node", node, {"metadata": {"annotations": annotations}})


@pytest.mark.parametrize(("value", "first"), [(2, 2), ("40%", 2), (None, 1), (10, 5)])
def test_rollout_moves_no_more_than_max_unavailable(cluster: ApiServer, value: object, first: int) -> None:
    _pool(cluster, value)
    ctrl = ControllerStandIn(cluster, rollout=True)
    ctrl.step()
    assert _targeted(cluster) == NODES[:first]
    ctrl.step()  # nothing changed: no more capacity
    assert _targeted(cluster) == NODES[:first]


def test_rollout_moves_the_next_node_once_one_is_done(cluster: ApiServer) -> None:
    _pool(cluster, 2)
    ctrl = ControllerStandIn(cluster, rollout=True)
    ctrl.step()
    _agent(cluster, "worker-0", **{np.STATE: "Working"})
    ctrl.step()
    assert _targeted(cluster) == NODES[:2]
    _agent(cluster, "worker-0", **{np.CURRENT_CONFIG: NEW, np.STATE: "Done"})
    ctrl.step()
    assert _targeted(cluster) == NODES[:3]


def test_a_cordoned_node_counts_against_the_limit(cluster: ApiServer) -> None:
    cluster.patch("Node", "worker-4", {"spec": {"unschedulable": True}})
    _pool(cluster, 2)
    ControllerStandIn(cluster, rollout=True).step()
    assert _targeted(cluster) == NODES[:1]


def test_a_node_failing_on_the_new_config_holds_its_place(cluster: ApiServer) -> None:
    _pool(cluster, 2)
    ctrl = ControllerStandIn(cluster, rollout=True)
    ctrl.step()
    # Degraded is not unavailable, but upstream still counts it against capacity
    _agent(cluster, "worker-0", **{np.STATE: "Degraded"})
    ctrl.step()
    assert _targeted(cluster) == NODES[:2]


def test_rollout_is_off_unless_asked_and_waits_on_a_paused_pool(cluster: ApiServer) -> None:
    _pool(cluster, 2)
    ControllerStandIn(cluster).step()
    assert _targeted(cluster) == []
    cluster.patch("MachineConfigPool", "worker", {"spec": {"paused": True}})
    ControllerStandIn(cluster, rollout=True).step()
    assert _targeted(cluster) == []


def test_workload_replaces_an_evicted_pod_on_a_schedulable_node_and_starts_it(cluster: ApiServer) -> None:
    work = Workload(cluster, "web", replicas=5, start_seconds=0.2)
    work.create({"maxUnavailable": 1})
    pods = {p["metadata"]["name"]: p for p in cluster.objects("Pod")}
    assert sorted(p["spec"]["nodeName"] for p in pods.values()) == NODES  # one per node
    assert all(pod_ready(p) for p in pods.values())
    owners = pods["web-0001"]["metadata"]["ownerReferences"]
    assert owners[0]["kind"] == "ReplicaSet" and owners[0]["controller"]
    cluster.patch("Node", "worker-0", {"spec": {"unschedulable": True}})
    with work.start():
        cluster.evict("default", "web-0001")
        # the budget now allows nothing: the evicted pod is terminating, its replacement not Ready
        with pytest.raises(ApiError) as refused:
            cluster.wait_for(lambda: cluster.get("Pod", "web-0006"), timeout=5)
            cluster.evict("default", "web-0002")
        assert refused.value.code == 429
        replacement = cluster.get("Pod", "web-0006")
        assert replacement is not None and replacement["spec"]["nodeName"] == "worker-1"
        assert replacement["status"]["phase"] == "Pending"
        started = cluster.wait_for(
            lambda: pod_ready(cluster.get("Pod", "web-0006") or {"metadata": {}}), timeout=5
        )
        assert started
        cluster.wait_for(lambda: cluster.get("Pod", "web-0001") is None, timeout=5)  # the grace period ended
        cluster.evict("default", "web-0002")  # ready again: one disruption allowed


def _ready(sim: ApiServer, node: str) -> str:
    obj = sim.get("Node", node) or {}
    return next(c["status"] for c in obj["status"]["conditions"] if c["type"] == "Ready")


def test_a_slow_reboot_makes_the_node_not_ready_until_it_is_over(cluster: ApiServer) -> None:
    reboots = SlowReboots(cluster, seconds=30)
    reboots.begin("worker-1", pid=2**22 + 12345)  # no such process: only the Node changes
    assert _ready(cluster, "worker-1") == "Unknown" and _ready(cluster, "worker-0") == "True"
    assert np.node_unavailable(cluster.get("Node", "worker-1") or {})
    reboots.close()  # teardown brings it back before its time
    assert _ready(cluster, "worker-1") == "True"
