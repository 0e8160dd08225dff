"""Which pods a drain evicts and which PodDisruptionBudgets block it (pure parts of mcd.agent.drain)."""

from __future__ import annotations

from typing import Any

import pytest

from mcd.node.drainrules import blocking_pdbs, duration_text, pods_to_evict


def pod(ns: str, name: str, labels: dict[str, str] | None = None, **meta: Any) -> dict[str, Any]:
    return {"metadata": {"namespace": ns, "name": name, "labels": labels or {}, **meta}}


def pdb(ns: str, name: str, selector: dict[str, Any], allowed: int) -> dict[str, Any]:
    return {"metadata": {"namespace": ns, "name": name}, "spec": {"selector": selector},
            "status": {"disruptionsAllowed": allowed}}  # fmt: skip


def test_daemonset_mirror_critical_and_own_pods_stay() -> None:
    pods = [
        pod("a", "ds", ownerReferences=[{"kind": "DaemonSet", "controller": True}]),
        pod("kube-system", "static", annotations={"kubernetes.io/config.mirror": "x"}),
        pod("kube-system", "critical", annotations={"scheduler.alpha.kubernetes.io/critical-pod": ""}),
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


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(3600, "1 hour"), (600, "10 minutes"), (7200, "2 hours"), (60, "1 minute"), (90, "90 seconds"),
     (1, "1 second"), (0.5, "0.5 seconds"), (5400, "90 minutes")],
)  # fmt: skip
def test_timeouts_are_worded_as_upstream_words_its_defaults(seconds: float, text: str) -> None:
    assert duration_text(seconds) == text


class _NeverDrained:
    """A Node writer whose node the controller never answers."""

    name = "worker-0"

    def __init__(self) -> None:
        from mcd.node.annotations import NodeView

        self.view = NodeView("worker-0", {})

    def node(self) -> Any:
        return self.view

    @property
    def cached(self) -> Any:
        return self.view

    def set_annotations(self, changes: dict[str, str]) -> Any:
        return self.view

    def wait_for(self, predicate: Any, timeout: float) -> None:
        return None

    def refresh(self) -> None:
        return None


class _Events:
    def __init__(self) -> None:
        self.warnings: list[tuple[str, str]] = []

    def normal(self, reason: str, message: str) -> None:
        return None

    def warning(self, reason: str, message: str) -> None:
        self.warnings.append((reason, message))


@pytest.mark.parametrize(("drain_timeout", "words"), [(0.05, "0.05 seconds"), (0.0, "0 seconds")])
def test_a_drain_timeout_is_named_as_the_flag_set_it(drain_timeout: float, words: str) -> None:
    import threading

    from mcd.agent.drain import HandshakeDrainer
    from mcd.node.errors import McdError

    events = _Events()
    drainer = HandshakeDrainer(
        _NeverDrained(), events, None, threading.Event(),  # type: ignore[arg-type]
        drain_timeout=drain_timeout, uncordon_timeout=600,
    )  # fmt: skip
    with pytest.raises(McdError) as err:
        drainer.drain("rendered-worker-b")
    assert str(err.value) == (
        f"failed to drain node: worker-0 after {words}. "
        "Please see machine-config-controller logs for more information"
    )
    # upstream's Event carries the same text as the error
    assert events.warnings == [("FailedToDrain", str(err.value))]


def test_an_uncordon_timeout_fails_with_upstreams_text_in_the_error_and_the_event(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import itertools
    import threading
    import types

    from mcd.agent import drain
    from mcd.agent.drain import HandshakeDrainer
    from mcd.node.errors import McdError

    ticks = itertools.count(step=60.0)  # every look at the clock is a minute later
    monkeypatch.setattr(drain, "time", types.SimpleNamespace(monotonic=lambda: next(ticks)))
    events = _Events()
    drainer = HandshakeDrainer(
        _NeverDrained(), events, None, threading.Event(),  # type: ignore[arg-type]
        drain_timeout=3600, uncordon_timeout=600,
    )  # fmt: skip
    with pytest.raises(McdError) as err:
        drainer.uncordon("rendered-worker-b")
    failed = (
        "failed to uncordon node: worker-0 after 10 minutes. "
        "Please see machine-config-controller logs for more information"
    )
    assert str(err.value) == failed
    assert events.warnings == [("FailedToUncordon", failed)]


class _PodsUnreadable:
    """The drain API answering 500 to the pod list."""

    def list_pods_on_node(self, node: str) -> Any:
        from mcd.kube.errors import ApiError

        raise ApiError(500, "GET pods: 500 Internal Server Error")

    def list_pdbs(self) -> Any:
        return []


def test_budgets_the_api_cannot_list_leave_the_drain_waiting_not_failed() -> None:
    """Naming the budgets that hold a drain is a hint: an API failure while listing pods neither
    ends the drain's wait nor fails it before its timeout."""
    import threading

    from mcd.agent.drain import HandshakeDrainer
    from mcd.node.annotations import STATE, NodeView
    from mcd.node.errors import McdError

    writer = _NeverDrained()
    writer.view = NodeView("worker-0", {STATE: "Working"})
    events = _Events()
    drainer = HandshakeDrainer(
        writer, events, _PodsUnreadable(), threading.Event(),  # type: ignore[arg-type]
        drain_timeout=0.05, uncordon_timeout=600, name_after=0.0,
    )  # fmt: skip
    with pytest.raises(McdError, match=r"failed to drain node: worker-0 after 0\.05 seconds"):
        drainer.drain("rendered-worker-b")
    assert [reason for reason, _ in events.warnings] == ["FailedToDrain"]
