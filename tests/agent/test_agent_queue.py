"""The agent's rate-limited work queue (client-go's semantics) and what the loop queues."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest
from harness import NODE, Agent, config_a, make_root
from mcd_sim.apiserver.audit import read_events
from simcluster import Cluster

from mcd.agent.nodechanges import acted_on
from mcd.agent.workqueue import RateLimiter, TokenBucket, WorkQueue
from mcd.node import annotations as ann
from mcd.node.annotations import NodeView


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_keys_added_twice_are_handled_once_and_a_key_added_while_handled_comes_back_after() -> None:
    q = WorkQueue()
    q.add("node")
    q.add("node")
    q.add("drift")
    assert q.get(0) == "node"
    q.add("node")  # changed again while its handler runs: not handed out twice at once
    assert q.get(0) == "drift"
    assert q.get(0) is None
    q.done("node")
    assert q.get(0) == "node"


def test_a_preferred_key_goes_ahead_every_other_turn_and_never_starves_the_rest() -> None:
    """The pool controller's pool keys go ahead of a burst of drain retries (a freed slot waited
    behind twenty drains at 200 nodes), but a pool key added again while it runs waits one turn."""
    q = WorkQueue(prefer=lambda key: key.startswith("pool/"))
    for n in range(3):
        q.add(f"drain/node-{n}")
    q.add("pool/worker")
    assert q.get(0) == "pool/worker"  # ahead of the three drains queued before it
    q.add("pool/worker")  # changed again while it runs
    q.done("pool/worker")
    assert q.get(0) == "drain/node-0"  # the others get their turn
    assert q.get(0) == "pool/worker"
    q.done("pool/worker")
    assert [q.get(0), q.get(0), q.get(0)] == ["drain/node-1", "drain/node-2", None]


def test_rate_limited_keys_back_off_per_key_from_one_second_to_a_minute_and_forget_resets() -> None:
    clock = _Clock()
    q = WorkQueue(RateLimiter(clock=clock), clock=clock)
    delays = [q.add_rate_limited("node") for _ in range(10)]
    assert delays == [1, 2, 4, 8, 16, 32, 60, 60, 60, 60]
    assert q.add_rate_limited("drift") == 1  # per key
    q.forget("node")
    assert q.add_rate_limited("node") == 1


def test_no_count_of_failures_overflows() -> None:
    limiter = RateLimiter()
    limiter.when("node")
    limiter._per_key["node"].failures = 5000  # far past 2.0**1024
    assert limiter.when("node") == 60


def test_the_overall_bucket_spaces_retries_once_its_burst_is_spent() -> None:
    clock = _Clock()
    bucket = TokenBucket(qps=10, burst=3, clock=clock)
    assert [bucket.reserve() for _ in range(3)] == [0, 0, 0]
    assert bucket.reserve() == pytest.approx(0.1)
    clock.now += 10
    assert bucket.reserve() == 0


def test_a_delayed_key_is_handed_out_when_due_and_the_earliest_delay_wins() -> None:
    clock = _Clock()
    q = WorkQueue(clock=clock)
    q.add_after("node", 600)
    q.add_after("node", 5)
    q.add_after("node", 30)
    assert q.pending("node") == 5
    assert q.get(0) is None
    clock.now += 5
    assert q.get(0) == "node"


def test_get_waits_for_a_key_added_from_another_thread_and_shut_down_ends_it() -> None:
    q = WorkQueue()
    got: list[str | None] = []
    t = threading.Thread(target=lambda: got.append(q.get(10)))
    t.start()
    q.add("node")
    t.join(10)
    assert got == ["node"]
    t = threading.Thread(target=lambda: got.append(q.get(10)))
    t.start()
    q.shut_down()
    t.join(10)
    assert got == ["node", None]


def _view(**annotations: str) -> NodeView:
    return NodeView(NODE, annotations, resource_version="7")


def test_only_fields_the_agent_acts_on_make_work() -> None:
    base = {ann.CURRENT_CONFIG: "a", ann.DESIRED_CONFIG: "a", ann.STATE: "Degraded", ann.REASON: "x"}
    assert acted_on(_view(**base)) == acted_on(_view(**{**base, ann.REASON: "y", "other": "z"}))
    assert acted_on(_view(**base)) != acted_on(_view(**{**base, ann.DESIRED_CONFIG: "b"}))
    assert acted_on(_view(**base)) != acted_on(_view(**{**base, ann.LAST_APPLIED_DRAIN: "drain-b"}))


def _gets(audit: Path, name: str) -> list[float]:
    out = []
    for e in read_events(audit):
        ref = e.get("objectRef") or {}
        if e["verb"] == "get" and ref.get("resource") == "machineconfigs" and ref.get("name") == name:
            received = e["requestReceivedTimestamp"].replace("Z", "+00:00")
            out.append(datetime.fromisoformat(received).timestamp())
    return out


@pytest.mark.allow_commands
def test_the_agents_own_degraded_write_does_not_skip_the_backoff(
    cluster: Cluster, start_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    """Reported (B2): every Node watch event re-ran the sync, the agent's own Degraded write
    included, so a failing sync was retried at once instead of after 1 s, 2 s, 4 s …"""
    a = config_a()
    root = make_root(tmp_path, a)
    cluster.add_mc(a)
    missing = "rendered-worker-missing"
    cluster.add_node(
        NODE, {ann.CURRENT_CONFIG: "rendered-worker-a", ann.DESIRED_CONFIG: missing, ann.STATE: "Done"}
    )
    start_agent(cluster, root)
    cluster.wait(lambda: len(_gets(cluster.audit_path, missing)) >= 3, "three tries of the sync", timeout=30)
    assert cluster.annotations()[ann.STATE] == "Degraded"
    times = _gets(cluster.audit_path, missing)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert all(g >= 0.9 for g in gaps), gaps
