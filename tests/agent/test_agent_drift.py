"""The drift monitor inside the agent process: a hand edit makes the node Degraded with upstream's
text at once, putting the file back returns it to Done without a reboot, and the agent's own
update is never taken for drift."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from builders import ign_file, mc_object
from harness import NODE, Agent, config_a, done_on, in_state, make_root
from simcluster import Cluster

from mcd.host.root import HostRoot
from mcd.host.status import read_status
from mcd.node import annotations as ann

pytestmark = pytest.mark.allow_commands

A = "/etc/mcd-test/a.conf"


def _started(
    cluster: Cluster,
    start_agent: Callable[..., Agent],
    tmp_path: Path,
    *extra: str,
    a: dict[str, Any] | None = None,
) -> Path:
    a = a or config_a()
    root = make_root(tmp_path, a)
    cluster.add_mc(a)
    cluster.answer_drains()
    cluster.add_node(NODE, {ann.CURRENT_CONFIG: "rendered-worker-a", ann.DESIRED_CONFIG: "rendered-worker-a",
                            ann.STATE: "Done"})  # fmt: skip
    start_agent(cluster, root, *extra)
    cluster.wait_node(NODE, done_on("rendered-worker-a"))
    cluster.wait_event("ConfigDriftMonitorStarted")
    # the boot sync's on-disk check comes after the monitor started: a change made before it
    # ends would be that check's finding, not the monitor's. NodeDone is posted after it passed.
    cluster.wait_event("NodeDone")
    return root


def _eventually(pred: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    """Poll a condition on files (nothing notifies the test when the agent writes them)."""
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _degraded_reasons(cluster: Cluster) -> list[str]:
    """The reasons of the node's commits while Degraded, in order (from the server's own history)."""
    out: list[str] = []
    for e in cluster.history:
        a = e.obj["metadata"].get("annotations") or {}
        if a.get(ann.STATE) == "Degraded" and (not out or out[-1] != a.get(ann.REASON, "")):
            out.append(a.get(ann.REASON, ""))
    return out


def test_hand_edit_degrades_with_upstream_text_and_putting_it_back_is_done_without_reboot(
    cluster: Cluster, start_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    root = _started(cluster, start_agent, tmp_path)
    path = root / A.lstrip("/")
    path.write_text("a=2\n")
    cluster.wait_node(NODE, in_state("Degraded"))
    # the monitor's own report: upstream's bare message (a later preflight check prefixes it)
    assert _degraded_reasons(cluster)[0] == f'content mismatch for file "{A}"'
    cluster.wait_event("ConfigDriftDetected")
    [msg] = set(cluster.event_messages("ConfigDriftDetected"))
    assert msg == f'content mismatch for file "{A}"'
    path.write_text("a=1\n")
    node = cluster.wait_node(NODE, done_on("rendered-worker-a"), timeout=10)
    assert node["metadata"]["annotations"][ann.REASON] == ""
    assert "Reboot" not in cluster.event_reasons()
    assert not (root / "etc/machine-config-daemon/reboot-pending").exists()


def test_chown_degrades_and_is_recorded_for_status(
    cluster: Cluster, start_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    root = _started(cluster, start_agent, tmp_path)
    os.chown(root / A.lstrip("/"), 1000, 1000)
    cluster.wait_node(NODE, in_state("Degraded"))
    reason = f'owner mismatch for file: "{A}"; expected: 0:0; received: 1000:1000'
    assert _degraded_reasons(cluster)[0] == reason
    # the sync the Degraded node gets keeps it Degraded: the preflight check compares owners too
    cluster.wait_event("PreflightConfigDriftCheckFailed")
    node = cluster.wait_node(NODE, in_state("Degraded"))
    assert node["metadata"]["annotations"][ann.REASON].endswith(reason)
    hr = HostRoot(root)
    _eventually(lambda: read_status(hr).state == "Degraded", "Degraded recorded for mcd status")
    os.chown(root / A.lstrip("/"), 0, 0)
    cluster.wait_node(NODE, done_on("rendered-worker-a"), timeout=10)
    assert cluster.state_history(NODE) == ["Done", "Degraded", "Done"]
    _eventually(lambda: read_status(hr).state == "Done", "Done recorded for mcd status")
    last = read_status(hr).last_drift
    assert last is not None and last["path"] == A and last["reason"] == reason


def test_observe_policy_reports_but_leaves_the_node_done(
    cluster: Cluster, start_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    root = _started(cluster, start_agent, tmp_path, "--drift-policy", "observe")
    (root / A.lstrip("/")).chmod(0o600)
    cluster.wait_event("ConfigDriftDetected")
    assert cluster.state_history(NODE) == ["Done"]


def test_heal_policy_puts_the_file_back_and_degrades_when_it_drifts_again(
    cluster: Cluster, start_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    policy_json = "/etc/containers/policy.json"
    a = mc_object("rendered-worker-a", files=[ign_file(A, "a=1\n"), ign_file(policy_json, "{}\n")])
    root = _started(cluster, start_agent, tmp_path, "--drift-policy", "heal", a=a)
    path = root / policy_json.lstrip("/")
    path.write_text('{"default": []}\n')
    cluster.wait_event("ConfigDriftHealed")
    assert path.read_text() == "{}\n"  # the heal wrote it before its Event
    assert cluster.state_history(NODE) == ["Done"]
    path.write_text('{"x": 1}\n')  # again within the window: a fight is reported, not fought
    cluster.wait_node(NODE, in_state("Degraded"))
    assert _degraded_reasons(cluster)[0] == f'content mismatch for file "{policy_json}"'
    assert path.read_text() == '{"x": 1}\n'


def test_heal_policy_degrades_when_the_path_needs_a_reboot(
    cluster: Cluster, start_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    root = _started(cluster, start_agent, tmp_path, "--drift-policy", "heal")
    (root / A.lstrip("/")).write_text("a=2\n")  # no policy for it: the default is a reboot
    cluster.wait_node(NODE, in_state("Degraded"))
    assert "ConfigDriftHealed" not in cluster.event_reasons()


def test_the_agents_own_update_is_not_drift(
    cluster: Cluster, start_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    root = _started(cluster, start_agent, tmp_path)
    b = mc_object("rendered-worker-b", files=[ign_file(A, "a=2\n")], ssh_keys=["ssh-ed25519 AAAA one"])
    cluster.add_mc(b)
    cluster.patch_node(NODE, {"metadata": {"annotations": {ann.DESIRED_CONFIG: "rendered-worker-b"}}})
    cluster.wait_node(NODE, done_on("rendered-worker-b"))
    cluster.wait_event("ConfigDriftMonitorStarted", 2)
    assert "ConfigDriftDetected" not in cluster.event_reasons()
    assert "Degraded" not in cluster.state_history(NODE)
    reasons = cluster.event_reasons()
    assert reasons.index("ConfigDriftMonitorStopped") < len(reasons) - 1 - reasons[::-1].index(
        "ConfigDriftMonitorStarted"
    )
    # and the new config is the one watched now
    (root / A.lstrip("/")).write_text("a=1\n")
    cluster.wait_node(NODE, in_state("Degraded"))
    assert _degraded_reasons(cluster)[0] == f'content mismatch for file "{A}"'
