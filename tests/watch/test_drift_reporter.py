"""The drift monitor with its reporter on real inotify: every kind of hand change marks the node
Degraded with upstream's text, a touch does not, and putting the path back asks for the sync that
returns the node to Done."""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from builders import ign_file, mc_object
from drifttools import laid_down

from mcd.agent.report.events import EventRecorder
from mcd.agent.report.metrics import Metrics
from mcd.agent.watch.driftreport import DriftPolicy, DriftReporter
from mcd.config.machineconfig import MachineConfig
from mcd.host.accounts import Accounts
from mcd.host.files import FileWriter
from mcd.host.root import HostRoot
from mcd.node.annotations import NodeState

A = "/etc/mcd-test/a.conf"
UNIT = "etc/systemd/system/hello.service"
WANTS = "etc/systemd/system/multi-user.target.wants/hello.service"
UNIT_TEXT = "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"


class FakeReporter:
    def __init__(self) -> None:
        self.reasons: list[str] = []

    def report_drift(self, reason: str) -> None:
        self.reasons.append(reason)

    def current(self) -> tuple[NodeState, str]:
        return NodeState.DONE, ""


@dataclass
class FakeSystemd:
    root: Path

    def is_enabled(self, names: Any) -> dict[str, str]:
        return {n: "enabled" if (self.root / WANTS).is_symlink() else "disabled" for n in names}


@dataclass
class FakeHost:
    systemd: FakeSystemd
    files: FileWriter


@dataclass
class FakeApplier:
    root: HostRoot
    mc: MachineConfig
    fake_host: FakeHost

    def disk_config(self) -> MachineConfig:
        return self.mc

    def host(self) -> FakeHost:
        return self.fake_host


@pytest.fixture
def watched(tmp_path: Path) -> Iterator[tuple[Path, DriftReporter, FakeReporter, threading.Event]]:
    obj = mc_object("rendered-a", files=[ign_file(A, "a=1\n"), ign_file("/etc/mcd-test/marker", "")],
                    units=[{"name": "hello.service", "enabled": True, "contents": UNIT_TEXT}])  # fmt: skip
    root, mc = laid_down(tmp_path, obj)
    (root / WANTS).parent.mkdir(parents=True, exist_ok=True)
    os.symlink("/etc/systemd/system/hello.service", root / WANTS)
    hr = HostRoot(root)
    applier = FakeApplier(hr, mc, FakeHost(FakeSystemd(root), FileWriter(hr, Accounts.load(hr))))
    changed = threading.Event()
    reporter = FakeReporter()
    drift = DriftReporter(applier, reporter, EventRecorder(None, "n"), Metrics(), changed.set,  # type: ignore[arg-type]
                          policy=DriftPolicy.DEGRADE)  # fmt: skip
    drift.ensure()
    yield root, drift, reporter, changed
    drift.stop()


def _loop_until(drift: DriftReporter, changed: threading.Event, done: Callable[[bool], bool]) -> None:
    """What the daemon's loop does with the `drift` key, until `done(sync_asked)` holds."""
    deadline = time.monotonic() + 5
    while True:
        if done(drift.handle()):
            return
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError("timed out")
        changed.wait(left)
        changed.clear()


def _edit(root: Path) -> None:
    (root / A.lstrip("/")).write_text("a=2\n")


def _sed(root: Path) -> None:  # sed -i: a new file in the same directory renamed over the old
    tmp = root / "etc/mcd-test/sedXYZ"
    tmp.write_text((root / A.lstrip("/")).read_text().replace("a=1", "a=2"))
    tmp.chmod(0o644)
    os.rename(tmp, root / A.lstrip("/"))


def _rm_dir(root: Path) -> None:
    shutil.rmtree(root / "etc/mcd-test")


def _mask(root: Path) -> None:
    (root / UNIT).unlink()
    os.symlink("/dev/null", root / UNIT)


MISSING = f'could not stat file "{A}": lstat {A}: no such file or directory'
CASES = {
    "hand edit": (_edit, f'content mismatch for file "{A}"'),
    "sed -i": (_sed, f'content mismatch for file "{A}"'),
    "chmod": (lambda r: (r / A.lstrip("/")).chmod(0o600),
              f'mode mismatch for file: "{A}"; expected: -rw-r--r--/420/0644; received: -rw-------/384/0600'),
    "chown": (lambda r: os.chown(r / A.lstrip("/"), 1000, 1000),
              f'owner mismatch for file: "{A}"; expected: 0:0; received: 1000:1000'),
    "delete": (lambda r: (r / A.lstrip("/")).unlink(), MISSING),
    "delete of the parent directory": (_rm_dir, MISSING),
    "unit masked": (_mask, 'mode mismatch for file: "/etc/systemd/system/hello.service"; expected: '
                    "-rw-r--r--/420/0644; received: Lrwxrwxrwx/134218239/01000000777"),
    "enablement link removed": (lambda r: (r / WANTS).unlink(),
                                'unit "hello.service" expected enabled=true, but systemd reports "disabled"'),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_each_kind_of_change_is_degraded_with_upstreams_text(
    watched: tuple[Path, DriftReporter, FakeReporter, threading.Event], case: str
) -> None:
    root, drift, reporter, changed = watched
    action, reason = CASES[case]
    action(root)
    _loop_until(drift, changed, lambda _: bool(reporter.reasons))
    assert reporter.reasons == [reason]


def test_touch_is_no_drift_and_putting_back_asks_for_a_sync(
    watched: tuple[Path, DriftReporter, FakeReporter, threading.Event],
) -> None:
    root, drift, reporter, changed = watched
    (root / A.lstrip("/")).touch()
    (root / "etc/mcd-test/marker").write_text("x")  # a drift after the touch: everything before is handled
    _loop_until(drift, changed, lambda _: bool(reporter.reasons))
    assert reporter.reasons == ['content mismatch for file "/etc/mcd-test/marker"']
    (root / "etc/mcd-test/marker").write_text("")
    _loop_until(drift, changed, lambda sync: sync)
    assert drift.drifted == {}
