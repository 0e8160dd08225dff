"""`mcd start --config-dir DIR --node-name N`: the directory, not the API server, says which config
the node runs and holds the MachineConfigs; the agent still reports to its Node."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from atomicwriter import publish
from builders import ign_file, mc_object
from harness import NODE, Agent, config_a, done_on, make_root
from simcluster import Cluster

from mcd.node import annotations as ann

pytestmark = pytest.mark.allow_commands


def test_the_directory_sets_the_desired_config_and_the_node_reports_done(
    cluster: Cluster, start_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    a = config_a()
    root = make_root(tmp_path, a)
    b = mc_object("rendered-worker-b", files=[ign_file("/etc/mcd-test/a.conf", "a=1\n")],
                  ssh_keys=["ssh-ed25519 AAAA one", "ssh-ed25519 BBBB two"])  # fmt: skip
    cm = tmp_path / "cm"
    publish(cm, {"a.json": json.dumps(a), "b.json": json.dumps(b), "desiredConfig": "rendered-worker-a"})
    cluster.answer_drains()
    cluster.add_node(NODE, {ann.CURRENT_CONFIG: "rendered-worker-a", ann.DESIRED_CONFIG: "rendered-worker-a",
                            ann.STATE: "Done"})  # fmt: skip
    start_agent(cluster, root, "--config-dir", str(cm), "--config-grace", "0.2")
    cluster.wait_node(NODE, done_on("rendered-worker-a"))
    publish(cm, {"a.json": json.dumps(a), "b.json": json.dumps(b), "desiredConfig": "rendered-worker-b"})
    node = cluster.wait_node(NODE, done_on("rendered-worker-b"))
    assert node["metadata"]["annotations"][ann.DESIRED_CONFIG] == "rendered-worker-b"
    assert "BBBB two" in (root / "home/core/.ssh/authorized_keys.d/ignition").read_text()
    assert cluster.sim.objects("MachineConfig") == []  # every MachineConfig came from the directory
