"""Nothing escapes: every long-lived thread of the agent runs under one guard, and signals only
set a flag.

Kopf's task guard (`kopf/_cogs/aiokits/aiotasks.py` `guard`) is the model: a background task
that raises is logged with its traceback, counted, and started again after a backoff, so one
bad event, one unexpected answer or one bug in a watcher costs a restart of that thread, never
the process, and never a thread that is silently gone. The count is the metric
`mcd_thread_restarts_total{thread=...}` (`mcd.agent.report.metrics` reads `restart_counts()`).

A signal handler runs on the main thread between two bytecodes, maybe while that thread holds
a lock the handler would take (a queue's, an Event's condition): `SignalFlag`'s handler only
sets a flag and writes one byte to a pipe; a guarded thread reads the pipe and does the rest
in ordinary thread context.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from types import FrameType

LOG = logging.getLogger(__name__)

# a restarted thread waits 1 s, 2 s, 4 s … up to a minute; a run that lasted this long before it
# failed counts as healthy again and starts the backoff over
RESTART_START = 1.0
RESTART_CAP = 60.0
HEALTHY_RUN = 60.0

_counts_lock = threading.Lock()
_counts: dict[str, int] = {}


def restart_counts() -> dict[str, int]:
    """Restarts of each guarded thread of this process, by thread name."""
    with _counts_lock:
        return dict(_counts)


def _count(name: str) -> int:
    with _counts_lock:
        _counts[name] = _counts.get(name, 0) + 1
        return _counts[name]


def run_guarded(
    name: str,
    body: Callable[[], None],
    stop: threading.Event,
    *,
    on_restart: Callable[[], None] | None = None,
    start: float = RESTART_START,
    cap: float = RESTART_CAP,
) -> None:
    """Run `body` until it returns or `stop` is set; when it raises, log, count, back off and run
    it again (`on_restart` first: what the failed run may have missed is looked at again)."""
    failures = 0
    while not stop.is_set():
        began = time.monotonic()
        try:
            if failures and on_restart is not None:
                on_restart()
            body()
            return
        except Exception as exc:
            if time.monotonic() - began >= HEALTHY_RUN:
                failures = 0
            delay = min(cap, start * 2.0**failures)
            failures += 1
            n = _count(name)
            LOG.error(
                "thread %s failed (restart %d, in %.1fs): %s: %s",
                name,
                n,
                delay,
                type(exc).__name__,
                exc,
                exc_info=exc,
            )
            if stop.wait(delay):
                return


def spawn(
    name: str,
    body: Callable[[], None],
    stop: threading.Event,
    *,
    on_restart: Callable[[], None] | None = None,
    start: float = RESTART_START,
) -> threading.Thread:
    """`body` on a daemon thread named `name`, under `run_guarded`."""
    thread = threading.Thread(
        target=run_guarded,
        args=(name, body, stop),
        kwargs={"on_restart": on_restart, "start": start},
        name=name,
        daemon=True,
    )
    thread.start()
    return thread


def call_guarded(what: str, fn: Callable[[], None]) -> bool:
    """Call `fn` once; an exception is logged (with its traceback at debug level) and False."""
    try:
        fn()
    except Exception as exc:
        LOG.warning("%s failed: %s", what, exc)
        LOG.debug("%s failure details", what, exc_info=exc)
        return False
    return True


class SignalFlag:
    """SIGTERM and SIGINT as a byte in a pipe (the handler does nothing else); a guarded thread
    calls `on_signal` (which may lock, log, queue) in ordinary thread context."""

    def __init__(self, on_signal: Callable[[int], None]) -> None:
        self._on_signal = on_signal
        self._read, self._write = os.pipe()
        os.set_blocking(self._write, False)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._previous: dict[int, object] = {}
        # the last signal received (None: none), still known after `close`: a caller about to
        # start the process again (a simulated reboot) honours it instead
        self.received: int | None = None

    def install(self, signums: tuple[int, ...] = (signal.SIGTERM, signal.SIGINT)) -> None:
        """Install the handler (main thread only) and start the thread that acts on it."""
        self._thread = spawn("signals", self._wait, self._stop)
        for signum in signums:
            self._previous[signum] = signal.signal(signum, self._handler)

    def _handler(self, signum: int, _frame: FrameType | None) -> None:
        # signal context: one write(2), nothing that takes a lock (a full pipe, OSError, means
        # the thread has a byte to read already)
        with contextlib.suppress(OSError):
            os.write(self._write, bytes((signum & 0xFF,)))

    def _wait(self) -> None:
        while not self._stop.is_set():
            data = os.read(self._read, 64)
            signums = [b for b in data if b]  # 0: `close` waking this thread
            if signums:
                self.received = signums[-1]
            if not data or self._stop.is_set():
                return
            if signums:
                self._on_signal(signums[-1])

    def close(self) -> None:
        """Put the previous handlers back and stop the thread."""
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)  # type: ignore[arg-type]
        self._previous.clear()
        self._stop.set()
        with contextlib.suppress(OSError):
            os.write(self._write, b"\0")
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5)
        # a signal whose byte the thread had not read yet is not lost
        os.set_blocking(self._read, False)
        with contextlib.suppress(OSError):
            signums = [b for b in os.read(self._read, 64) if b]
            if signums:
                self.received = signums[-1]
