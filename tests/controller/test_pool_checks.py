"""What stops a pool without hiding it (issue 29 items 2 and 3): a rendered config the nodes could
not apply in place sets RenderDegraded and touches no node, as upstream's render controller
does; a bad maxUnavailable moves no node but the status is still written (a Degraded node
shows) with the InvalidSpec condition, and the WARNING is said once, not every pass."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from fakes import add_nodes, mc, pool
from mcd_sim.apiserver import ApiServer

from mcd.controller.pools import PoolSync
from mcd.kube.client import KubeClient
from mcd.node import annotations as ann

BOOT = "rendered-worker-boot"


def conditions(sim: ApiServer) -> dict[str, dict[str, Any]]:
    status = (sim.get("MachineConfigPool", "worker") or {}).get("status") or {}
    return {c["type"]: c for c in status.get("conditions") or []}


def target(sim: ApiServer) -> str:
    spec = (sim.get("MachineConfigPool", "worker") or {}).get("spec") or {}
    return str((spec.get("configuration") or {}).get("name", ""))


def desired(sim: ApiServer) -> dict[str, str]:
    return {
        n["metadata"]["name"]: n["metadata"]["annotations"][ann.DESIRED_CONFIG] for n in sim.objects("Node")
    }


def finish(sim: ApiServer, config: str) -> None:
    """Every node Done on `config`, as its agent would report it."""
    done = {ann.CURRENT_CONFIG: config, ann.DESIRED_CONFIG: config, ann.STATE: "Done"}
    for node in sim.objects("Node"):
        sim.patch("Node", node["metadata"]["name"], {"metadata": {"annotations": done}})


def test_an_unreconcilable_config_is_render_degraded_and_moves_no_node(
    sim: ApiServer, api: KubeClient
) -> None:
    sim.put(mc("00-worker"))
    sim.put(pool(maxUnavailable=2))
    add_nodes(sim, 3, BOOT)
    pools = PoolSync(api)
    pools.sync()
    first = target(sim)
    finish(sim, first)
    pools.sync()
    before = desired(sim)
    disks = {
        "ignition": {"version": "3.4.0"},
        "storage": {"disks": [{"device": "/dev/sdb", "wipeTable": True}]},
    }
    sim.put({**mc("99-disks"), "spec": {"config": disks}})
    for _ in range(3):
        pools.sync()
    assert target(sim) == first  # the target stays
    assert desired(sim) == before  # no node touched
    render = conditions(sim)["RenderDegraded"]
    assert render["status"] == "True"
    assert render["message"] == (
        "Failed to render configuration for pool worker: reconciliation failed between current config "
        f'"{first}" and base config "99-disks": ignition disks section contains changes'
    )
    assert conditions(sim)["Degraded"]["status"] == "True"
    assert not [
        c
        for c in sim.objects("MachineConfig")
        if c["metadata"]["name"] not in (first, "00-worker", "99-disks")
    ]
    sim.delete("MachineConfig", "99-disks")
    pools.sync()
    assert conditions(sim)["RenderDegraded"]["status"] == "False"
    assert target(sim) == first


def test_a_bad_max_unavailable_still_shows_the_pool(
    sim: ApiServer, api: KubeClient, caplog: pytest.LogCaptureFixture
) -> None:
    sim.put(mc("00-worker"))
    sim.put(pool(maxUnavailable="half"))
    add_nodes(sim, 2, BOOT)
    sim.patch(
        "Node", "worker-1", {"metadata": {"annotations": {ann.STATE: "Degraded", ann.REASON: "disk full"}}}
    )
    pools = PoolSync(api)
    with caplog.at_level(logging.INFO, logger="mcd.controller"):
        for _ in range(3):
            pools.sync()
    assert desired(sim) == {"worker-0": BOOT, "worker-1": BOOT}  # no node moved
    status = (sim.get("MachineConfigPool", "worker") or {}).get("status") or {}
    assert status["machineCount"] == 2 and status["degradedMachineCount"] == 1
    assert conditions(sim)["NodeDegraded"]["message"] == 'Node worker-1 is reporting: "disk full"'
    invalid = conditions(sim)["InvalidSpec"]
    expected = "pool worker: spec.maxUnavailable: 'half' is not an integer or a percentage"
    assert (invalid["status"], invalid["reason"], invalid["message"]) == (
        "True",
        "InvalidMaxUnavailable",
        expected,
    )
    warnings = [
        r for r in caplog.records if r.levelno == logging.WARNING and "maxUnavailable" in r.getMessage()
    ]
    assert len(warnings) == 1  # once, not every pass
    assert pools.errors == [expected]
    sim.patch("MachineConfigPool", "worker", {"spec": {"maxUnavailable": 1}})
    sim.patch("Node", "worker-1", {"metadata": {"annotations": {ann.STATE: "Done", ann.REASON: ""}}})
    pools.sync()
    assert conditions(sim)["InvalidSpec"]["status"] == "False"
    assert desired(sim)["worker-0"] == target(sim)  # moving again
