"""Pools with an empty node selector (issue 29 item 1): as upstream's node controller, such a
selector matches no node, so no node leaves the pool that manages it, and a literal `{}` gets a
`SelectingAll` Warning Event on the pool (once) and nothing else."""

from __future__ import annotations

from typing import Any

import pytest
from fakes import add_nodes, agent_step, mc, pool
from mcd_sim.apiserver import ApiServer

from mcd.controller.drain import DrainSync
from mcd.controller.events import PoolEvents
from mcd.controller.pools import PoolSync
from mcd.kube.client import KubeClient
from mcd.node import annotations as ann

BOOT = "rendered-worker-boot"
NS = "openshift-machine-config-operator"
ROLE = "machineconfiguration.openshift.io/role"


def passes(sim: ApiServer, pools: PoolSync, drains: DrainSync, count: int = 6) -> None:
    for _ in range(count):
        drains.sync()
        pools.sync()
        for node in sim.objects("Node"):
            agent_step(sim, node["metadata"]["name"])


def status(sim: ApiServer, name: str) -> dict[str, Any]:
    return dict((sim.get("MachineConfigPool", name) or {}).get("status") or {})


def target(sim: ApiServer, name: str) -> str:
    return str(
        ((sim.get("MachineConfigPool", name) or {}).get("spec") or {})
        .get("configuration", {})
        .get("name", "")
    )


def events(sim: ApiServer, reason: str) -> list[dict[str, Any]]:
    return [e for e in sim.objects("Event", NS) if e.get("reason") == reason]


@pytest.mark.parametrize("selector", [{"matchLabels": {}}, {"matchExpressions": []}, {}])
def test_an_empty_node_selector_takes_no_node(
    sim: ApiServer, api: KubeClient, selector: dict[str, Any]
) -> None:
    sim.put(mc("00-worker"))
    sim.put(mc("00-empty", role="empty"))
    sim.put(pool())
    pools, drains = PoolSync(api, events=PoolEvents(api, NS)), DrainSync(api, retry_seconds=0.0)
    add_nodes(sim, 3, BOOT, **{"node-role.kubernetes.io/worker": ""})
    passes(sim, pools, drains, 2)
    worker_target = target(sim, "worker")
    assert status(sim, "worker")["machineCount"] == 3
    sim.put(pool("empty", nodeSelector=selector))
    passes(sim, pools, drains)
    assert target(sim, "empty").startswith(
        "rendered-empty-"
    )  # rendered, as upstream's render controller does
    for node in sim.objects("Node"):  # every worker stays on the worker pool's config
        assert node["metadata"]["annotations"][ann.DESIRED_CONFIG] == worker_target
    assert status(sim, "worker")["machineCount"] == 3
    # and a new worker config still rolls to the workers
    sim.put(mc("50-worker"))
    passes(sim, pools, drains, 12)
    new = target(sim, "worker")
    assert new != worker_target
    assert all(n["metadata"]["annotations"][ann.CURRENT_CONFIG] == new for n in sim.objects("Node"))
    assert status(sim, "worker")["updatedMachineCount"] == 3
    if selector == {}:
        warned = events(sim, "SelectingAll")
        assert len(warned) == 1  # once, not once per pass
        assert warned[0]["type"] == "Warning"
        assert warned[0]["involvedObject"]["name"] == "empty"
        assert warned[0]["message"] == (
            "This machineconfigpool is selecting all nodes. A non-empty selector is required."
        )
    else:
        assert status(sim, "empty")["machineCount"] == 0
        assert events(sim, "SelectingAll") == []
