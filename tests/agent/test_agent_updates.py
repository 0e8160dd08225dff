"""The agent as a real process against a test API server and a sandbox root: updates end to end."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from builders import ign_file, mc_object
from fakeapi import FakeApi
from harness import NODE, Agent, answer_drains, config_a, done_on, make_root

from mcd.kube import annotations as ann

pytestmark = pytest.mark.allow_commands


def _boot_node(cluster: FakeApi, config: str) -> None:
    cluster.add_node(NODE, {ann.CURRENT_CONFIG: config, ann.DESIRED_CONFIG: config, ann.STATE: "Done"})


def test_rebootless_ssh_key_change_goes_working_then_done(
    cluster: FakeApi, start_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    a = config_a()
    b = mc_object("rendered-worker-b", files=[ign_file("/etc/mcd-test/a.conf", "a=1\n")],
                  ssh_keys=["ssh-ed25519 AAAA one", "ssh-ed25519 BBBB two"])  # fmt: skip
    root = make_root(tmp_path, a)
    cluster.add_mc(a)
    cluster.add_mc(b)
    answer_drains(cluster)
    _boot_node(cluster, "rendered-worker-a")
    agent = start_agent(cluster, root)
    cluster.wait_node(NODE, lambda n: ann.DESIRED_DRAIN in n["metadata"]["annotations"])
    cluster.wait_node(NODE, done_on("rendered-worker-a"))
    cluster.patch_node(NODE, {"metadata": {"annotations": {ann.DESIRED_CONFIG: "rendered-worker-b"}}})
    cluster.wait_node(NODE, done_on("rendered-worker-b"))
    keys = (root / "home/core/.ssh/authorized_keys.d/ignition").read_text()
    assert "BBBB two" in keys
    assert cluster.state_history(NODE) == ["Done", "Working", "Done"]
    cluster.wait_event("NodeDone", 2)
    assert "SkipReboot" in cluster.event_reasons()
    assert agent.stop() == 0
