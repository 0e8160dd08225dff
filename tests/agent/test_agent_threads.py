"""Every thread of mcd starts through the guard (`mcd.runtime.guard`), so none dies silently."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mcd.agent.report.mcn import MachineConfigNodeReporter
from mcd.agent.report.node import NodeWriter
from mcd.kube.errors import NotFoundError
from mcd.node import machineconfignode as mcn

MCD = Path(__file__).resolve().parents[2] / "mcd"
GUARD = MCD / "runtime" / "guard.py"


def test_no_thread_is_started_outside_the_guard() -> None:
    pattern = re.compile(r"\b(threading\.)?Thread\(")
    offenders = [
        f"{path.relative_to(MCD.parent)}:{n}"
        for path in sorted(MCD.rglob("*.py"))
        if path != GUARD
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line) and not line.lstrip().startswith("#")
    ]
    assert offenders == [], "start threads with mcd.runtime.guard.spawn"


class _FlakyApi:
    """Fails once with an error the writer does not expect (a bug, an odd answer), then works."""

    def __init__(self) -> None:
        self.calls = 0
        self.written = threading.Event()

    def get_machineconfignode(self, name: str) -> dict[str, Any]:
        self.calls += 1
        if self.calls == 1:
            raise RuntimeError("unexpected answer")
        raise NotFoundError(404, "not found")

    def create_machineconfignode(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        return {**obj, "metadata": {**obj["metadata"], "resourceVersion": "1"}}

    def update_machineconfignode(self, name: str, obj: Mapping[str, Any], *, status: bool = False) -> Any:
        self.written.set()
        return {**obj, "metadata": {**obj["metadata"], "resourceVersion": "2"}}


def test_the_machineconfignode_writer_survives_an_unexpected_error() -> None:
    """Reported (B3): the writer thread was not guarded; one unexpected error ended it for good and
    no phase was reported again until the agent restarted."""
    api = _FlakyApi()
    reporter = MachineConfigNodeReporter(api, NodeWriter(None, "node-0"))  # type: ignore[arg-type]
    reporter.start()
    try:
        reporter.report(mcn.needs_update("node-0"))
        assert api.written.wait(10), "the report was never written after the writer failed once"
        assert api.calls >= 2
    finally:
        started = time.monotonic()
        reporter.stop()
        assert time.monotonic() - started < 10


class _SlowApi:
    """Records each status write; the first one waits until the test lets it through."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()
        self.statuses: list[dict[str, str]] = []
        self.obj: dict[str, Any] | None = None

    def get_machineconfignode(self, name: str) -> dict[str, Any]:
        if self.obj is None:
            raise NotFoundError(404, "not found")
        return self.obj

    def create_machineconfignode(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        self.obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": "1"}}
        return self.obj

    def update_machineconfignode(self, name: str, obj: Mapping[str, Any], *, status: bool = False) -> Any:
        self.entered.set()
        assert self.release.wait(10)
        if not status:  # the spec (the update is compatible): not a condition
            self.obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": "1"}}
            return self.obj
        conditions = obj.get("status", {}).get("conditions", [])
        self.statuses.append({c["type"]: f"{c['status']}/{c['reason']}" for c in conditions})
        self.obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(len(self.statuses) + 1)}}
        return self.obj


REPORTS = (
    mcn.prepared((), False),
    mcn.drain_not_required(),  # UpdateExecuted, child Drained
    mcn.applying(False, False),  # UpdateExecuted again: not in the same write
    mcn.applied(False, False),  # and again
    mcn.post_action_none(),
    mcn.resumed("rendered-worker-b"),
)


def _values(statuses: list[dict[str, str]]) -> dict[str, list[str]]:
    """Each condition's values, in the order the writes gave them (repeats merged)."""
    out: dict[str, list[str]] = {}
    for status in statuses:
        for kind, value in status.items():
            seen = out.setdefault(kind, [])
            if not seen or seen[-1] != value:
                seen.append(value)
    return out


def _written(*, burst: bool) -> list[dict[str, str]]:
    """The status writes for needs_update then REPORTS: queued while the first write is in flight
    (`burst`), or each one written before the next is made."""
    api = _SlowApi()
    reporter = MachineConfigNodeReporter(api, NodeWriter(None, "node-0"))  # type: ignore[arg-type]
    reporter.start()
    try:
        reporter.report(mcn.needs_update("node-0"))
        assert api.entered.wait(10)
        if not burst:
            api.release.set()
        for report in REPORTS:
            if not burst:
                reporter.flush(10)
            reporter.report(report)
        api.release.set()
        reporter.flush(10)
    finally:
        reporter.stop()
    return api.statuses


def test_reports_queued_during_a_write_go_out_in_one_write_and_no_condition_skips_a_value() -> None:
    """The reports of a burst of phases are folded into the next write (8 writes per rebootless
    update were 8 round trips, and the update waited for them before the uncordon), up to a
    report that would set again a condition the batch already sets: that one waits for the next
    write, so each condition still goes through every value it was given."""
    one_by_one, folded = _written(burst=False), _written(burst=True)
    assert len(one_by_one) == 1 + len(REPORTS)
    # needs_update | prepared, drain_not_required | applying | applied, post action, resumed
    assert len(folded) == 4
    assert folded[-1] == one_by_one[-1]
    assert _values(folded) == _values(one_by_one)
