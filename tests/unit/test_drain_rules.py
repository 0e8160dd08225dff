"""Which pods a drain evicts and which PodDisruptionBudgets block it (pure parts of mcd.agent.drain)."""

from __future__ import annotations

from typing import Any

from mcd.agent.drain import blocking_pdbs, pods_to_evict


def pod(ns: str, name: str, labels: dict[str, str] | None = None, **meta: Any) -> dict[str, Any]:
    return {"metadata": {"namespace": ns, "name": name, "labels": labels or {}, **meta}}


def pdb(ns: str, name: str, selector: dict[str, Any], allowed: int) -> dict[str, Any]:
    return {"metadata": {"namespace": ns, "name": name}, "spec": {"selector": selector},
            "status": {"disruptionsAllowed": allowed}}  # fmt: skip


def test_daemonset_mirror_and_own_pods_stay() -> None:
    pods = [
        pod("a", "ds", ownerReferences=[{"kind": "DaemonSet", "controller": True}]),
        pod("kube-system", "static", annotations={"kubernetes.io/config.mirror": "x"}),
        pod("mco", "me"),
        pod("a", "web", ownerReferences=[{"kind": "ReplicaSet", "controller": True}]),
        pod("a", "bare"),
    ]
    names = [p["metadata"]["name"] for p in pods_to_evict(pods, ("mco", "me"))]
    assert names == ["web", "bare"]


def test_budgets_allowing_no_disruption_of_a_node_pod_are_named() -> None:
    pods = [pod("a", "web-1", {"app": "web"}), pod("b", "db-0", {"app": "db"})]
    budgets = [
        pdb("a", "web", {"matchLabels": {"app": "web"}}, 0),
        pdb("b", "db", {"matchExpressions": [{"key": "app", "operator": "In", "values": ["db"]}]}, 0),
        pdb("a", "other", {"matchLabels": {"app": "other"}}, 0),
        pdb("a", "roomy", {"matchLabels": {"app": "web"}}, 1),
        pdb("c", "web", {"matchLabels": {"app": "web"}}, 0),
    ]
    assert blocking_pdbs(budgets, pods) == ["a/web", "b/db"]
