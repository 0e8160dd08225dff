"""A work queue with client-go's rate-limited queue semantics (the agent's and the pool controller's).

Level-triggered, as upstream's informer handlers: a key only says what to look at again (`node`,
`drift`, `login`, `config`, …). `add` queues a key at once (a key already queued is merged, so
a burst of changes runs its handler once); `add_after` queues it after a delay (the earliest of
several delays wins); `add_rate_limited` queues it after its own exponential backoff (upstream's
node queue: 1 s doubling to 60 s, `mcd.kube.backoff`) and no sooner than an overall token bucket
allows (client-go's default: 10 per second, bursts of 100), so no handler can spin however
often it fails; `forget` resets a key's backoff once its handler succeeded. One consumer takes
one key at a time (`get`) and says when its handler is over (`done`): a key added while its
handler runs is queued again only then, so no key is handled twice at once.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable

from mcd.kube.backoff import BACKOFF_MAX, BACKOFF_START, Backoff

# client-go's DefaultControllerRateLimiter bucket: 10 retries a second overall, bursts of 100
BUCKET_QPS = 10.0
BUCKET_BURST = 100


class TokenBucket:
    """A token bucket as golang.org/x/time/rate's `Reserve().Delay()`: how long a retry waits."""

    def __init__(self, qps: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.qps, self.burst, self.clock = qps, burst, clock
        self._tokens = float(burst)
        self._at = clock()

    def reserve(self) -> float:
        """Take one token; the seconds until it is there (0 when the bucket had one)."""
        now = self.clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.qps)
        self._at = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps


class RateLimiter:
    """client-go's MaxOf(per-item exponential, overall bucket)."""

    def __init__(
        self,
        start: float = BACKOFF_START,
        cap: float = BACKOFF_MAX,
        qps: float = BUCKET_QPS,
        burst: int = BUCKET_BURST,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.start, self.cap = start, cap
        self._per_key: dict[str, Backoff] = {}
        self._bucket = TokenBucket(qps, burst, clock)

    def when(self, key: str, retry_after: float | None = None) -> float:
        """The delay before `key`'s next try (its backoff grows by one failure)."""
        backoff = self._per_key.setdefault(key, Backoff(self.start, self.cap))
        return max(backoff.next_delay(retry_after), self._bucket.reserve())

    def forget(self, key: str) -> None:
        self._per_key.pop(key, None)

    def failures(self, key: str) -> int:
        backoff = self._per_key.get(key)
        return backoff.failures if backoff is not None else 0


class WorkQueue:
    """A rate-limited, delaying, de-duplicating queue of keys (any thread adds, one thread gets)."""

    def __init__(
        self,
        limiter: RateLimiter | None = None,
        clock: Callable[[], float] = time.monotonic,
        *,
        prefer: Callable[[str], bool] | None = None,
    ) -> None:
        """`prefer`: the keys taken ahead of the queue's order, every other time (a key the queue
        holds back would not wait behind a burst of others, and the others still get one turn in
        two: a preferred key added again while it runs does not starve them)."""
        self.clock = clock
        self.limiter = limiter or RateLimiter(clock=clock)
        self._prefer = prefer
        self._preferred_last = False
        self._cond = threading.Condition()
        self._queue: list[str] = []  # ready, in order; each key at most once
        self._dirty: set[str] = set()  # queued, or added again while its handler runs
        self._processing: set[str] = set()
        self._waiting: list[tuple[float, int, str]] = []  # (due, seq, key): a heap
        self._due: dict[str, float] = {}  # key -> the earliest due time in `_waiting`
        self._seq = itertools.count()
        self._shut = False

    # -- producers

    def add(self, key: str) -> None:
        """Queue `key` now (merged with a queued one)."""
        with self._cond:
            self._add(key)

    def _add(self, key: str) -> None:
        if self._shut or key in self._dirty:
            return
        self._dirty.add(key)
        if key not in self._processing:
            self._queue.append(key)
            self._cond.notify()

    def add_after(self, key: str, delay: float) -> None:
        """Queue `key` in `delay` seconds; an earlier pending time for it is kept."""
        if delay <= 0:
            self.add(key)
            return
        with self._cond:
            if self._shut:
                return
            due = self.clock() + delay
            if key in self._due and self._due[key] <= due:
                return
            self._due[key] = due
            heapq.heappush(self._waiting, (due, next(self._seq), key))
            self._cond.notify()

    def add_rate_limited(self, key: str, retry_after: float | None = None) -> float:
        """Queue `key` after its backoff (and the bucket's); the delay."""
        with self._cond:
            delay = self.limiter.when(key, retry_after)
        self.add_after(key, delay)
        return delay

    def forget(self, key: str) -> None:
        """`key`'s handler succeeded: its next failure starts the backoff again."""
        with self._cond:
            self.limiter.forget(key)

    def failures(self, key: str) -> int:
        with self._cond:
            return self.limiter.failures(key)

    def shut_down(self) -> None:
        """No more keys; a waiting `get` returns None."""
        with self._cond:
            self._shut = True
            self._cond.notify_all()

    # -- the consumer

    def get(self, timeout: float | None = None) -> str | None:
        """The next ready key (its handler then runs until `done`); None after `timeout` seconds
        (None: no limit) or once shut down."""
        deadline = None if timeout is None else self.clock() + timeout
        with self._cond:
            while True:
                if self._shut:
                    return None
                self._promote()
                if self._queue:
                    key = self._queue.pop(self._next_index())
                    self._processing.add(key)
                    self._dirty.discard(key)
                    return key
                now = self.clock()
                wait = None if deadline is None else deadline - now
                if wait is not None and wait <= 0:
                    return None
                if self._waiting:
                    until_due = max(0.0, self._waiting[0][0] - now)
                    wait = until_due if wait is None else min(wait, until_due)
                self._cond.wait(wait)

    def _next_index(self) -> int:
        """Where the next key is in the ready queue: its head, or the first preferred key when
        the key taken before was not a preferred one."""
        prefer = self._prefer
        if prefer is None:
            return 0
        index = 0
        if not self._preferred_last:
            index = next((i for i, k in enumerate(self._queue) if prefer(k)), 0)
        self._preferred_last = prefer(self._queue[index])
        return index

    def done(self, key: str) -> None:
        """`key`'s handler is over; queued again when it was added meanwhile."""
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty:
                self._queue.append(key)
                self._cond.notify()

    def pending(self, key: str) -> float | None:
        """Seconds until `key` is ready (0: queued now; None: neither queued nor waiting)."""
        with self._cond:
            if key in self._dirty:
                return 0.0
            due = self._due.get(key)
            return None if due is None else max(0.0, due - self.clock())

    def _promote(self) -> None:
        now = self.clock()
        while self._waiting and self._waiting[0][0] <= now:
            due, _, key = heapq.heappop(self._waiting)
            if self._due.get(key) == due:
                del self._due[key]
                self._add(key)
