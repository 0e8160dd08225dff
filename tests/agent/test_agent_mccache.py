"""The agent's MachineConfig watch (`mcd.agent.mccache`), as a process against the stand-in API
server: a config created before desiredConfig names it is taken from the watch (the audit log
shows no GET of it); a config the watch did not deliver, one of another name, one deleted and
one held when the watch broke off are read with a GET; the watch outlives 410s and API errors."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from builders import ign_file, mc_object
from harness import NODE, Agent, done_on, in_state, make_root
from simcluster import Cluster

from mcd.host import state
from mcd.node import annotations as ann

pytestmark = pytest.mark.allow_commands

A_FILE = "etc/containers/policy.json"  # the default node disruption policy: a crio reload
WATCHING = "watching MachineConfigs from now on"


def _config(name: str, value: str) -> dict[str, Any]:
    obj: dict[str, Any] = mc_object(name, files=[ign_file(f"/{A_FILE}", f"a={value}\n")])
    return obj


def _start(
    cluster: Cluster, start_agent: Callable[..., Agent], tmp_path: Path, *before: str
) -> tuple[Agent, Path]:
    """The node Done in rendered-worker-a, configs `before` created before the agent starts, the
    agent started and its MachineConfig watch open."""
    a = _config("rendered-worker-a", "1")
    root = make_root(tmp_path, a)
    cluster.add_mc(a)
    for name in before:
        cluster.add_mc(_config(name, name[-1]))
    cluster.answer_drains()
    cluster.add_node(NODE, {ann.CURRENT_CONFIG: "rendered-worker-a", ann.DESIRED_CONFIG: "rendered-worker-a",
                            ann.STATE: "Done"})  # fmt: skip
    agent = start_agent(cluster, root)
    agent.wait_log(WATCHING)
    return agent, root


def _update(cluster: Cluster, name: str) -> None:
    cluster.patch_node(NODE, {"metadata": {"annotations": {ann.DESIRED_CONFIG: name}}})
    cluster.wait_node(NODE, done_on(name), timeout=60)


def _gets(cluster: Cluster, name: str) -> list[int]:
    """The answers to the agent's GETs of the MachineConfig `name`."""
    return [r.code for r in cluster.requests()
            if r.verb == "get" and r.resource == "machineconfigs" and r.name == name]  # fmt: skip


def test_a_config_made_before_desiredconfig_names_it_is_taken_from_the_watch(
    cluster: Cluster, start_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    agent, root = _start(cluster, start_agent, tmp_path, "rendered-worker-b")
    cluster.add_mc(_config("rendered-worker-c", "c"))  # the render controller's, then the node's
    agent.wait_log("holding MachineConfig rendered-worker-c")
    _update(cluster, "rendered-worker-b")  # made before the agent started: read, as without the watch
    assert (root / A_FILE).read_text() == "a=b\n"
    assert _gets(cluster, "rendered-worker-b") == [200]
    _update(cluster, "rendered-worker-c")  # held across the update to another config, then taken
    agent.wait_log("MachineConfig rendered-worker-c taken from the watch")
    assert (root / A_FILE).read_text() == "a=c\n"
    assert _gets(cluster, "rendered-worker-c") == []
    # recorded as the watch served it: the object the API server holds
    recorded = json.loads((root / state.CURRENT_CONFIG.lstrip("/")).read_bytes())
    assert recorded == cluster.sim.get("MachineConfig", "rendered-worker-c")
    assert "rebooting" not in agent.log.lower()


def test_a_deleted_config_is_not_used(
    cluster: Cluster, start_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    agent, root = _start(cluster, start_agent, tmp_path)
    cluster.add_mc(_config("rendered-worker-b", "b"))
    agent.wait_log("holding MachineConfig rendered-worker-b")
    cluster.sim.delete("MachineConfig", "rendered-worker-b")
    agent.wait_log("no longer holding MachineConfig rendered-worker-b: deleted")
    cluster.patch_node(NODE, {"metadata": {"annotations": {ann.DESIRED_CONFIG: "rendered-worker-b"}}})
    node = cluster.wait_node(NODE, in_state("Degraded"), timeout=60)
    assert "rendered-worker-b" in node["metadata"]["annotations"][ann.REASON]
    assert 404 in _gets(cluster, "rendered-worker-b")
    assert (root / A_FILE).read_text() == "a=1\n"


@pytest.mark.parametrize("fault", ["expire", "fail"])
def test_a_config_held_when_the_watch_broke_off_is_read_and_the_watch_goes_on(
    fault: str, cluster: Cluster, start_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    agent, root = _start(cluster, start_agent, tmp_path)
    cluster.add_mc(_config("rendered-worker-b", "b"))
    agent.wait_log("holding MachineConfig rendered-worker-b")
    faults = cluster.sim.faults
    # the watch ends and cannot be resumed: 410 Gone (list again), or the server failing
    rule = (
        faults.expire(times=1, resource="machineconfigs")
        if fault == "expire"
        else faults.fail(500, times=2, verb="watch", resource="machineconfigs")
    )
    listed = agent.log.count(WATCHING)
    faults.end_watches()
    agent.wait_log("no longer holding MachineConfig rendered-worker-b: the watch broke off")
    cluster.wait(lambda: rule.times == 0, "the fault to fire")
    _update(cluster, "rendered-worker-b")
    assert _gets(cluster, "rendered-worker-b") == [200]
    # the watch goes on: after a 410 listed again from now (what is created from then on is
    # seen), after the errors resumed from the last version seen (nothing created is missed)
    if fault == "expire":
        cluster.wait(lambda: agent.log.count(WATCHING) > listed, "the list after the 410")
    cluster.add_mc(_config("rendered-worker-c", "c"))
    agent.wait_log("holding MachineConfig rendered-worker-c")
    _update(cluster, "rendered-worker-c")
    assert _gets(cluster, "rendered-worker-c") == []
    assert (root / A_FILE).read_text() == "a=c\n"
    assert "thread mc-watch failed" not in agent.log
