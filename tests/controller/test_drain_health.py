"""A drain's health as operators see it (issue 29 items 5, 6, 11): a drain a budget holds is
retried as upstream's drain controller retries (every 5 s, after 10 min every 5 min with
`DrainThresholdExceeded`, after 1 h `DrainFailed` and `mcc_drain_err`), its budgets named on the
node and the pool once it has been held 30 s; the phases go on the node's MachineConfigNode;
`lastAppliedDrain` is written only when a fresh read shows the node still cordoned. The
clock is the test's: no test waits for a threshold."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

from fakes import DESIRED_DRAIN, LAST_APPLIED_DRAIN, Replicas, add_nodes, mc, pool
from mcd_sim.apiserver import ApiServer

from mcd.controller.drain import DrainSync
from mcd.controller.events import PoolEvents
from mcd.controller.metrics import ControllerMetrics, MetricsEndpoint
from mcd.controller.pools import PoolSync
from mcd.kube.client import KubeClient
from mcd.node import annotations as ann

NS = "openshift-machine-config-operator"
BOOT = "rendered-worker-boot"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def events(sim: ApiServer, reason: str, kind: str = "Node") -> list[str]:
    return [
        e["message"]
        for e in sim.objects("Event", NS)
        if e.get("reason") == reason and e["involvedObject"]["kind"] == kind
    ]


def ask(sim: ApiServer, request: str) -> None:
    sim.patch("Node", "worker-0", {"metadata": {"annotations": {DESIRED_DRAIN: request}}})


def mcn_conditions(sim: ApiServer) -> dict[str, str]:
    obj = sim.get("MachineConfigNode", "worker-0") or {}
    return {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or []}


def last_applied(sim: ApiServer) -> str:
    return str(
        ((sim.get("Node", "worker-0") or {})["metadata"].get("annotations") or {}).get(LAST_APPLIED_DRAIN, "")
    )


def test_a_drain_held_by_a_budget_escalates_as_upstream_and_names_the_budget(
    sim: ApiServer, api: KubeClient
) -> None:
    sim.put(mc("00-worker"))
    sim.put(pool())
    add_nodes(sim, 1, BOOT)
    web = Replicas(sim, "web", 1)
    web.reconcile()
    spec = {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}
    meta = {"namespace": "shop", "name": "web"}
    sim.put({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": meta, "spec": spec})
    clock = Clock()
    pool_events = PoolEvents(api, NS)
    drains = DrainSync(api, clock=clock, events=pool_events)
    pools = PoolSync(api, events=pool_events, stuck=lambda: drains.stuck)
    ask(sim, f"drain-{BOOT}")
    drains.sync()
    assert (sim.get("Node", "worker-0") or {})["spec"]["unschedulable"] is True
    assert drains.blocked == ["shop/web-1"] and drains.next_retry() == 5.0
    assert events(sim, "DrainBlocked") == []  # not at the first refusal
    clock.now = 31.0
    drains.sync()
    [named] = events(sim, "DrainBlocked")
    assert "PodDisruptionBudget shop/web allows no disruption and never will as it stands" in named
    assert "1 healthy of 1 expected, 1 needed" in named
    pools.sync()
    assert events(sim, "DrainBlocked", "MachineConfigPool") == [named]  # on the pool too
    pools.sync()
    drains.sync()
    assert (
        len(events(sim, "DrainBlocked")) == 1 and len(events(sim, "DrainBlocked", "MachineConfigPool")) == 1
    )
    clock.now = 601.0
    drains.sync()
    [exceeded] = events(sim, "DrainThresholdExceeded")
    assert exceeded.startswith(
        "Drain failed. Drain has been failing for more than 10 minutes. Waiting 5 minutes then retrying."
    )
    assert drains.next_retry() == 300.0  # backoff: no longer every 5 s
    clock.now = 700.0
    drains.sync()
    assert drains.blocked == []  # not tried before its time
    clock.now = 3601.0
    drains.sync()
    assert events(sim, "DrainFailed") == [
        "node worker-0: drain exceeded timeout: 1h0m0s. Will continue to retry."
    ]
    assert 'mcc_drain_err{node="worker-0"} 1.0' in drains.metrics.render().decode()
    # the budget is relaxed: the drain completes and the metric goes
    sim.patch("PodDisruptionBudget", "web", {"spec": {"minAvailable": 0}}, "shop")
    clock.now = 4000.0
    for _ in range(5):
        drains.sync()
        if last_applied(sim):
            break
    assert last_applied(sim) == f"drain-{BOOT}"
    drains.sync()
    assert "mcc_drain_err{" not in drains.metrics.render().decode()
    assert drains.stuck == {}


def test_the_drain_phases_go_on_the_machineconfignode(sim: ApiServer, api: KubeClient) -> None:
    add_nodes(sim, 1, BOOT)
    sim.patch("Node", "worker-0", {"metadata": {"annotations": {ann.DESIRED_CONFIG: "rendered-worker-x"}}})
    drains = DrainSync(api, events=PoolEvents(api, NS))
    ask(sim, "drain-rendered-worker-x")
    drains.sync()
    assert last_applied(sim) == "drain-rendered-worker-x"
    conditions = mcn_conditions(sim)
    assert (conditions["Cordoned"], conditions["Drained"]) == ("True", "True")
    assert conditions["Uncordoned"] == "False"
    ask(sim, "uncordon-rendered-worker-x")
    drains.sync()
    conditions = mcn_conditions(sim)
    assert (conditions["Uncordoned"], conditions["UpdateComplete"]) == ("True", "True")
    assert not (sim.get("Node", "worker-0") or {})["spec"].get("unschedulable")


def test_last_applied_drain_waits_for_a_node_still_cordoned(sim: ApiServer, api: KubeClient) -> None:
    add_nodes(sim, 1, BOOT)
    drains = DrainSync(api, events=PoolEvents(api, NS))
    read = api.get_node
    uncordoned = []

    def get_node(name: str) -> dict[str, Any]:
        if not uncordoned:  # someone uncordons the node as its last pod goes
            uncordoned.append(name)
            sim.patch("Node", name, {"spec": {"unschedulable": False}})
        return read(name)

    api.get_node = get_node  # type: ignore[method-assign]
    ask(sim, f"drain-{BOOT}")
    drains.sync()
    assert uncordoned == ["worker-0"]
    assert last_applied(sim) == ""  # not told the drain is done: pods may have landed
    drains.sync()  # the next pass cordons it again and completes
    assert (sim.get("Node", "worker-0") or {})["spec"]["unschedulable"] is True
    assert last_applied(sim) == f"drain-{BOOT}"


def test_the_metrics_endpoint_serves_mcc_drain_err() -> None:
    metrics = ControllerMetrics()
    metrics.drain_failed("worker-3")
    endpoint = MetricsEndpoint(metrics, "127.0.0.1:0")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{endpoint.port}/metrics", timeout=10) as answer:
            text = answer.read().decode()
    finally:
        endpoint.close()
    assert 'mcc_drain_err{node="worker-3"} 1.0' in text


def test_a_drain_lists_only_the_pods_of_its_node(sim: ApiServer, api: KubeClient, tmp_path: Path) -> None:
    add_nodes(sim, 3, BOOT)
    drains = DrainSync(api, events=PoolEvents(api, NS))
    drains.sync()  # nothing asked: no pod listed
    ask(sim, f"drain-{BOOT}")
    drains.sync()
    uris = [json.loads(line)["requestURI"] for line in (tmp_path / "audit.log").read_text().splitlines()]
    pods = [u for u in uris if u.split("?")[0] == "/api/v1/pods"]
    assert pods == ["/api/v1/pods?fieldSelector=spec.nodeName%3Dworker-0"]
