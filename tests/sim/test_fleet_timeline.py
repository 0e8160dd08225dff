"""The fleet rollout's pure parts (no server, no I/O): upstream's node availability and update
order, the timeline and verdict built from recorded commits, the SVG picture."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import pytest
from mcd_sim import nodephase as np
from mcd_sim.controller import max_unavailable
from mcd_sim.picture import COLOURS, svg, tick_step
from mcd_sim.timeline import (
    Budget,
    NodeSample,
    PodSample,
    budget_check,
    node_timelines,
    summary,
    text,
    unavailability,
    unavailable_series,
)

OLD, NEW = "rendered-worker-old", "rendered-worker-new"


def on(config: str, state: str = "Done", desired: str | None = None, **extra: str) -> dict[str, str]:
    return {np.CURRENT_CONFIG: config, np.DESIRED_CONFIG: desired or config, np.STATE: state, **extra}


# --- availability, as upstream's IsUnavailableForUpdate ----------------------------------


def test_a_done_ready_node_is_available() -> None:
    assert not np.unavailable(on(OLD), True)


def test_a_node_asked_to_move_is_unavailable_before_its_agent_starts() -> None:
    assert np.unavailable(on(OLD, desired=NEW), True)


def test_a_cordoned_or_not_ready_node_is_unavailable_even_when_done() -> None:
    assert not np.ready([], unschedulable=True)
    assert not np.ready([{"type": "Ready", "status": "False"}], unschedulable=False)
    assert not np.ready([{"type": "DiskPressure", "status": "True"}], unschedulable=False)
    assert np.ready([{"type": "Ready", "status": "True"}, {"type": "DiskPressure", "status": "False"}], False)
    assert np.unavailable(on(OLD), False)


@pytest.mark.parametrize("state", ["Degraded", "Unreconcilable"])
def test_a_failing_node_is_not_counted_unavailable(state: str) -> None:
    assert not np.unavailable(on(OLD, state=state, desired=NEW), True)


def test_update_order_is_zone_then_age_then_name() -> None:
    def node(name: str, stamp: str, zone: str | None = None) -> dict[str, Any]:
        labels = {np.ZONE_LABEL: zone} if zone else {}
        return {"metadata": {"name": name, "creationTimestamp": stamp, "labels": labels}}

    nodes = [node("c", "2026-01-01T00:00:01Z"), node("b", "2026-01-01T00:00:00Z", "z2"),
             node("a", "2026-01-01T00:00:00Z"), node("d", "2026-01-01T00:00:05Z", "z1")]  # fmt: skip
    assert [n["metadata"]["name"] for n in np.update_order(nodes)] == ["d", "b", "a", "c"]


@pytest.mark.parametrize(
    ("value", "total", "expected"),
    [(None, 10, 1), (2, 10, 2), ("2", 10, 2), ("25%", 10, 2), ("5%", 10, 1), ("100%", 4, 4), (0, 3, 1)],
)
def test_max_unavailable_as_upstream_scales_it(value: object, total: int, expected: int) -> None:
    assert max_unavailable(value, total) == expected


def test_phases_through_an_update() -> None:
    drain = {np.DESIRED_DRAIN: "drain-" + NEW}
    assert np.phase(on(OLD), NEW) == np.OLD
    assert np.phase(on(OLD, desired=NEW), NEW) == np.QUEUED
    assert np.phase(on(OLD, state="Working", desired=NEW), NEW) == np.UPDATING
    assert np.phase(on(OLD, state="Working", desired=NEW, **drain), NEW) == np.DRAINING
    applied = {**drain, np.LAST_APPLIED_DRAIN: "drain-" + NEW}
    assert np.phase(on(OLD, state="Working", desired=NEW, **applied), NEW) == np.UPDATING
    rebooting = {np.POST_CONFIG_ACTION: np.REBOOTING}
    assert np.phase(on(OLD, state="Working", desired=NEW, **applied, **rebooting), NEW) == np.REBOOTING_PHASE
    assert np.phase(on(NEW), NEW) == np.DONE
    assert np.phase(on(OLD, state="Degraded", desired=NEW), NEW) == np.DEGRADED


# --- the timeline from recorded commits ---------------------------------------------------


def one_node_update(name: str, start: float) -> list[NodeSample]:
    """The commits of one node's update with a drain and a reboot, from `start`."""
    drain = {np.DESIRED_DRAIN: "drain-" + NEW}
    applied = {**drain, np.LAST_APPLIED_DRAIN: "drain-" + NEW}
    steps = [
        (0.0, on(OLD, desired=NEW), True),
        (0.1, on(OLD, "Working", NEW), True),
        (0.2, on(OLD, "Working", NEW, **drain), True),
        (0.3, on(OLD, "Working", NEW, **drain), False),  # cordoned
        (1.0, on(OLD, "Working", NEW, **applied), False),
        (1.2, on(OLD, "Working", NEW, **applied, **{np.POST_CONFIG_ACTION: np.REBOOTING}), False),
        (3.0, on(OLD, "Working", NEW, **applied, **{np.POST_CONFIG_ACTION: ""}), False),
        (3.1, on(OLD, "Working", NEW, **{np.DESIRED_DRAIN: "uncordon-" + NEW}), True),
        (3.2, on(NEW, "Done", NEW), True),
    ]
    joined = NodeSample(-5.0, name, on(OLD), True)
    return [joined] + [NodeSample(start + dt, name, a, ready) for dt, a, ready in steps]


