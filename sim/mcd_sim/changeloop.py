"""A reconciler's thread, as the in-process stand-ins run theirs: one pass, then wait for any
change of the store (or until the pass asks to run again), one pass for a burst of changes."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

from mcd_sim.apiserver.store import Store, Watcher


class ChangeLoop:
    """Runs `step` on a thread of its own after every change of `store`, and at the latest
    `wait()` seconds after the last pass (its own writes wake it too: a pass that changes
    nothing ends the chain)."""

    def __init__(self, store: Store, step: Callable[[], None], wait: Callable[[], float], name: str) -> None:
        self.store, self.step, self.wait, self.name = store, step, wait, name
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._watcher: Watcher | None = None

    def start(self) -> None:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        watcher = self._watcher
        if watcher is not None:
            watcher.events.put(None)  # wake the thread now rather than after its wait
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        watcher, _ = self.store.watch_all()
        self._watcher = watcher
        try:
            while not self._stop.is_set():
                self.step()
                try:
                    change = watcher.events.get(timeout=self.wait())
                    while change is not None:  # one pass for a burst of changes
                        change = watcher.events.get_nowait()
                except queue.Empty:
                    continue
                # None: the store ended every watch (restart, fault injection) or `stop`: watch again
                self.store.unwatch(watcher)
                watcher, _ = self.store.watch_all()
                self._watcher = watcher
        finally:
            self._watcher = None
            self.store.unwatch(watcher)
