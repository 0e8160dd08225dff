"""The sync with the drift monitor armed (in process, real inotify, a sandbox root): armed before
Done and across syncs, the update's own writes are not drift, an edit made while the update
ran is, and the on-disk checks read only what the monitor saw change."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

import pytest
from builders import ign_file, mc_object
from harness import make_root
from inproc import NODE, MemoryApi, syncer

from mcd.agent.applied import Applied
from mcd.agent.node_apply import NodeApplier
from mcd.agent.report.events import EventRecorder
from mcd.agent.report.metrics import Metrics
from mcd.agent.report.node import NodeWriter
from mcd.agent.sync import Result, Syncer
from mcd.agent.watch.driftreport import DriftReporter, NodeReporter
from mcd.agent.watch.wiring import Watchers
from mcd.config.machineconfig import MachineConfig
from mcd.node import annotations as ann

A = "/etc/mcd-test/a.conf"
POLICY = "/etc/containers/policy.json"  # a rebootless change: the default policy reloads crio


def _config(name: str, policy: str) -> dict[str, Any]:
    return mc_object(name, files=[ign_file(A, "a=1\n"), ign_file(POLICY, policy)])


A1, B, C = (
    _config("rendered-a", "{}\n"),
    _config("rendered-b", '{"b": 1}\n'),
    _config("rendered-c", '{"c": 1}\n'),
)


class Recorder(EventRecorder):
    """Keeps what it records, for the test to read."""

    def __init__(self) -> None:
        super().__init__(None, NODE)
        self.recorded: list[tuple[str, str, str]] = []

    def record(self, etype: str, reason: str, message: str) -> None:
        self.recorded.append((etype, reason, message))
        super().record(etype, reason, message)


class Watched:
    """A Syncer wired to a real DriftReporter as the loop wires them (before_update, watch)."""

    def __init__(self, tmp_path: Path, applier_class: type[NodeApplier] = NodeApplier) -> None:
        self.root = make_root(tmp_path, A1)
        self.api = MemoryApi({ann.CURRENT_CONFIG: "rendered-a", ann.DESIRED_CONFIG: "rendered-a",
                              ann.STATE: "Done"})  # fmt: skip
        for obj in (A1, B, C):
            self.api.mcs[obj["metadata"]["name"]] = obj
        plain = syncer(self.root, self.api)
        applier = applier_class(plain.applier.root, plain.applier.runner)
        self.events = Recorder()
        self.writer: NodeWriter = plain.writer
        self.drift = DriftReporter(applier, NodeReporter(self.writer), self.events, Metrics(), lambda: None)
        self.watchers = Watchers(applier, self.writer, self.drift, events=self.events, metrics=Metrics())
        before = self.watchers.before_update
        self.syncer = Syncer(api=self.api, writer=self.writer, events=self.events, metrics=Metrics(),
                             applier=applier, drainer=plain.drainer, before_update=before,
                             watch=self.drift)  # fmt: skip

    def sync(self, *, boot: bool = False) -> Result:
        result = self.syncer.sync(boot=boot)
        self.watchers.after_sync()
        return result

    def desire(self, name: str) -> None:
        self.api.set(desiredConfig=name)
        self.writer.refresh()  # what the watch does

    def reasons(self, reason: str) -> list[str]:
        return [m for _, r, m in self.events.recorded if r == reason]


@pytest.fixture
def watched(tmp_path: Path) -> Any:
    w = Watched(tmp_path)
    yield w
    w.watchers.stop()


def test_retried_and_repeated_syncs_never_stop_the_monitor(watched: Watched) -> None:
    assert watched.sync(boot=True) is Result.IDLE
    watched.desire("rendered-missing")
    for _ in range(3):  # a sync that fails after the update began, retried
        with pytest.raises(Exception, match="not found"):
            watched.syncer.sync(boot=False)
        watched.watchers.after_sync()
    watched.desire("rendered-b")
    assert watched.sync() is Result.IDLE
    assert watched.reasons("ConfigDriftMonitorStopped") == []
    assert watched.reasons("ConfigDriftMonitorStarted") == [
        "Config Drift Monitor started, watching against rendered-a",
        "Config Drift Monitor started, watching against rendered-b",
    ]
    assert watched.reasons("ConfigDriftDetected") == []  # the update's own writes
    assert watched.api.history[-1][ann.STATE] == "Done"


class EditingApplier(NodeApplier):
    """Someone edits a managed file right after the update's transaction, before Done."""

    def apply(self, old: MachineConfig, new: MachineConfig, *args: Any, **kwargs: Any) -> Applied:
        applied = super().apply(old, new, *args, **kwargs)
        self.root.join(A).write_text("edited while the update ran\n")
        return applied


def test_an_edit_made_while_the_update_runs_is_reported_not_done(tmp_path: Path) -> None:
    w = Watched(tmp_path, EditingApplier)
    try:
        assert w.sync(boot=True) is Result.IDLE
        w.desire("rendered-b")
        assert w.sync() is Result.IDLE
        reason = f'content mismatch for file "{A}"'
        assert w.api.states()[-2:] == [("Working", ""), ("Degraded", reason)]
        assert w.reasons("ConfigDriftDetected") == [reason]
        assert w.api.history[-1][ann.CURRENT_CONFIG] == "rendered-a"  # never reported as in b
    finally:
        w.watchers.stop()


class CountingApplier(NodeApplier):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.read: list[frozenset[str] | None] = []

    def check(self, mc: MachineConfig, *, only: Collection[str] | None = None) -> str | None:
        self.read.append(None if only is None else frozenset(only))
        return super().check(mc, only=only)


def test_the_checks_read_only_what_the_monitor_saw_change(tmp_path: Path) -> None:
    w = Watched(tmp_path, CountingApplier)
    applier = w.syncer.applier
    assert isinstance(applier, CountingApplier)
    try:
        assert w.sync(boot=True) is Result.IDLE
        assert applier.read == [None]  # the boot check: all of it, with the monitor armed
        w.desire("rendered-b")
        assert w.sync() is Result.IDLE
        assert applier.read[-1] == frozenset()  # nothing changed since: nothing to read
        (w.root / A.lstrip("/")).write_text("a=1\n")  # written again, alike: read again, clean
        w.desire("rendered-c")
        assert w.sync() is Result.IDLE
        # the file b wrote (declared differently from a) and the one written since
        assert applier.read[-1] == frozenset({A, POLICY})
        assert w.reasons("ConfigDriftDetected") == []
        assert w.drift.monitor is not None
        w.drift.monitor.unverify(None)  # what an overflowed inotify queue does
        w.desire("rendered-b")
        assert w.sync() is Result.IDLE
        assert applier.read[-1] is None
        assert [s for s, _ in w.api.states()] == [
            "Done",
            "Working",
            "Done",
            "Working",
            "Done",
            "Working",
            "Done",
        ]
    finally:
        w.watchers.stop()
