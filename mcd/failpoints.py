"""Crash injection for the kill-at-every-step tests (the gofail pattern).

Writers call `hit(name)` at every point where a crash matters (temp file written, rename done,
backup taken, step finished …). Normally a hit costs one comparison. A test arms the module
(`arm(n)` in a forked child, or `MCD_FAILPOINT_KILL_AT=n` for a child process) and the n-th hit
SIGKILLs the process there, exactly as a power cut or an OOM kill would stop it.
"""

from __future__ import annotations

import os
import signal
import threading

_ENV = "MCD_FAILPOINT_KILL_AT"


class _State:
    kill_at: int | None = None
    count = 0
    env_read = False
    # batched writes pass failpoints from worker threads: each hit gets its own number
    lock = threading.Lock()


def arm(kill_at: int | None) -> None:
    """Kill the process at hit number `kill_at` (1-based) from now on; None disarms and only counts."""
    _State.kill_at, _State.count, _State.env_read = kill_at, 0, True


def hits() -> int:
    """How many failpoints were passed since the last `arm`."""
    return _State.count


def hit(name: str) -> None:
    """A point where the process may die; `name` documents the point (and shows up in tracebacks)."""
    with _State.lock:
        if not _State.env_read:
            _State.env_read = True
            value = os.environ.get(_ENV)
            _State.kill_at = int(value) if value and value.isdigit() else None
        _State.count += 1
        kill = _State.kill_at is not None and _State.count == _State.kill_at
    if kill:
        os.kill(os.getpid(), signal.SIGKILL)
