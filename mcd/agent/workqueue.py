"""The agent's one work queue: watchers put a key, the loop takes every key queued at once.

Level-triggered, as upstream's informer handlers: a key only says what to look at again
(`node`, `drift`, `login`, `config`, `stop`); keys already queued are merged, so a burst of
changes wakes the loop once.
"""

from __future__ import annotations

import threading


class WorkQueue:
    def __init__(self) -> None:
        self._keys: set[str] = set()
        self._lock = threading.Lock()
        self._wake = threading.Event()

    def put(self, key: str) -> None:
        """Queue `key` (any thread) and wake the loop."""
        with self._lock:
            self._keys.add(key)
        self._wake.set()

    def wait(self, timeout: float | None) -> None:
        """Until a key is queued or `timeout` seconds passed (None: no limit)."""
        self._wake.wait(timeout)

    def take(self) -> set[str]:
        """Every key queued since the last take; a put from now on wakes the next wait."""
        self._wake.clear()
        with self._lock:
            keys, self._keys = self._keys, set()
        return keys
