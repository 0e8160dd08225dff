"""Upstream's per-item rate limiter, for retries of API requests and watches."""

from __future__ import annotations

# upstream's workqueue: exponential per-item backoff from 1 s to 60 s
BACKOFF_START = 1.0
BACKOFF_MAX = 60.0
# 2**62 seconds is past any cap: the exponent stops growing there, so no count of failures
# overflows the float (2.0**1024 does)
_MAX_EXPONENT = 62


class Backoff:
    """Upstream's per-item rate limiter: 1 s, 2 s, 4 s … capped at 60 s, reset on success."""

    def __init__(self, start: float = BACKOFF_START, cap: float = BACKOFF_MAX) -> None:
        self.start, self.cap = start, cap
        self.failures = 0

    def next_delay(self, retry_after: float | None = None) -> float:
        delay: float = min(self.cap, self.start * (2.0 ** min(self.failures, _MAX_EXPONENT)))
        self.failures += 1
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.cap))
        return delay

    def reset(self) -> None:
        self.failures = 0
