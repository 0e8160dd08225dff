"""The agent's memory handed back to the system: glibc's allocator, tuned and trimmed.

The C library is loaded once for all the allocator calls. Not glibc (musl, say): nothing to
tune or hand back explicitly, and every call here does nothing.
"""

from __future__ import annotations

import ctypes
import gc
from collections.abc import Callable


def _glibc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:
        return None  # not glibc: its allocator tunings do not apply


_LIBC = _glibc()
# None where the C library lacks them: nothing to hand back or tune explicitly
_TRIM: Callable[[int], int] | None = getattr(_LIBC, "malloc_trim", None)
_MALLOPT: Callable[[int, int], int] | None = getattr(_LIBC, "mallopt", None)
_M_ARENA_MAX = -8  # glibc's malloc.h


def limit_malloc_arenas(arenas: int = 2) -> None:
    """Have glibc share `arenas` malloc arenas among all threads (before they start).

    By default each thread that allocates under contention gets an arena of its own (up to
    eight per core); the agent's dozen threads then hold the freed pages of a decoded config in
    several arenas at once. Two keep the idle memory a few megabytes lower for no measurable
    time.
    """
    if _MALLOPT is not None:
        _MALLOPT(_M_ARENA_MAX, arenas)


def trim() -> None:
    """Hand the allocator's free pages back to the system (the GIL is released meanwhile)."""
    if _TRIM is not None:
        _TRIM(0)


def release() -> None:
    """Hand the memory of a sync's configs back to the system (once the loop is idle).

    A rendered config parsed is tens of megabytes of small objects; once a sync is over the
    agent keeps one of them, and glibc would otherwise keep the freed arenas for the process.
    """
    gc.collect()
    trim()
