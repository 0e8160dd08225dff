"""The drift monitor's notifier under the agent's guard: an OSError while following a path
restarts it (every path checked again) instead of ending it, and a failed start leaks no inotify
instance."""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from builders import ign_file, mc_object
from drifttools import Collector, laid_down

from mcd.agent.watch.drift import DriftMonitor
from mcd.host.root import HostRoot
from mcd.runtime import guard


def _eventually(pred: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


A = "/etc/mcd-test/a.conf"
LATER = "/etc/later/b.conf"


def _monitor(tmp_path: Path) -> tuple[Path, DriftMonitor, Collector]:
    files = [ign_file(A, "a=1\n"), ign_file(LATER, "b\n")]
    root, mc = laid_down(tmp_path, mc_object("rendered-a", files=files))
    shutil.rmtree(root / "etc/later")  # created later: its appearance makes the notifier look it up
    collector = Collector()
    assert mc.config is not None
    return root, DriftMonitor(HostRoot(root), mc.config, collector.on_change), collector


def test_the_drift_notifier_survives_an_oserror_and_reports_drift_after_it(tmp_path: Path) -> None:
    """Reported: an OSError while following a path ended the notifier; no drift was reported again."""
    root, monitor, collector = _monitor(tmp_path)
    monitor.start()
    try:
        real = monitor._host_dir
        failures: list[str] = []

        def host_dir(directory: str) -> Path | None:
            if directory == "/etc/later" and not failures:
                failures.append(directory)
                raise OSError(40, "Too many levels of symbolic links", directory)
            return real(directory)

        monitor._host_dir = host_dir  # type: ignore[method-assign]
        before = guard.restart_counts().get("drift-monitor", 0)
        (root / "etc/later").mkdir()
        _eventually(lambda: bool(failures), "the injected OSError")
        # the restarted notifier has every path checked (it may have missed events) ...
        collector.wait(monitor, LATER)
        assert guard.restart_counts()["drift-monitor"] == before + 1
        # ... and goes on reporting
        (root / A.lstrip("/")).write_text("a=2\n")
        collector.wait(monitor, A)
        assert monitor.check(A) == f'content mismatch for file "{A}"'
    finally:
        monitor.stop()


def _inotify_fds() -> int:
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            n += os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:inotify"
    return n


def test_a_failed_monitor_start_leaks_no_inotify_instance(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, monitor, _ = _monitor(tmp_path)

    def fail(directory: str) -> None:
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(monitor, "_place", fail)
    before = _inotify_fds()
    for _ in range(5):
        with pytest.raises(OSError):
            monitor.start()
    assert _inotify_fds() == before
    assert not monitor.running
