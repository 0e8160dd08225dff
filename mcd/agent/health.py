"""What `/healthz` and the systemd watchdog report.

An agent can be alive and useless: its token revoked, its API server gone, or its loop stuck
in a command that never ends. The API's side is `mcd.kube.reach.ApiReach`, fed by the API
client with every answer. `SyncClock` says whether the loop
has been in one sync longer than it may be (the longest command timeout, plus a drain's own
timeout while draining). `mcd.agent.loop` combines both into the health rule.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


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
