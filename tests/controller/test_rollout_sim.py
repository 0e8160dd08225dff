"""The pool controller against the stand-in API server, pass by pass: the pool's configs are
rendered and targeted, its nodes move at most maxUnavailable at a time in upstream's order, the
drains keep PodDisruptionBudgets, a paused pool stays, and the status follows."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fakes import Recorder, Replicas, add_nodes, agent_step, mc, pool
from mcd_sim.apiserver import ApiServer

from mcd.controller import rollout
from mcd.controller.drain import DrainSync
from mcd.controller.pools import PoolSync
from mcd.kube.client import KubeClient
from mcd.node import annotations as ann

Obj = dict[str, Any]
BOOT = "rendered-worker-boot"  # the config the nodes joined on (the Machine Config Server's part)


def converge(
    sim: ApiServer, api: KubeClient, until: Callable[[], bool], *,
    extra: Callable[[], None] = lambda: None, passes: int = 200,
) -> int:  # fmt: skip
    """Controller passes and daemon moves in turn until `until()`; the number of passes it took."""
    pools, drains = PoolSync(api), DrainSync(api, retry_seconds=0.0)
    for n in range(passes):
        drains.sync()
        pools.sync()
        assert pools.errors == []
        for node in sim.objects("Node"):
            agent_step(sim, node["metadata"]["name"])
        extra()
        if until():
            return n + 1
    raise AssertionError(f"no convergence in {passes} passes: {sim.get('MachineConfigPool', 'worker')}")


def target(sim: ApiServer, name: str = "worker") -> str:
    return str(
        ((sim.get("MachineConfigPool", name) or {}).get("spec") or {})
        .get("configuration", {})
        .get("name", "")
    )


def all_done_on(sim: ApiServer, config: str) -> Callable[[], bool]:
    def check() -> bool:
        status = (sim.get("MachineConfigPool", "worker") or {}).get("status") or {}
        return (
            bool(config)
            and (status.get("configuration") or {}).get("name") == config
            and all(rollout.is_updated(n, config) for n in sim.objects("Node"))
        )

    return check


def test_a_new_config_rolls_out_two_at_a_time_and_the_status_follows(sim: ApiServer, api: KubeClient) -> None:
    sim.put(mc("00-worker"))
    sim.put(pool(maxUnavailable=2))
    add_nodes(sim, 5, BOOT)
    PoolSync(api).sync()
    first = target(sim)
    assert first.startswith("rendered-worker-")
    rendered = sim.get("MachineConfig", first)
    assert rendered is not None and rendered["metadata"]["ownerReferences"][0]["name"] == "worker"
    assert sim.get("MachineConfigPool", "worker")["spec"]["configuration"]["source"] == [
        {"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig", "name": "00-worker"}
    ]
    converge(sim, api, all_done_on(sim, first))

    record = Recorder(sim)
    sim.put(mc("50-extra"))
    PoolSync(api).sync()
    second = target(sim)
    assert second not in ("", first)
    converge(sim, api, all_done_on(sim, second))
    assert record.max_unavailable == 2  # the limit, used, never passed
    events = [(e["reason"], e["message"]) for e in sim.events() if e["involvedObject"]["name"] == "worker"]
    assert ("Updating", f"Pool worker now targeting MachineConfig {second}") in events
    assert ("SetDesiredConfig", f"Set target for 2 nodes to MachineConfig: {second}") in events
    assert ("SetDesiredConfig", f"Targeted node worker-4 to MachineConfig: {second}") in events
    assert ("Completed", f"Pool worker has completed update to MachineConfig {second}") in events
    assert any(
        r == "RenderedConfigGenerated" and m.startswith(f"{second} successfully generated") for r, m in events
    )
    assert sorted(n for n, c in record.targeted if c == second) == [f"worker-{i}" for i in range(5)]
    status = sim.get("MachineConfigPool", "worker")["status"]
    assert {k: status[k] for k in ("machineCount", "updatedMachineCount", "readyMachineCount",
                                   "unavailableMachineCount", "degradedMachineCount")} == {
        "machineCount": 5, "updatedMachineCount": 5, "readyMachineCount": 5,
        "unavailableMachineCount": 0, "degradedMachineCount": 0}  # fmt: skip
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Updated"]["status"] == "True"
    assert conditions["Updated"]["message"] == f"All nodes are updated with MachineConfig {second}"
    assert conditions["Updating"]["status"] == "False"
    assert conditions["RenderDegraded"]["status"] == "False"
    assert conditions["Degraded"]["status"] == "False"


def test_the_default_is_one_at_a_time_zones_first_then_age(sim: ApiServer, api: KubeClient) -> None:
    sim.put(mc("00-worker"))
    sim.put(pool())
    for name, zone in (("c", None), ("b", "z2"), ("a", "z1"), ("d", None)):
        labels = {"topology.kubernetes.io/zone": zone} if zone else {}
        sim.add_node(name, **labels)
        done = {ann.CURRENT_CONFIG: BOOT, ann.DESIRED_CONFIG: BOOT, ann.STATE: "Done"}
        sim.patch("Node", name, {"metadata": {"annotations": done}})
    record = Recorder(sim)
    converge(sim, api, lambda: bool(target(sim)) and all_done_on(sim, target(sim))())
    assert record.max_unavailable == 1
    # zone-labelled nodes first, by zone; then by creation time (c was created before d)
    assert [n for n, _ in record.targeted] == ["a", "b", "c", "d"]


def test_drains_never_break_a_disruption_budget(sim: ApiServer, api: KubeClient) -> None:
    sim.put(mc("00-worker"))
    sim.put(pool(maxUnavailable="50%"))
    add_nodes(sim, 4, BOOT)
    web = Replicas(sim, "web", 4)
    web.reconcile()
    sim.put({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
             "metadata": {"namespace": "shop", "name": "web"},
             "spec": {"minAvailable": 3, "selector": {"matchLabels": {"app": "web"}}}})  # fmt: skip
    daemon = [
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "ds", "controller": True}
    ]
    sim.put({"apiVersion": "v1", "kind": "Pod",
             "metadata": {"namespace": "shop", "name": "agent-0", "ownerReferences": daemon},
             "spec": {"nodeName": "worker-0", "containers": [{"name": "c", "image": "x"}]}})  # fmt: skip
    record = Recorder(sim, web)
    converge(sim, api, lambda: bool(target(sim)) and all_done_on(sim, target(sim))(), extra=web.reconcile)
    assert record.max_unavailable == 2
    assert record.min_ready is not None and record.min_ready >= 3
    assert web.made > 4  # evictions happened (and the ReplicaSet replaced the pods)
    assert sim.get("Pod", "agent-0", "shop") is not None  # a DaemonSet pod is never evicted
    assert all(not (n.get("spec") or {}).get("unschedulable") for n in sim.objects("Node"))


def test_a_paused_pool_renders_but_moves_no_node(sim: ApiServer, api: KubeClient) -> None:
    sim.put(mc("00-worker"))
    sim.put(pool())
    add_nodes(sim, 2, BOOT)
    converge(sim, api, lambda: bool(target(sim)) and all_done_on(sim, target(sim))())
    old = target(sim)
    sim.patch("MachineConfigPool", "worker", {"spec": {"paused": True}})
    sim.put(mc("50-extra"))
    record = Recorder(sim)
    for _ in range(3):
        DrainSync(api).sync()
        PoolSync(api).sync()
    new = target(sim)
    assert new != old
    assert record.targeted == []
    desired = {
        rollout.name_of(n): n["metadata"]["annotations"][ann.DESIRED_CONFIG] for n in sim.objects("Node")
    }
    assert desired == {
        "worker-0": old, "worker-1": old}  # fmt: skip
    status = sim.get("MachineConfigPool", "worker")["status"]
    updating = next(c for c in status["conditions"] if c["type"] == "Updating")
    assert (updating["status"], updating["message"]) == (
        "False",
        f"Pool is paused; will not update to MachineConfig {new}",
    )
    assert status["configuration"]["name"] == old
    sim.patch("MachineConfigPool", "worker", {"spec": {"paused": False}})
    converge(sim, api, all_done_on(sim, new))


NO_CONFIG = (
    "Failed to render configuration for pool worker: no MachineConfigs found matching selector "
    "machineconfiguration.openshift.io/role=worker"
)


def test_no_config_for_the_pool_is_render_degraded(sim: ApiServer, api: KubeClient) -> None:
    sim.put(pool())
    add_nodes(sim, 1, BOOT)
    PoolSync(api).sync()
    status = sim.get("MachineConfigPool", "worker")["status"]
    # never configured: only the renderer's condition (the node part waits for a target)
    assert [(c["type"], c["status"], c["message"]) for c in status["conditions"]] == [
        ("RenderDegraded", "True", NO_CONFIG)
    ]
    assert set(status) == {"conditions"}
    assert target(sim) == ""
    # configured, then its configs deleted: the target stays, the pool is Degraded
    sim.put(mc("00-worker"))
    converge(sim, api, lambda: bool(target(sim)) and all_done_on(sim, target(sim))())
    kept = target(sim)
    sim.delete("MachineConfig", "00-worker")
    PoolSync(api).sync()
    conditions = {c["type"]: c for c in sim.get("MachineConfigPool", "worker")["status"]["conditions"]}
    assert (conditions["RenderDegraded"]["status"], conditions["RenderDegraded"]["message"]) == (
        "True",
        NO_CONFIG,
    )
    assert conditions["Degraded"]["status"] == "True"
    assert target(sim) == kept


def test_a_degraded_node_is_reported_and_uses_capacity(sim: ApiServer, api: KubeClient) -> None:
    sim.put(mc("00-worker"))
    sim.put(pool())
    add_nodes(sim, 3, BOOT)
    converge(sim, api, lambda: bool(target(sim)) and all_done_on(sim, target(sim))())
    sim.put(mc("50-extra"))
    pools = PoolSync(api)
    pools.sync()
    [first] = [rollout.name_of(n) for n in sim.objects("Node")
               if n["metadata"]["annotations"][ann.DESIRED_CONFIG] == target(sim)]  # fmt: skip
    sim.patch(
        "Node", first, {"metadata": {"annotations": {ann.STATE: "Degraded", ann.REASON: "disk full"}}}
    )
    for _ in range(3):
        pools.sync()
    status = sim.get("MachineConfigPool", "worker")["status"]
    # failing its new config, the node is not unavailable but takes the one slot: nobody else moves
    assert [
        n for n in sim.objects("Node") if n["metadata"]["annotations"][ann.DESIRED_CONFIG] == target(sim)
    ] != []
    assert (
        sum(
            1
            for n in sim.objects("Node")
            if n["metadata"]["annotations"][ann.DESIRED_CONFIG] == target(sim)
        )
        == 1
    )
    assert (status["degradedMachineCount"], status["unavailableMachineCount"]) == (1, 0)
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["NodeDegraded"]["reason"] == "1 nodes are reporting degraded status on sync"
    assert conditions["NodeDegraded"]["message"] == f'Node {first} is reporting: "disk full"'
    assert conditions["Degraded"]["message"] == conditions["NodeDegraded"]["message"]


@pytest.mark.parametrize("value", ["x", "10"])
def test_a_bad_max_unavailable_is_an_error_of_that_pool_only(
    sim: ApiServer, api: KubeClient, value: str
) -> None:
    sim.put(mc("00-worker"))
    sim.put(pool(maxUnavailable=value))
    add_nodes(sim, 1, BOOT)
    pools = PoolSync(api)
    pools.sync()
    assert pools.errors == [
        f"pool worker: spec.maxUnavailable: {value!r} is not an integer or a percentage"
    ]


def test_a_drain_that_fails_holds_neither_other_drains_nor_the_pools(sim: ApiServer, api: KubeClient) -> None:
    sim.put(mc("00-worker"))
    sim.put(pool(maxUnavailable=2))
    add_nodes(sim, 2, BOOT)
    web = Replicas(sim, "web", 1)
    web.reconcile()  # on worker-0
    for name in ("a", "b"):  # two budgets select the pod: its eviction is a 500, not a 429
        sim.put({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                 "metadata": {"namespace": "shop", "name": name},
                 "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}})  # fmt: skip
    drains, pools = DrainSync(api), PoolSync(api)
    for _ in range(6):
        drains.sync()
        pools.sync()
        for node in sim.objects("Node"):
            agent_step(sim, node["metadata"]["name"])
    assert [e.split(":")[0] for e in drains.errors] == ["node worker-0"]
    assert rollout.is_updated(sim.get("Node", "worker-1"), target(sim))  # its drain went through
    assert pools.errors == []


def test_a_config_that_cannot_be_rendered_keeps_the_target_and_says_why(
    sim: ApiServer, api: KubeClient
) -> None:
    sim.put(mc("00-worker"))
    sim.put(pool())
    add_nodes(sim, 1, BOOT)
    PoolSync(api).sync()
    kept = target(sim)
    sim.put(mc("50-bad", kernelType="rt"))
    PoolSync(api).sync()
    conditions = {c["type"]: c for c in sim.get("MachineConfigPool", "worker")["status"]["conditions"]}
    assert conditions["RenderDegraded"]["status"] == "True"
    assert conditions["RenderDegraded"]["message"] == (
        "Failed to render configuration for pool worker: "
        "MachineConfig '50-bad': spec.kernelType: kernelType=rt is invalid"
    )
    assert target(sim) == kept
