"""A fleet rollout told from the API server's history: per node, when it was asked to move,
started, drained, rebooted and was Done; how many nodes were unavailable at once; whether a
PodDisruptionBudget was ever broken.

Pure (no I/O): `mcd_sim.fleet` records samples from the store's commits (every write the
agents and the controller made, whoever made them) and hands them here. Times are seconds
since the rollout started (the moment the pool was pointed at the target).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mcd.node import annotations as ann
from mcd_sim import nodephase

Obj = dict[str, Any]


@dataclass(frozen=True)
class NodeSample:
    """A Node as one commit left it (only what the timeline reads)."""

    t: float
    name: str
    annotations: Mapping[str, str]
    ready: bool


@dataclass(frozen=True)
class PodSample:
    """A Pod as one commit left it; `healthy` is Running and Ready and not terminating (a
    deleted pod is a sample with healthy False and `gone`)."""

    t: float
    name: str
    labels: Mapping[str, str]
    healthy: bool
    gone: bool = False


@dataclass(frozen=True)
class Budget:
    """A PodDisruptionBudget over a workload of `replicas` pods: the healthy pods it must keep
    (`desired`, scaled on the workload's replicas as the disruption controller does)."""

    name: str
    selector: Mapping[str, str]
    desired: int


@dataclass(frozen=True)
class Segment:
    start: float
    end: float
    phase: str


# the moments an admin reads on the timeline, in order
MARKS = ("desired", "working", "drainStart", "drainEnd", "rebootStart", "rebootEnd", "done")


@dataclass(frozen=True)
class NodeTimeline:
    name: str
    segments: tuple[Segment, ...]
    marks: Mapping[str, float | None] = field(default_factory=dict)

    def duration(self) -> float | None:
        start, end = self.marks.get("desired"), self.marks.get("done")
        return None if start is None or end is None else end - start


def _by_node(samples: Iterable[NodeSample]) -> dict[str, list[NodeSample]]:
    out: dict[str, list[NodeSample]] = {}
    for s in sorted(samples, key=lambda s: s.t):
        out.setdefault(s.name, []).append(s)
    return out


def node_timelines(samples: Iterable[NodeSample], target: str, end: float) -> list[NodeTimeline]:
    """Each node's phases from the rollout's start (t=0; the last sample before it gives the
    phase at 0) to `end`, and its marks (None for what did not happen)."""
    out = []
    for name, mine in sorted(_by_node(samples).items()):
        segments: list[Segment] = []
        marks: dict[str, float | None] = dict.fromkeys(MARKS)
        current, since = nodephase.OLD, 0.0
        for s in mine:
            now = max(0.0, s.t)
            p = nodephase.phase(s.annotations, target)
            if s.t >= 0:
                _mark(marks, current, p, s, target=target)
            if p != current:
                if now > since:
                    segments.append(Segment(since, now, current))
                current, since = p, now
        if end > since:
            segments.append(Segment(since, end, current))
        out.append(NodeTimeline(name, tuple(segments), marks))
    return out


def _mark(marks: dict[str, float | None], was: str, now_phase: str, s: NodeSample, *, target: str) -> None:
    t = max(0.0, s.t)

    def first(key: str) -> None:
        if marks[key] is None:
            marks[key] = t

    if s.annotations.get(ann.DESIRED_CONFIG) == target:
        first("desired")
    if s.annotations.get(ann.STATE) == "Working":
        first("working")
    if now_phase == nodephase.DRAINING:
        first("drainStart")
    elif was == nodephase.DRAINING:
        first("drainEnd")
    if now_phase == nodephase.REBOOTING_PHASE:
        first("rebootStart")
    elif was == nodephase.REBOOTING_PHASE:
        first("rebootEnd")
    if now_phase == nodephase.DONE:
        first("done")


def unavailable_series(samples: Iterable[NodeSample]) -> list[tuple[float, int]]:
    """(time, nodes unavailable from then on) at every change from t=0 on, starting at 0."""
    state: dict[str, bool] = {}
    series: list[tuple[float, int]] = []
    for s in sorted(samples, key=lambda s: s.t):
        state[s.name] = nodephase.unavailable(s.annotations, s.ready)
        count = sum(state.values())
        t = max(0.0, s.t)
        if series and series[-1][0] == t:
            series[-1] = (t, count)
        elif not series or series[-1][1] != count:
            series.append((t, count))
    return series


def unavailability(samples: Iterable[NodeSample]) -> tuple[int, float, tuple[str, ...]]:
    """The most nodes unavailable at once from t=0 on (upstream's definition), when it first
    happened and which nodes they were."""
    state: dict[str, bool] = {}
    worst, when, who = 0, 0.0, tuple[str, ...]()
    for s in sorted(samples, key=lambda s: s.t):
        state[s.name] = nodephase.unavailable(s.annotations, s.ready)
        if s.t < 0:
            continue
        down = tuple(sorted(n for n, v in state.items() if v))
        if len(down) > worst:
            worst, when, who = len(down), s.t, down
    if worst == 0:  # nothing moved since the start: what the state was at t=0
        down = tuple(sorted(n for n, v in state.items() if v))
        worst, who = len(down), down
    return worst, when, who


def budget_check(budget: Budget, samples: Iterable[PodSample]) -> dict[str, Any]:
    """The fewest healthy pods the budget's selection had from t=0 on, and how many times it
    went below the budget (a violation)."""
    healthy: dict[str, bool] = {}
    lowest: int | None = None
    violations = 0
    below = False
    for s in sorted(samples, key=lambda s: s.t):
        if any(s.labels.get(k) != v for k, v in budget.selector.items()):
            continue
        healthy[s.name] = s.healthy and not s.gone
        if s.t < 0:
            continue
        count = sum(healthy.values())
        lowest = count if lowest is None else min(lowest, count)
        if count < budget.desired and not below:
            violations += 1
        below = count < budget.desired
    if lowest is None:
        lowest = sum(healthy.values())
    return {
        "name": budget.name,
        "desiredHealthy": budget.desired,
        "minHealthy": lowest,
        "violations": violations,
    }


def _round(t: float | None) -> float | None:
    return None if t is None else round(t, 3)


def summary(
    timelines: list[NodeTimeline],
    samples: list[NodeSample],
    *,
    target: str,
    limit: int,
    budgets: list[dict[str, Any]],
    total: float,
    pool_updated: bool,
) -> dict[str, Any]:
    """What a CI gate reads (`mcd-sim simulate --nodes N -o json`)."""
    worst, when, who = unavailability(samples)
    durations = [d for t in timelines if (d := t.duration()) is not None]
    return {
        "target": target,
        "nodes": len(timelines),
        "maxUnavailable": limit,
        "maxConcurrentlyUnavailable": worst,
        "maxConcurrentlyUnavailableAt": _round(when),
        "maxConcurrentlyUnavailableNodes": list(who),
        "pdbs": budgets,
        "pdbViolations": sum(int(b["violations"]) for b in budgets),
        "allDone": all(t.marks.get("done") is not None for t in timelines),
        "poolUpdated": pool_updated,
        "totalSeconds": _round(total),
        "nodeSecondsMax": _round(max(durations, default=0.0)),
        "perNode": [
            {"name": t.name, **{k: _round(v) for k, v in t.marks.items()}, "seconds": _round(t.duration())}
            for t in timelines
        ],
    }


def _at(t: float | None) -> str:
    return "-" if t is None else f"{t:6.2f}"


def text(result: Mapping[str, Any]) -> str:
    """The timeline as a table an admin reads in a terminal, then the verdict lines."""
    head = f"{'node':<12} {'desired':>7} {'working':>7} {'drain':>15} {'reboot':>15} {'done':>7} {'took':>6}"
    lines = [head]
    for n in result["perNode"]:
        drain = f"{_at(n['drainStart'])}-{_at(n['drainEnd']).strip()}" if n["drainStart"] is not None else "-"
        reboot = (
            f"{_at(n['rebootStart'])}-{_at(n['rebootEnd']).strip()}" if n["rebootStart"] is not None else "-"
        )
        took = "-" if n["seconds"] is None else f"{n['seconds']:.2f}"
        lines.append(
            f"{n['name']:<12} {_at(n['desired']):>7} {_at(n['working']):>7} {drain:>15} {reboot:>15} "
            f"{_at(n['done']):>7} {took:>6}"
        )
    lines.append(
        f"unavailable at once: at most {result['maxConcurrentlyUnavailable']} "
        f"(maxUnavailable {result['maxUnavailable']})"
    )
    for b in result["pdbs"]:
        lines.append(
            f"PodDisruptionBudget {b['name']}: at least {b['minHealthy']} healthy "
            f"(needs {b['desiredHealthy']}), {b['violations']} violation(s)"
        )
    lines.append(
        f"all nodes Done: {'yes' if result['allDone'] else 'NO'}; pool Updated: "
        f"{'yes' if result['poolUpdated'] else 'NO'}; rollout took {result['totalSeconds']:.2f} s"
    )
    return "\n".join(lines)
