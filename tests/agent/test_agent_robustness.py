"""The agent when the API server misbehaves, and when the agent itself is killed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from builders import ign_file, mc_object
from harness import NODE, Agent, config_a, done_on, make_root
from simcluster import Cluster

from mcd.node import annotations as ann

pytestmark = pytest.mark.allow_commands


def _setup(cluster: Cluster, tmp_path: Path) -> Path:
    a = config_a()
    b = mc_object("rendered-worker-b", files=[ign_file("/etc/mcd-test/a.conf", "a=2\n")],
                  ssh_keys=["ssh-ed25519 AAAA one", "ssh-ed25519 BBBB two"])  # fmt: skip
    root = make_root(tmp_path, a)
    cluster.add_mc(a)
    cluster.add_mc(b)
    cluster.answer_drains()
    name = a["metadata"]["name"]
    cluster.add_node(NODE, {ann.CURRENT_CONFIG: name, ann.DESIRED_CONFIG: name, ann.STATE: "Done"})
    return root


def _started(cluster: Cluster) -> None:
    want = "uncordon-rendered-worker-a"
    cluster.wait_node(NODE, lambda n: n["metadata"]["annotations"].get(ann.LAST_APPLIED_DRAIN) == want)


def _state_writes(cluster: Cluster, state: str) -> int:
    """The agent's successful node patches that set `state`."""
    return sum(
        1
        for r in cluster.node_writes(NODE)
        if r.code == 200
        and ((r.body or {}).get("metadata", {}).get("annotations") or {}).get(ann.STATE) == state
    )


def test_500s_resets_dropped_watches_and_410s_lose_no_transition_and_write_none_twice(
    cluster: Cluster, start_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    root = _setup(cluster, tmp_path)
    start_agent(cluster, root)
    _started(cluster)
    faults = cluster.sim.faults
    rules = [
        faults.fail(500, times=1, verb="patch", resource="nodes"),
        faults.fail(500, times=1, resource="machineconfigs"),
        faults.reset(times=1, verb="patch", resource="nodes"),
        faults.reset(times=1, verb="get"),
        faults.expire(times=1, resource="nodes"),
    ]
    cluster.drop_watches()
    cluster.patch_node(NODE, {"metadata": {"annotations": {ann.DESIRED_CONFIG: "rendered-worker-b"}}})
    cluster.wait(lambda: all(r.times == 0 for r in rules), f"every fault to fire: {rules}", timeout=60)
    cluster.stop_dropping_watches()
    assert sum(r.verb == "watch" for r in cluster.requests()) > 2
    cluster.wait_node(NODE, done_on("rendered-worker-b"), timeout=60)
    assert (root / "etc/mcd-test/a.conf").read_text() == "a=2\n"
    assert cluster.state_history(NODE) == ["Done", "Working", "Done"]
    assert _state_writes(cluster, "Working") == 1
    assert cluster.noop_node_writes() == 0


def test_only_its_own_node_and_the_objects_it_needs_are_touched(
    cluster: Cluster, start_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    root = _setup(cluster, tmp_path)
    cluster.add_node("worker-1", {ann.DESIRED_CONFIG: "rendered-worker-b"})
    cluster.add_mc(mc_object("rendered-unrelated"))
    start_agent(cluster, root)
    _started(cluster)
    cluster.patch_node(NODE, {"metadata": {"annotations": {ann.DESIRED_CONFIG: "rendered-worker-b"}}})
    cluster.wait_node(NODE, done_on("rendered-worker-b"))
    cluster.wait_event("NodeDone", 2)
    requests = cluster.requests()
    assert requests
    for r in requests:
        assert "worker-1" not in r.uri
        assert "rendered-unrelated" not in r.uri
        if r.resource == "nodes" and not r.name:  # a list or a watch: of this node only
            assert f"metadata.name%3D{NODE}" in r.uri or f"metadata.name={NODE}" in r.uri
        # pods and budgets are only listed, to name the budgets that would block a drain
        assert r.resource in {"nodes", "machineconfigs", "machineconfigurations", "controllerconfigs",
                              "events", "pods", "poddisruptionbudgets", "machineconfignodes"}  # fmt: skip
        if r.resource == "machineconfignodes":  # its own, named after the node
            assert r.name == NODE or (r.verb == "create" and not r.name), r
    writes = {(r.verb, r.resource, r.name) for r in requests if r.verb not in ("get", "list", "watch")}
    mcn_writes = {("create", "machineconfignodes", ""), ("update", "machineconfignodes", NODE)}
    assert writes == {("patch", "nodes", NODE), ("create", "events", ""), *mcn_writes}
    assert cluster.noop_node_writes() == 0


@pytest.mark.parametrize("kill_after_writes", [1, 2])
def test_sigkill_after_a_node_write_of_an_update_then_restart_converges(
    cluster: Cluster, start_agent: Callable[..., Agent], tmp_path: Path, kill_after_writes: int
) -> None:
    root = _setup(cluster, tmp_path)
    agent = start_agent(cluster, root)
    _started(cluster)
    before = len(cluster.node_writes(NODE))
    cluster.patch_node(NODE, {"metadata": {"annotations": {ann.DESIRED_CONFIG: "rendered-worker-b"}}})
    cluster.wait(
        lambda: len(cluster.node_writes(NODE)) >= before + kill_after_writes, "the update's node writes"
    )
    agent.kill()
    start_agent(cluster, root)
    node = cluster.wait_node(NODE, done_on("rendered-worker-b"), timeout=30)
    assert node["metadata"]["annotations"][ann.REASON] == ""
    assert (root / "etc/mcd-test/a.conf").read_text() == "a=2\n"
    assert not (root / "etc/machine-config-daemon/txn.json").exists()


@pytest.mark.parametrize("kill_at", [2, 7])
def test_sigkill_inside_the_update_transaction_then_restart_converges(
    cluster: Cluster, start_agent: Callable[..., Agent], tmp_path: Path, kill_at: int
) -> None:
    root = _setup(cluster, tmp_path)
    # the n-th crash point of the process (mcd.host.failpoints): all of them are inside the update
    agent = start_agent(cluster, root, kill_at=kill_at)
    _started(cluster)
    cluster.patch_node(NODE, {"metadata": {"annotations": {ann.DESIRED_CONFIG: "rendered-worker-b"}}})
    assert agent.proc is not None
    assert agent.proc.wait(20) == -9
    start_agent(cluster, root)
    node = cluster.wait_node(NODE, done_on("rendered-worker-b"), timeout=30)
    assert node["metadata"]["annotations"][ann.REASON] == ""
    assert (root / "etc/mcd-test/a.conf").read_text() == "a=2\n"
    assert not (root / "etc/machine-config-daemon/txn.json").exists()
