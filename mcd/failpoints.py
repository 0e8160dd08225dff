"""Crash injection for the kill-at-every-step tests (the gofail pattern).

Writers call `hit(name)` at every point where a crash matters (temp file written, rename done,
backup taken, step finished …). Normally a hit costs one comparison. A test arms the module
(`arm(n)` in a forked child, or `MCD_FAILPOINT_KILL_AT=n` for a child process) and the n-th hit
SIGKILLs the process there, exactly as a power cut or an OOM kill would stop it.
"""

from __future__ import annotations

import os
import signal

_ENV = "MCD_FAILPOINT_KILL_AT"
_kill_at: int | None = None
_count = 0
_env_read = False


def arm(kill_at: int | None) -> None:
    """Kill the process at hit number `kill_at` (1-based) from now on; None disarms and only counts."""
    global _kill_at, _count, _env_read
    _kill_at, _count, _env_read = kill_at, 0, True


def hits() -> int:
    """How many failpoints were passed since the last `arm`."""
    return _count


def hit(name: str) -> None:
    """A point where the process may die; `name` documents the point (and shows up in tracebacks)."""
    global _count, _kill_at, _env_read
    if not _env_read:
        _env_read = True
        value = os.environ.get(_ENV)
        _kill_at = int(value) if value and value.isdigit() else None
    _count += 1
    if _kill_at is not None and _count == _kill_at:
        os.kill(os.getpid(), signal.SIGKILL)
