"""A node mcd did not provision (no /etc/machine-config-daemon/currentconfig) joins its pool: the
agent writes desiredConfig as its first config, or adopts the node as it is with --adopt; never
Degraded for that alone (issue 28 item 1)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from harness import NODE, Agent, config_a, done_on
from mcd_sim.sandbox import make_sandbox_root
from simcluster import Cluster

from mcd.host import state
from mcd.host.root import HostRoot
from mcd.node import annotations as ann

pytestmark = pytest.mark.allow_commands

A_CONF = "etc/mcd-test/a.conf"


def _fresh_node(cluster: Cluster, tmp_path: Path) -> Path:
    root = make_sandbox_root(tmp_path / "root")
    assert not (root / state.CURRENT_CONFIG.lstrip("/")).exists()
    cluster.add_mc(config_a())
    cluster.add_node(NODE, {ann.DESIRED_CONFIG: "rendered-worker-a"})  # what the pool controller sets
    cluster.answer_drains()
    return root


def test_a_node_without_mcd_state_takes_desired_config_as_its_first_config(
    cluster: Cluster, start_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    """Reported: such a node went Degraded ("open .../currentconfig: no such file or directory")."""
    root = _fresh_node(cluster, tmp_path)
    start_agent(cluster, root)
    cluster.wait_node(NODE, done_on("rendered-worker-a"), timeout=40)
    assert (root / A_CONF).read_text() == "a=1\n"
    assert "Degraded" not in cluster.state_history(NODE)
    [said] = cluster.event_messages("FirstConfig")
    assert said == (
        "Node worker-0 has no machine-config-daemon state: writing rendered-worker-a as its first "
        "config (files, units, SSH keys); the node is drained and rebooted"
    )
    assert said in cluster.annotation_values(ann.REASON)  # the node said it while Working
    assert "drain-rendered-worker-a" in cluster.annotation_values(ann.DESIRED_DRAIN)


def test_adopt_records_desired_config_without_writing_and_reports_what_differs(
    cluster: Cluster, start_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    root = _fresh_node(cluster, tmp_path)
    start_agent(cluster, root, "--adopt")
    cluster.wait_node(NODE, done_on("rendered-worker-a"), timeout=40)
    assert not (root / A_CONF).exists()  # nothing written
    assert state.read_current_config(HostRoot(root))["metadata"]["name"] == "rendered-worker-a"
    assert "Degraded" not in cluster.state_history(NODE)
    [differs] = cluster.event_messages("AdoptedNodeDiffers")
    assert differs.startswith("Node worker-0 adopted in config rendered-worker-a without writing it;")
    assert "/etc/mcd-test/a.conf" in differs