def test_marks_and_phases_of_one_node() -> None:
    [track] = node_timelines(one_node_update("worker-0", 1.0), NEW, end=5.0)
    assert track.marks == {"desired": 1.0, "working": 1.1, "drainStart": 1.2, "drainEnd": 2.0,
                           "rebootStart": 2.2, "rebootEnd": 4.0, "done": 4.2}  # fmt: skip
    assert [s.phase for s in track.segments] == [
        np.OLD, np.QUEUED, np.UPDATING, np.DRAINING, np.UPDATING, np.REBOOTING_PHASE, np.UPDATING, np.DONE,
    ]  # fmt: skip
    assert track.segments[0].start == 0.0 and track.segments[-1].end == 5.0
    assert track.duration() == pytest.approx(3.2)


def test_unavailability_counts_overlapping_nodes_from_the_commits() -> None:
    samples = one_node_update("a", 0.0) + one_node_update("b", 1.0) + one_node_update("c", 3.25)
    worst, when, who = unavailability(samples)
    assert (worst, who) == (2, ("a", "b"))
    assert when == pytest.approx(1.0)
    # a third node moving before the first is Done is three at once: a limit of 2 is broken
    three = one_node_update("a", 0.0) + one_node_update("b", 1.0) + one_node_update("c", 3.0)
    worst, _, who = unavailability(three)
    assert (worst, who) == (3, ("a", "b", "c"))


def test_unavailable_series_steps_at_every_change() -> None:
    series = unavailable_series(one_node_update("a", 0.0) + one_node_update("b", 1.0))
    assert series == [(0.0, 1), (1.0, 2), (3.2, 1), (4.2, 0)]


def test_unavailability_ignores_what_happened_before_the_rollout() -> None:
    before = [NodeSample(-1.0, n, on(OLD, "Working", "x"), True) for n in "abc"]
    after = [NodeSample(-0.5, n, on(OLD), True) for n in "abc"]
    assert unavailability(before + after + one_node_update("a", 0.0))[0] == 1


def pods(events: list[tuple[float, str, bool, bool]]) -> list[PodSample]:
    return [PodSample(t, name, {"app": "web"}, healthy, gone) for t, name, healthy, gone in events]


def test_budget_held_while_a_replacement_starts_before_the_next_eviction() -> None:
    budget = Budget("web", {"app": "web"}, desired=2)
    history = pods([
        (-1, "p1", True, False), (-1, "p2", True, False), (-1, "p3", True, False),
        (0.1, "p1", False, False), (0.2, "p4", False, False), (1.0, "p1", False, True),
        (2.0, "p4", True, False), (2.1, "p2", False, False), (2.2, "p5", False, False),
    ])  # fmt: skip
    assert budget_check(budget, history) == {"name": "web", "desiredHealthy": 2, "minHealthy": 2,
                                             "violations": 0}  # fmt: skip


