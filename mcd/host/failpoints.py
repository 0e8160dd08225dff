"""Crash points: the places where a kill matters (the gofail pattern), for tests to hook into.

Writers call `hit(name)` at every point where a crash matters (temp file written, rename done,
backup taken, step finished …). In the daemon nothing is installed and a hit is one global
lookup: no environment variable or flag can make it do anything. The kill-at-every-step
tests install a hook (`tests/killing.py`) that counts hits and SIGKILLs the process at the
n-th one, exactly as a power cut or an OOM kill would stop it.
"""

from __future__ import annotations

from collections.abc import Callable

Hook = Callable[[str], None]

_hook: Hook | None = None


def install(hook: Hook | None) -> None:
    """Call `hook(name)` at every crash point from now on (None: remove it). For tests only."""
    global _hook  # noqa: PLW0603  # one process-wide hook, set by the test harness only
    _hook = hook


def hit(name: str) -> None:
    """A point where the process may die; `name` documents the point (and shows up in tracebacks)."""
    hook = _hook
    if hook is not None:
        hook(name)
