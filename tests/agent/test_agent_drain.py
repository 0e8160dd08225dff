"""Draining before an update that needs it: the built-in drainer, budgets that block, SingleReplica."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from harness import NODE, Agent, config_a, done_on, make_root
from simcluster import Cluster

from mcd.agent.drain import CORDONED_BY
from mcd.node import annotations as ann

pytestmark = pytest.mark.allow_commands


FIRST_START_EVENTS = ["ConfigDriftMonitorStarted", "Uncordon", "NodeDone"]
# upstream's daemon posts the same nine (its drift monitor stops as the update starts, mcd's as
# the agent restarts after the simulated reboot): docs/fleet.md, "Events per update"
REBOOTING_UPDATE_EVENTS = [
    "AddSigtermProtection",
    "Cordon",
    "Drain",
    "RemoveSigtermProtection",
    "Reboot",
    "ConfigDriftMonitorStopped",
    "ConfigDriftMonitorStarted",
    "Uncordon",
    "NodeDone",
]


def _setup(cluster: Cluster, tmp_path: Path, **node_annotations: str) -> Path:
    a = config_a()
    b = dict(config_a(), metadata={"name": "rendered-worker-b"})
    b["spec"] = dict(b["spec"], kernelArguments=["nosmt"])  # needs a reboot, hence a drain
    root = make_root(tmp_path, a)
    cluster.add_mc(a)
    cluster.add_mc(b)
    base = {
        ann.CURRENT_CONFIG: "rendered-worker-a",
        ann.DESIRED_CONFIG: "rendered-worker-a",
        ann.STATE: "Done",
    }
    cluster.add_node(NODE, {**base, **node_annotations})
    return root


def _pods(cluster: Cluster) -> None:
    cluster.add_pod("shop", "web-1", NODE, labels={"app": "web"},
                    ownerReferences=[{"kind": "ReplicaSet", "name": "web", "controller": True}])  # fmt: skip
    cluster.add_pod("shop", "scratch", NODE)  # a bare pod (with an emptyDir, say): deleted too
    cluster.add_pod(
        "infra", "logger", NODE, ownerReferences=[{"kind": "DaemonSet", "name": "l", "controller": True}]
    )
    cluster.add_pod("kube-system", "etcd-worker-0", NODE, annotations={"kubernetes.io/config.mirror": "abc"})
    cluster.add_pod("shop", "web-2", "worker-1", labels={"app": "web"})


def _update_to_b(cluster: Cluster) -> None:
    cluster.patch_node(NODE, {"metadata": {"annotations": {ann.DESIRED_CONFIG: "rendered-worker-b"}}})


@pytest.mark.parametrize("builtin", [True, False], ids=["builtin-drainer", "controller-handshake"])
def test_a_blocking_budget_is_named_and_the_drain_completes_once_it_allows(
    cluster: Cluster, start_agent: Callable[..., Agent], tmp_path: Path, builtin: bool
) -> None:
    root = _setup(cluster, tmp_path)
    _pods(cluster)
    # two healthy web pods, two required: no disruption allowed
    cluster.add_pdb("shop", "web-budget", {"matchLabels": {"app": "web"}}, min_available=2)
    if not builtin:
        cluster.answer_drains()
    # a blocked drain is tried again at --eviction-retry's pace, not after a doubling backoff
    agent = start_agent(cluster, root, "--eviction-retry", "0.5", *(["--builtin-drainer"] if builtin else []))
    cluster.wait_node(NODE, done_on("rendered-worker-a"))
    agent.wait_log("is in config rendered-worker-a: Done")
    _update_to_b(cluster)
    blocked = "drain of node worker-0 blocked: PodDisruptionBudget shop/web-budget allows 0 disruptions"
    # as upstream (issue 29 item 5): a budget allowing no disruption now is a wait, not Degraded
    cluster.wait_node(
        NODE,
        lambda n: n["metadata"]["annotations"].get(ann.STATE) == "Working"
        and n["metadata"]["annotations"].get(ann.REASON) == blocked,
    )
    if builtin:
        # tried again every 0.5 s: six tries after a doubling backoff from 1 s would take 31 s
        cluster.wait_event("DrainBlockedByPodDisruptionBudget", count=6, timeout=8)
    else:
        # named once, and the drain asked for at once (the controller retries the evictions)
        cluster.wait_event("DrainBlockedByPodDisruptionBudget")
        asked = "drain-rendered-worker-b"
        cluster.wait_node(NODE, lambda n: n["metadata"]["annotations"].get(ann.DESIRED_DRAIN) == asked)
    assert ("shop", "web-1") in cluster.pods()
    cluster.set_pdb_min_available("shop", "web-budget", 1)
    node = cluster.wait_node(NODE, done_on("rendered-worker-b"), timeout=30)
    assert not node["spec"].get("unschedulable")
    assert "Degraded" not in cluster.state_history(NODE)
    if not builtin:
        assert "drain-rendered-worker-b" in cluster.annotation_values(ann.DESIRED_DRAIN)
        return
    assert cluster.pods() == [
        ("infra", "logger"),
        ("kube-system", "etcd-worker-0"),
        ("shop", "web-2"),
    ]
    assert not node["spec"].get("unschedulable")
    assert CORDONED_BY not in node["metadata"]["annotations"]
    assert ann.DESIRED_DRAIN not in node["metadata"]["annotations"]  # no controller handshake
    cordoned = cluster.ever_cordoned()
    assert cordoned and all(
        n["metadata"]["annotations"].get(CORDONED_BY) == "rendered-worker-b" for n in cordoned
    )
    evictions = [r.uri for r in cluster.requests() if r.uri.endswith("/eviction") and r.code == 201]
    assert sorted(evictions) == [
        "/api/v1/namespaces/shop/pods/scratch/eviction",
        "/api/v1/namespaces/shop/pods/web-1/eviction",
    ]


def test_a_budget_holding_the_handshake_drain_briefly_is_not_named(
    cluster: Cluster, start_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    # in a rollout a budget is at 0 for moments (another node's pod is starting): the agent asks
    # for the drain at once and, as upstream's, posts nothing about it while the controller's
    # eviction retries get through within --eviction-retry
    root = _setup(cluster, tmp_path)
    _pods(cluster)
    cluster.add_pdb("shop", "web-budget", {"matchLabels": {"app": "web"}}, min_available=2)
    cluster.answer_drains()
    assert cluster.controller is not None
    cluster.controller.evict_retry = 0.2
    agent = start_agent(cluster, root, "--eviction-retry", "60")
    agent.wait_log("is in config rendered-worker-a: Done")
    _update_to_b(cluster)
    asked = "drain-rendered-worker-b"
    cluster.wait_node(NODE, lambda n: n["metadata"]["annotations"].get(ann.DESIRED_DRAIN) == asked)
    assert ("shop", "web-1") in cluster.pods()  # refused so far
    cluster.set_pdb_min_available("shop", "web-budget", 1)
    cluster.wait_node(NODE, done_on("rendered-worker-b"), timeout=30)
    cluster.wait(lambda: cluster.event_reasons().count("NodeDone") == 2, "NodeDone on rendered-worker-b")
    # the first start's three, then the update's nine: each once, upstream's reasons alone
    assert cluster.event_reasons() == [*FIRST_START_EVENTS, *REBOOTING_UPDATE_EVENTS]
    assert not any("blocked" in reason for reason in cluster.annotation_values(ann.REASON))
    assert "Degraded" not in cluster.state_history(NODE)


def test_builtin_drainer_leaves_a_node_cordoned_by_someone_else_cordoned(
    cluster: Cluster, start_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    root = _setup(cluster, tmp_path)
    cluster.patch_node(NODE, {"spec": {"unschedulable": True}})
    agent = start_agent(cluster, root, "--builtin-drainer")
    agent.wait_log("is in config rendered-worker-a: Done")
    _update_to_b(cluster)
    node = cluster.wait_node(NODE, done_on("rendered-worker-b"))
    assert node["spec"]["unschedulable"] is True


def test_single_replica_control_plane_is_not_drained(
    cluster: Cluster, start_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    root = _setup(cluster, tmp_path, **{ann.CONTROL_PLANE_TOPOLOGY: "SingleReplica"})
    cluster.answer_drains()
    agent = start_agent(cluster, root)
    agent.wait_log("is in config rendered-worker-a: Done")
    _update_to_b(cluster)
    cluster.wait_node(NODE, done_on("rendered-worker-b"))
    assert "drain-rendered-worker-b" not in cluster.annotation_values(ann.DESIRED_DRAIN)
    assert not cluster.ever_cordoned()
    cluster.wait_event("Drain")
    [msg] = cluster.event_messages("Drain")
    assert msg == "Drain not required, skipping"
