"""The SSH login monitor inside the agent: a logind "New session" entry of this boot in the node's
journal sets machineconfiguration.openshift.io/ssh=accessed once; other entries do not."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from fakeapi import FakeApi
from harness import NODE, Agent, answer_drains, config_a, done_on, make_root
from journals import entry, new_session, write_journal

from mcd.kube import annotations as ann

pytestmark = pytest.mark.allow_commands

SSH = "machineconfiguration.openshift.io/ssh"


def test_a_login_sets_the_ssh_annotation_once_and_other_entries_do_not(
    cluster: FakeApi, start_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    a = config_a()
    root = make_root(tmp_path, a)
    journal = root / "var/log/journal"
    write_journal(journal / "a.journal", [entry("Started foo."), new_session(1, boot="0" * 32)])
    cluster.add_mc(a)
    answer_drains(cluster)
    cluster.add_node(NODE, {ann.CURRENT_CONFIG: "rendered-worker-a", ann.DESIRED_CONFIG: "rendered-worker-a",
                            ann.STATE: "Done"})  # fmt: skip
    agent = start_agent(cluster, root)
    cluster.wait_node(NODE, done_on("rendered-worker-a"))
    write_journal(journal / "b.journal", [new_session(2), new_session(3)])
    cluster.wait_node(NODE, lambda n: n["metadata"]["annotations"].get(SSH) == "accessed")
    cluster.wait_event("SSHAccessed")
    write_journal(journal / "c.journal", [new_session(4)])
    agent.wait_log("1 new login session(s) in the journal")
    assert "2 new login session(s) in the journal" in agent.log
    # counted, but annotated and announced once; the other boot's session never counted
    assert cluster.event_reasons().count("SSHAccessed") == 1
    ssh_writes = [w for w in cluster.node_writes(NODE) if SSH in str(w.body)]
    assert len(ssh_writes) == 1
    assert agent.stop() == 0
