"""Replaying the Nodes' history from the audit log alone (pure: lines in, samples out)."""

from __future__ import annotations

import json
from typing import Any

from mcd_sim import nodephase as np
from mcd_sim.auditreplay import node_writes, replay
from mcd_sim.timeline import unavailability

OLD, NEW = "rendered-worker-old", "rendered-worker-new"
T0 = 1_800_000_000.0


def line(t: float, name: str, body: Any, *, verb: str = "patch", code: int = 200, resource: str = "nodes",
         subresource: str | None = None) -> str:  # fmt: skip
    ref = {"resource": resource, "name": name, "apiVersion": "v1"}
    if subresource:
        ref["subresource"] = subresource
    stamp = f"2027-01-15T08:00:{t:09.6f}Z"  # T0 is 2027-01-15T08:00:00Z
    return json.dumps({"verb": verb, "objectRef": ref, "responseStatus": {"code": code},
                       "requestObject": body, "stageTimestamp": stamp})  # fmt: skip


def annotations(**values: str | None) -> dict[str, Any]:
    return {"metadata": {"annotations": values}}


def seed() -> dict[str, dict[str, Any]]:
    done = {np.CURRENT_CONFIG: OLD, np.DESIRED_CONFIG: OLD, np.STATE: "Done"}
    ready = {"conditions": [{"type": "Ready", "status": "True"}]}
    return {n: {"metadata": {"name": n, "annotations": dict(done)}, "status": ready} for n in ("a", "b", "c")}


def test_only_successful_writes_of_nodes_count_in_completion_order() -> None:
    lines = [
        line(2.0, "a", annotations(**{np.STATE: "Working"})),
        line(1.0, "a", annotations(**{np.DESIRED_CONFIG: NEW})),
        line(1.5, "b", annotations(**{np.DESIRED_CONFIG: NEW}), code=409),  # refused
        line(1.6, "b", {"status": {}}, subresource="status"),
        line(1.7, "worker", {"spec": {}}, resource="machineconfigpools"),
        line(1.8, "b", None, verb="get"),
    ]
    writes = node_writes(lines)
    assert [(round(t - T0, 1), name) for t, name, _, _ in writes] == [(1.0, "a"), (2.0, "a")]


def test_replay_counts_unavailable_nodes_from_the_log() -> None:
    lines = [
        line(1.0, "a", annotations(**{np.DESIRED_CONFIG: NEW})),
        line(1.1, "b", annotations(**{np.DESIRED_CONFIG: NEW})),
        line(1.2, "a", {"spec": {"unschedulable": True}}),
        line(2.0, "a", {"spec": {"unschedulable": None}}),
        line(2.1, "a", annotations(**{np.CURRENT_CONFIG: NEW, np.STATE: "Done"})),
        line(2.2, "c", annotations(**{np.DESIRED_CONFIG: NEW})),
    ]
    samples = replay(lines, seed(), since=T0)
    assert [(round(s.t, 1), s.name, s.ready) for s in samples][:3] == [(1.0, "a", True), (1.1, "b", True),
                                                                       (1.2, "a", False)]  # fmt: skip
    worst, when, who = unavailability(samples)
    assert (worst, who) == (2, ("a", "b")) and round(when, 1) == 1.1
    assert samples[-1].annotations[np.DESIRED_CONFIG] == NEW and samples[-1].name == "c"


def test_an_update_replaces_the_whole_node() -> None:
    whole = {"metadata": {"name": "a", "annotations": {np.CURRENT_CONFIG: NEW, np.DESIRED_CONFIG: NEW}},
             "spec": {"unschedulable": True}}  # fmt: skip
    [sample] = replay([line(1.0, "a", whole, verb="update")], seed(), since=T0)
    assert sample.annotations == {np.CURRENT_CONFIG: NEW, np.DESIRED_CONFIG: NEW} and not sample.ready
