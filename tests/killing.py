"""Run code in a forked child that SIGKILLs itself at a failpoint (see mcd/host/failpoints.py).

The daemon only marks its crash points; the hook installed here counts them and kills the
process at the chosen one.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path

from mcd.host import failpoints

_PR_SET_CHILD_SUBREAPER = 36


class _Counter:
    """Counts failpoint hits; kills the process at hit number `kill_at` (1-based) when set."""

    def __init__(self, kill_at: int | None) -> None:
        self.kill_at = kill_at
        self.count = 0
        # batched writes pass failpoints from worker threads: each hit gets its own number
        self.lock = threading.Lock()

    def __call__(self, name: str) -> None:
        with self.lock:
            self.count += 1
            kill = self.kill_at is not None and self.count == self.kill_at
        if kill:
            os.kill(os.getpid(), signal.SIGKILL)


_counter = _Counter(None)


def arm(kill_at: int | None) -> None:
    """Count failpoint hits from now on and die at hit `kill_at` (None: only count)."""
    global _counter  # noqa: PLW0603  # one hook per (forked) test process
    _counter = _Counter(kill_at)
    failpoints.install(_counter)


def disarm() -> None:
    """Remove the hook: failpoints do nothing again."""
    failpoints.install(None)


def hits() -> int:
    """How many failpoints were passed since the last `arm`."""
    return _counter.count


def _become_subreaper() -> None:
    """Orphans of our children (a systemctl or rpm-ostree the killed child had started) become ours."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _children() -> set[int]:
    """This process's children (its own and the orphans reparented to it), from /proc."""
    me, out = os.getpid(), set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        if int(stat.rsplit(")", 1)[1].split()[1]) == me:  # the field after the state: ppid
            out.add(int(entry.name))
    return out


def _kill_orphans(before: set[int]) -> None:
    """Kill and reap the killed child's orphans outside its process group: the runner starts
    each command in a session of its own (so a timeout kills the command's whole group), and a
    SIGKILL of the daemon leaves those running, as systemd's cgroup kill would not."""
    while orphans := _children() - before:
        for orphan in orphans:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(orphan, signal.SIGKILL)  # each leads its own session's group
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(orphan, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(orphan, 0)


def in_child(fn: Callable[[], object], kill_at: int | None) -> int | None:
    """Run `fn` in a forked child armed to die at failpoint `kill_at`; the signal that ended it, or None.

    The child leads its own process group. When it is killed, the commands it was running are
    killed too and reaped before this returns, so nothing changes the tree while it is inspected
    (a real node's cgroup would take them down with the daemon as well). A child that raised
    fails the calling test.
    """
    _become_subreaper()
    before = _children()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 0
        try:
            os.setpgid(0, 0)
            arm(kill_at)
            fn()
        except BaseException:  # reported through the exit code only: the parent asserts
            code = 3
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    while True:  # reap the group's orphans (reparented to us): returns once none is left
        try:
            os.waitpid(-pid, 0)
        except ChildProcessError:
            break
    _kill_orphans(before)
    if os.WIFSIGNALED(status):
        return os.WTERMSIG(status)
    assert os.WEXITSTATUS(status) == 0, f"the child failed (exit {os.WEXITSTATUS(status)}), kill_at={kill_at}"
    return None


def killed_at(n: int, op: Callable[[], object]) -> bool:
    """Run `op` in a child killed at failpoint `n`; True when it was killed, False when it finished."""
    ended_by = in_child(op, n)
    assert ended_by in (None, signal.SIGKILL)
    return ended_by is not None


def assert_converges_after_any_kill(
    tmp_path: Path,
    snapshot: Callable[[Path], object],
    setup: Callable[[Path], None],
    op: Callable[[Path], object],
    finish: Callable[[Path], object] | None = None,
) -> int:
    """Kill `op` at each failpoint in turn, re-run it, and compare `snapshot` with an
    uninterrupted run's; returns how many failpoints were killed at.

    `finish` (the commit step) runs once `op` has completed, never after a kill: that is what a
    restarted update does.
    """

    def complete(base: Path) -> None:
        op(base)
        if finish is not None:
            finish(base)

    clean = tmp_path / "clean"
    setup(clean)
    complete(clean)
    expected = snapshot(clean)
    n = 1
    try:
        while True:
            base = tmp_path / f"kill-{n}"
            setup(base)
            if not killed_at(n, functools.partial(op, base)):
                break
            disarm()
            complete(base)
            assert snapshot(base) == expected, f"no convergence after a kill at failpoint {n}"
            n += 1
    finally:
        disarm()
    return n - 1
