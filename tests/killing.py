"""Run code in a forked child that SIGKILLs itself at a failpoint (see mcd/failpoints.py)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
from collections.abc import Callable

_PR_SET_CHILD_SUBREAPER = 36


def _become_subreaper() -> None:
    """Orphans of our children (a systemctl or rpm-ostree the killed child had started) become ours."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def in_child(fn: Callable[[], object], kill_at: int | None) -> int | None:
    """Run `fn` in a forked child armed to die at failpoint `kill_at`; the signal that ended it, or None.

    The child leads its own process group. When it is killed, the commands it was running are
    killed too and reaped before this returns, so nothing changes the tree while it is inspected
    (a real node's cgroup would take them down with the daemon as well). A child that raised
    fails the calling test.
    """
    from mcd import failpoints

    _become_subreaper()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 0
        try:
            os.setpgid(0, 0)
            failpoints.arm(kill_at)
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
    if os.WIFSIGNALED(status):
        return os.WTERMSIG(status)
    assert os.WEXITSTATUS(status) == 0, f"the child failed (exit {os.WEXITSTATUS(status)}), kill_at={kill_at}"
    return None


def killed_at(n: int, op: Callable[[], object]) -> bool:
    """Run `op` in a child killed at failpoint `n`; True when it was killed, False when it finished."""
    ended_by = in_child(op, n)
    assert ended_by in (None, signal.SIGKILL)
    return ended_by is not None
