"""A node mcd never ran on joins a pool on a real booted node (issue 28): no installer's step,
no /etc/machine-config-daemon state; the unit and the kubelet's kubeconfig are in place (the host
install), and the cluster side is `kubectl` alone (the rendered config created, the node pointed at
it as the controller does). The agent takes the config as the node's first config, says first
what that costs (the FirstConfig Event), drains and reboots as the plan needs, and ends Done."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from builders import ign_file, mc_object
from nodeharness import REBOOT_EXIT, Cluster, Node, deadline_poll, done_on, scenario

pytestmark = pytest.mark.allow_commands

Parts = tuple[Cluster, Node, dict[str, Any]]
A = "rendered-worker-a"
A_CONF = "/etc/mcd-node/a.conf"
STATE_DIR = "etc/machine-config-daemon"


@pytest.fixture
def cluster_node(tmp_path: Path) -> Iterator[Parts]:
    with scenario("j_a_node_mcd_never_ran_on_joins", tmp_path, machine="mcd-j") as parts:
        yield parts


def test_j_a_node_mcd_never_ran_on_joins_with_kubectl_only_and_ends_done(cluster_node: Parts) -> None:
    cluster, node, figures = cluster_node
    node.install_agent(cluster.kubeconfig)
    assert not (node.root / STATE_DIR / "currentconfig").exists()
    assert not (node.root / A_CONF.lstrip("/")).exists()
    cluster.create(mc_object(A, files=[ign_file(A_CONF, "a=1\n")]))
    cluster.set_desired_config(A)
    node.boot()
    node.wait_boots(1, 30)
    [first] = cluster.wait_event("FirstConfig", f"writing {A} as its first config", timeout=90)
    rebooted = "rebooted" in first
    cluster.wait_node(done_on(A), 120, f"Done on {A}")

    def node_done() -> bool:
        return any(f"currentConfig {A} to Done" in m for m in cluster.event_messages("NodeDone"))

    deadline_poll("the NodeDone event", node_done, 30, 0.3)
    # as many boots as the agent said up front: a reboot only when it announced one
    assert node.boot_count == (2 if rebooted else 1), (first, node.boot_count)
    if rebooted:
        assert node.boots[0].exit_status == REBOOT_EXIT
    assert "Degraded" not in cluster.states(), cluster.states()
    assert node.sh(f"cat {A_CONF}").stdout == "a=1\n"
    assert node.sh(f"cat /{STATE_DIR}/currentconfig").returncode == 0
    status = node.sh("mcd status --root-mount / -o json").stdout
    assert '"rebootOwed": null' in status, status
    figures["first_config"] = first
    figures["rss_kib"] = node.agent_rss_kib()
