"""The SSH login monitor inside the agent: a logind "New session" entry of this boot in the node's
journal sets machineconfiguration.openshift.io/ssh=accessed once; other entries do not."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from harness import NODE, Agent, config_a, done_on, make_root
from journals import entry, new_session, write_journal
from simcluster import Cluster

from mcd.node import annotations as ann

pytestmark = pytest.mark.allow_commands

SSH = "machineconfiguration.openshift.io/ssh"


def test_a_login_sets_the_ssh_annotation_once_and_other_entries_do_not(
    cluster: Cluster, start_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    a = config_a()
    root = make_root(tmp_path, a)
    journal = root / "var/log/journal"
    write_journal(journal / "a.journal", [entry("Started foo."), new_session(1, boot="0" * 32)])
    cluster.add_mc(a)
    cluster.answer_drains()
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
    assert cluster.annotation_values(SSH) == ["accessed"]
    # the later logins sent no write for it (the audit line of a request follows its answer)
    deadline = time.monotonic() + 5
    while _ssh_writes(cluster) < 1 and time.monotonic() < deadline:
        time.sleep(0.02)  # polling a file: nothing signals the audit log's lines
    assert _ssh_writes(cluster) == 1
    assert agent.stop() == 0


def _ssh_writes(cluster: Cluster) -> int:
    return sum(1 for w in cluster.node_writes(NODE) if SSH in json.dumps(w.body))