def test_budget_violation_is_counted_once_per_dip() -> None:
    budget = Budget("web", {"app": "web"}, desired=2)
    history = pods([
        (-1, "p1", True, False), (-1, "p2", True, False), (-1, "p3", True, False),
        (0.1, "p1", False, False), (0.2, "p2", False, False), (0.3, "p3", False, True),
        (1.0, "p4", True, False), (1.1, "p5", True, False), (2.0, "p4", False, True),
        (3.0, "other", True, False),
    ])  # fmt: skip
    history.append(PodSample(0.5, "db-1", {"app": "db"}, True))  # not selected: never counted
    assert budget_check(budget, history) == {"name": "web", "desiredHealthy": 2, "minHealthy": 0,
                                             "violations": 2}  # fmt: skip


def result_of(samples: list[NodeSample], limit: int = 2) -> dict[str, Any]:
    tracks = node_timelines(samples, NEW, end=8.0)
    budgets = [{"name": "web", "desiredHealthy": 2, "minHealthy": 2, "violations": 0}]
    return summary(tracks, samples, target=NEW, limit=limit, budgets=budgets, total=8.0, pool_updated=True)


def test_summary_is_what_a_ci_gate_reads() -> None:
    result = result_of(one_node_update("a", 0.0) + one_node_update("b", 1.0) + one_node_update("c", 3.5))
    assert result["maxConcurrentlyUnavailable"] == 2 and result["maxUnavailable"] == 2
    assert result["pdbViolations"] == 0 and result["allDone"] and result["poolUpdated"]
    assert [n["name"] for n in result["perNode"]] == ["a", "b", "c"]
    assert result["perNode"][2]["desired"] == 3.5 and result["perNode"][2]["done"] == pytest.approx(6.7)
    lines = text(result).splitlines()
    assert lines[0].split() == ["node", "desired", "working", "drain", "reboot", "done", "took"]
    assert lines[3].split()[:3] == ["c", "3.50", "3.60"]
    assert "unavailable at once: at most 2 (maxUnavailable 2)" in lines
    assert lines[-1] == "all nodes Done: yes; pool Updated: yes; rollout took 8.00 s"


def test_summary_says_which_node_never_finished() -> None:
    stuck = [s for s in one_node_update("b", 1.0) if s.t < 2.5]
    result = result_of(one_node_update("a", 0.0) + stuck)
    assert not result["allDone"]
    assert result["perNode"][1]["done"] is None and result["perNode"][1]["seconds"] is None
    assert "all nodes Done: NO" in text(result)


# --- the picture --------------------------------------------------------------------------


@pytest.mark.parametrize(("total", "step"), [(0.5, 0.1), (3.2, 0.5), (12.0, 2), (95.0, 10), (700.0, 120)])
def test_axis_ticks_are_round_and_few(total: float, step: float) -> None:
    assert tick_step(total) == step


def test_picture_has_a_row_per_node_a_colour_per_phase_an_axis_and_a_legend() -> None:
    samples = one_node_update("worker-0", 0.0) + one_node_update("worker-1", 3.3)
    tracks = node_timelines(samples, NEW, end=6.6)
    series = unavailable_series(samples)
    result = result_of(samples, limit=1)
    doc = svg(tracks, 6.6, title="2 nodes <to> new", limit=1, result=result, series=series)
    root = ET.fromstring(doc)  # well-formed, the title escaped
    ns = "{http://www.w3.org/2000/svg}"
    texts = [t.text or "" for t in root.iter(ns + "text")]
    assert "2 nodes <to> new" in texts and "worker-0" in texts and "worker-1" in texts
    assert {"0", "1", "2", "3", "4", "5", "6"} <= set(texts)  # the time axis, one tick a second
    assert {"draining", "rebooting", "done", "asked to move"} <= set(texts)  # the legend
    bars = [r for r in root.iter(ns + "rect") if r.find(ns + "title") is not None]
    assert len(bars) == sum(len(t.segments) for t in tracks)
    tips = [(r.find(ns + "title").text or "") for r in bars]  # type: ignore[union-attr]
    assert "worker-1: rebooting 4.5-6.3 s" in tips
    rebooting = [r for r in bars if r.get("fill") == COLOURS[np.REBOOTING_PHASE]]
    assert len(rebooting) == 2
    verdict = "at most 1 unavailable at once (limit 1); PodDisruptionBudget violations: 0; all Done: yes"
    assert any(t.startswith(verdict) for t in texts)
    [line] = root.iter(ns + "polyline")  # nodes unavailable over time, under the rows
    assert len(line.get("points", "").split()) == 2 * len(series)
    assert "limit 1" in texts
