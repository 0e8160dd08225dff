"""What `/healthz`, `/readyz` and the systemd watchdog report.

Liveness (`/healthz`, the watchdog) fails only when the agent itself is stuck: its loop no
longer wakes, or it has been in one sync longer than it may be (`SyncClock`: the longest
command timeout, plus a drain's own timeout while draining). A restart cures that. An API
server that is away (or a revoked token) is not cured by restarting every agent at once: it
is readiness (`/readyz`, `api_unreached`), from `mcd.kube.reach.ApiReach`, fed by the API
client with every answer. `mcd.agent.loop` combines them into the rules.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol


class Reach(Protocol):
    url: str

    def unreached_for(self) -> float: ...


def api_unreached(reach: Reach, limit: float) -> str:
    """Why the agent is not ready on the API's side ("" when the API server answered within
    `limit` seconds; a 401 is no answer, so a revoked token counts)."""
    unreached = reach.unreached_for()
    if unreached >= limit:
        return f"the API server at {reach.url} has not answered for {unreached:.0f}s"
    return ""


class SyncClock:
    """How long the loop has been in the sync it is in, against what it may take."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._deadline: float | None = None

    def begin(self, limit: float) -> None:
        with self._lock:
            self._deadline = self._clock() + limit

    def extend(self, seconds: float) -> None:
        """A wait the sync may legitimately make (a drain's timeout) moves the deadline on."""
        with self._lock:
            if self._deadline is not None:
                self._deadline = max(self._deadline, self._clock()) + seconds

    def end(self) -> None:
        with self._lock:
            self._deadline = None

    def overdue(self) -> float:
        """Seconds the sync in progress is past its deadline (0 when none is, or none runs)."""
        with self._lock:
            if self._deadline is None:
                return 0.0
            return max(0.0, self._clock() - self._deadline)
