"""The agent when the API server misbehaves, and when the agent itself is killed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from builders import ign_file, mc_object
from fakeapi import FakeApi
from harness import NODE, Agent, answer_drains, config_a, done_on, make_root

from mcd.kube import annotations as ann

pytestmark = pytest.mark.allow_commands


def _setup(cluster: FakeApi, tmp_path: Path) -> Path:
    a = config_a()
    b = mc_object("rendered-worker-b", files=[ign_file("/etc/mcd-test/a.conf", "a=2\n")],
                  ssh_keys=["ssh-ed25519 AAAA one", "ssh-ed25519 BBBB two"])  # fmt: skip
    root = make_root(tmp_path, a)
    cluster.add_mc(a)
    cluster.add_mc(b)
    answer_drains(cluster)
    name = a["metadata"]["name"]
    cluster.add_node(NODE, {ann.CURRENT_CONFIG: name, ann.DESIRED_CONFIG: name, ann.STATE: "Done"})
    return root


def _started(cluster: FakeApi) -> None:
    want = "uncordon-rendered-worker-a"
    cluster.wait_node(NODE, lambda n: n["metadata"]["annotations"].get(ann.LAST_APPLIED_DRAIN) == want)


def _state_writes(cluster: FakeApi, state: str) -> int:
    return sum(
        1
        for a in cluster.node_writes(NODE)
        if a.status == 200
        and ((a.body or {}).get("metadata", {}).get("annotations") or {}).get(ann.STATE) == state
    )


def test_500s_resets_dropped_watches_and_410s_lose_no_transition_and_write_none_twice(
    cluster: FakeApi, start_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    root = _setup(cluster, tmp_path)
    start_agent(cluster, root)
    _started(cluster)
    cluster.faults.errors_500 = 4
    cluster.faults.resets = 3
    cluster.faults.gone_on_resume = 1
    cluster.faults.drop_watches = True
    cluster.patch_node(NODE, {"metadata": {"annotations": {ann.DESIRED_CONFIG: "rendered-worker-b"}}})
    cluster.wait_node(NODE, done_on("rendered-worker-b"), timeout=60)
    assert (root / "etc/mcd-test/a.conf").read_text() == "a=2\n"
    assert cluster.state_history(NODE) == ["Done", "Working", "Done"]
    assert _state_writes(cluster, "Working") == 1
    assert cluster.noop_patches == []
    assert cluster.faults.errors_500 == cluster.faults.resets == cluster.faults.gone_on_resume == 0


def test_only_its_own_node_and_the_objects_it_needs_are_touched(
    cluster: FakeApi, start_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    root = _setup(cluster, tmp_path)
    cluster.add_node("worker-1", {ann.DESIRED_CONFIG: "rendered-worker-b"})
    cluster.add_mc(mc_object("rendered-unrelated"))
    start_agent(cluster, root)
    _started(cluster)
    cluster.patch_node(NODE, {"metadata": {"annotations": {ann.DESIRED_CONFIG: "rendered-worker-b"}}})
    cluster.wait_node(NODE, done_on("rendered-worker-b"))
    cluster.wait_event("NodeDone", 2)
    for entry in cluster.audit:
        assert "worker-1" not in entry.path + entry.query
        assert "rendered-unrelated" not in entry.path
        if entry.path == "/api/v1/nodes":
            assert f"metadata.name%3D{NODE}" in entry.query or f"metadata.name={NODE}" in entry.query
    writes = {(a.method, a.path.rsplit("/", 1)[0] if a.method == "POST" else a.path) for a in cluster.audit
              if a.method != "GET"}  # fmt: skip
    assert writes == {
        ("PATCH", f"/api/v1/nodes/{NODE}"),
        ("POST", "/api/v1/namespaces/openshift-machine-config-operator"),
    }
    assert cluster.noop_patches == []
    assert all(a.user_agent.startswith("machine-config-daemon/") for a in cluster.audit if a.status)


@pytest.mark.parametrize("kill_after_writes", [1, 2])
def test_sigkill_after_a_node_write_of_an_update_then_restart_converges(
    cluster: FakeApi, start_agent: Callable[..., Agent], tmp_path: Path, kill_after_writes: int
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
    cluster: FakeApi, start_agent: Callable[..., Agent], tmp_path: Path, kill_at: int
) -> None:
    root = _setup(cluster, tmp_path)
    # the n-th crash point of the process (mcd.failpoints): all of them are inside the update
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
