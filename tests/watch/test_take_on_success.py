"""Take only on success: what the drift reporter and the pre-update disk check take from the
monitor is committed only once the work that consumes it succeeded; a check that raises, or a
report that fails, leaves the paths pending (or unverified) for the retry (issue 26, B1 and B4)."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

import pytest
from agent.inproc import MemoryApi, syncer
from builders import ign_file, mc_object
from drifttools import laid_down

from mcd.agent.errors import HostCommandError
from mcd.agent.node_apply import NodeApplier
from mcd.agent.report.events import EventRecorder
from mcd.agent.report.metrics import Metrics
from mcd.agent.sync import Result, Syncer
from mcd.agent.watch.driftreport import DriftPolicy, DriftReporter, NodeReporter
from mcd.config.machineconfig import MachineConfig
from mcd.host.root import HostRoot
from mcd.node import annotations as ann
from mcd.node.annotations import NodeState

A = "/etc/mcd-test/a.conf"
B = "/etc/mcd-test/b.conf"
POLICY = "/etc/containers/policy.json"


class Reasons:
    def __init__(self) -> None:
        self.reasons: list[str] = []
        self.fail = False

    def report_drift(self, reason: str) -> None:
        if self.fail:
            raise ConnectionError("the API server is away")
        self.reasons.append(reason)

    def current(self) -> tuple[NodeState, str]:
        return NodeState.DONE, ""


class Applier:
    def __init__(self, root: HostRoot, mc: MachineConfig) -> None:
        self.root, self.mc = root, mc

    def disk_config(self) -> MachineConfig:
        return self.mc

    def host(self) -> object:
        return object()


def _mismatch(path: str) -> str:
    return f'content mismatch for file "{path}"'


@pytest.fixture
def two_files(tmp_path: Path) -> Any:
    obj = mc_object("rendered-a", files=[ign_file(A, "a=1\n"), ign_file(B, "b=1\n")])
    root, mc = laid_down(tmp_path, obj)
    reporter = Reasons()
    drift = DriftReporter(
        Applier(HostRoot(root), mc),
        reporter,
        EventRecorder(None, "n"),
        Metrics(),
        lambda: None,
        policy=DriftPolicy.DEGRADE,
    )  # type: ignore[arg-type]
    drift.ensure()
    yield root, drift, reporter
    drift.stop()


def test_a_check_that_raises_loses_no_other_drift(two_files: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    root, drift, reporter = two_files
    monitor = drift.monitor
    real = monitor.check
    broken = {A}

    def check(path: str) -> str | None:
        if path in broken:
            raise PermissionError(13, "Permission denied")
        return real(path)

    monkeypatch.setattr(monitor, "check", check)
    (root / A.lstrip("/")).write_text("a=2\n")
    (root / B.lstrip("/")).write_text("b=2\n")
    with pytest.raises(PermissionError):  # the loop retries the `drift` key after a backoff
        drift.handle()
    assert reporter.reasons == [_mismatch(B)]  # the path whose check worked is reported
    broken.clear()
    drift.handle()  # the retry: the path whose check raised was kept
    assert reporter.reasons == [_mismatch(B), _mismatch(A)]
    assert drift.drifted == {A: _mismatch(A), B: _mismatch(B)}


def test_a_report_that_fails_keeps_every_path(two_files: Any) -> None:
    root, drift, reporter = two_files
    (root / A.lstrip("/")).write_text("a=2\n")
    reporter.fail = True
    with pytest.raises(ConnectionError):
        drift.handle()
    assert drift.drifted == {}  # nothing taken as reported
    reporter.fail = False
    drift.handle()
    assert reporter.reasons == [_mismatch(A)]


def test_a_path_put_back_in_a_round_that_failed_still_asks_for_its_sync(
    two_files: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, drift, _ = two_files
    (root / A.lstrip("/")).write_text("a=2\n")
    drift.handle()
    assert drift.drifted == {A: _mismatch(A)}
    real = drift.monitor.check
    monkeypatch.setattr(
        drift.monitor, "check", lambda p: (_ for _ in ()).throw(OSError(5, "EIO")) if p == B else real(p)
    )
    (root / A.lstrip("/")).write_text("a=1\n")  # put back
    (root / B.lstrip("/")).touch()
    with pytest.raises(OSError):
        drift.handle()
    monkeypatch.setattr(drift.monitor, "check", real)
    assert drift.handle() is True  # the sync that returns the node to Done


def test_an_unverified_path_stays_unverified_until_a_check_of_it_passes(two_files: Any) -> None:
    root, drift, _ = two_files
    mc = drift.applier.disk_config()
    assert drift.unverified(mc) is None  # all of it, at first
    assert drift.unverified(mc) is None  # still: no check passed
    drift.verified(mc)
    (root / A.lstrip("/")).write_text("a=2\n")
    assert set(drift.unverified(mc) or ()) == {A}
    # the check raised (or found drift): no `verified`
    assert set(drift.unverified(mc) or ()) == {A}
    drift.verified(mc)
    assert set(drift.unverified(mc) or ()) == set()


class FlakyApplier(NodeApplier):
    """The on-disk check raises once when told (rpm-ostree failing, say), after taking its paths."""

    fail_next = False

    def check(self, mc: MachineConfig, *, only: Collection[str] | None = None) -> str | None:
        if self.fail_next:
            self.fail_next = False
            raise HostCommandError("rpm-ostree status: exit status 1")
        return super().check(mc, only=only)


def test_a_preflight_check_that_raises_does_not_trust_the_drifted_file(tmp_path: Path) -> None:
    a = mc_object("rendered-a", files=[ign_file(A, "a=1\n"), ign_file(POLICY, "{}\n")])
    b = mc_object("rendered-b", files=[ign_file(A, "a=1\n"), ign_file(POLICY, '{"b": 1}\n')])
    root, _ = laid_down(tmp_path, a)
    api = MemoryApi({ann.CURRENT_CONFIG: "rendered-a", ann.DESIRED_CONFIG: "rendered-a", ann.STATE: "Done"})
    api.mcs.update({"rendered-a": a, "rendered-b": b})
    plain = syncer(root, api)
    applier = FlakyApplier(plain.applier.root, plain.applier.runner)
    drift = DriftReporter(
        applier, NodeReporter(plain.writer), EventRecorder(None, "n"), Metrics(), lambda: None
    )
    s = Syncer(
        api=api,
        writer=plain.writer,
        events=EventRecorder(None, "n"),
        metrics=Metrics(),
        applier=applier,
        drainer=plain.drainer,
        before_update=drift.suspend,
        watch=drift,
    )
    try:
        assert s.sync(boot=True) is Result.IDLE
        drift.ensure()
        (root / A.lstrip("/")).write_text("edited by hand\n")
        drift.handle()  # the `drift` key: Degraded
        assert api.states()[-1] == ("Degraded", _mismatch(A))
        api.set(desiredConfig="rendered-b")
        plain.writer.refresh()
        applier.fail_next = True
        with pytest.raises(HostCommandError):
            s.sync(boot=False)
        drift.ensure()
        # the retry reads the drifted file again: upstream's preflight failure, no update
        with pytest.raises(
            Exception, match="unexpected on-disk state validating against rendered-a: " + _mismatch(A)
        ):
            s.sync(boot=False)
        assert (root / A.lstrip("/")).read_text() == "edited by hand\n"
        assert api.history[-1][ann.CURRENT_CONFIG] == "rendered-a"
    finally:
        drift.stop()
