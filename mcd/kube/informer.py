"""A collection as an informer keeps it: listed once, then watched from the list's
resourceVersion (resumed from the last one seen when a stream ends, listed again on 410 Gone or
when the server cuts watches at once: `mcd.kube.watch.follow_events`), held in memory by name.

`changed(name, obj)` is told of every object the list found and of every event (obj None: it was
deleted, or a list no longer has it); it runs on the informer's thread, so it only queues work
(the pool controller adds a key to its `mcd.kube.workqueue.WorkQueue`). Reads (`items`, `get`)
take a copy of the store's view under a lock and never ask the API server.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any, Protocol

from mcd.kube.watch import follow_events
from mcd.runtime import guard

LOG = logging.getLogger(__name__)

Obj = dict[str, Any]
Changed = Callable[[str, Obj | None], None]

# a watch is ended by the server after this and resumed from its last resourceVersion (no list);
# client-go picks 5 to 10 minutes
WATCH_SECONDS = 300


class Lister(Protocol):
    def list_collection(self, resource: str, field_selector: str = "") -> tuple[list[Obj], str]: ...

    def watch(
        self,
        resource: str,
        resource_version: str,
        timeout_seconds: int,
        *,
        name: str = "",
        field_selector: str = "",
    ) -> Iterable[tuple[str, Obj, bytes | None]]: ...


def key_of(obj: Obj) -> str:
    """`namespace/name` for a namespaced object, `name` for a cluster-scoped one."""
    meta = obj.get("metadata") or {}
    ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    return f"{ns}/{name}" if ns else name


class Informer:
    """One collection (of `resource`, a key of `mcd.kube.resources.COLLECTIONS`, narrowed by
    `field_selector`), kept up to date by a thread of its own between `start` and `stop`."""

    def __init__(
        self,
        api: Lister,
        resource: str,
        *,
        field_selector: str = "",
        changed: Changed | None = None,
        absent: Callable[[], float] | None = None,
        watch_seconds: int = WATCH_SECONDS,
    ) -> None:  # the keyword arguments are each optional
        """`absent`: a collection the cluster may not serve (a 404): how long to wait before
        listing it again (it is then empty and synced); without it a 404 is retried as an error."""
        self.api, self.resource, self.field_selector = api, resource, field_selector
        self.changed = changed or (lambda _name, _obj: None)
        self.absent, self.watch_seconds = absent, watch_seconds
        self.synced = threading.Event()  # set once the first list is in
        self._lock = threading.Lock()
        self._store: dict[str, Obj] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def what(self) -> str:
        return f"{self.resource} {self.field_selector}".rstrip()

    def items(self) -> list[Obj]:
        with self._lock:
            return list(self._store.values())

    def get(self, key: str) -> Obj | None:
        with self._lock:
            return self._store.get(key)

    def start(self) -> None:
        if self._thread is not None:
            return
        # guarded (an error restarts it with backoff instead of ending the cache's updates for
        # good) and a daemon: a watch blocks in a read, and the process may end before the server
        # ends it
        self._thread = guard.spawn(self.what, partial(self.run, self._stop), self._stop)

    def stop(self, join: float = 0.0) -> None:
        """End the thread (at its watch's next event or end, `WATCH_SECONDS` at most)."""
        self._stop.set()
        if self._thread is not None and join > 0:
            self._thread.join(join)

    def list_now(self) -> None:
        """One list into the store, without a watch (a pass of `--once`)."""
        items, _rv = self.api.list_collection(self.resource, self.field_selector)
        self._replace(items)

    def run(self, stop: threading.Event) -> None:
        absent = self._absent if self.absent is not None else None
        follow_events(
            self.what, self._list, self._watch, self._event, stop, listed=self._listed, absent=absent
        )

    # -- the loop's callbacks

    def _list(self) -> tuple[Obj | None, str]:
        items, rv = self.api.list_collection(self.resource, self.field_selector)
        return {"items": items}, rv  # one object for follow_events: the whole list

    def _listed(self, listing: Obj | None) -> None:
        self._replace(list((listing or {}).get("items") or []))

    def _watch(self, rv: str) -> Iterable[tuple[str, Obj, bytes | None]]:
        return self.api.watch(self.resource, rv, self.watch_seconds, field_selector=self.field_selector)

    def _event(self, etype: str, obj: Obj, _text: bytes | None) -> None:
        key = key_of(obj)
        with self._lock:
            if etype == "DELETED":
                self._store.pop(key, None)
            else:
                self._store[key] = obj
        self.changed(key, None if etype == "DELETED" else obj)

    def _absent(self) -> float:
        self._replace([])  # not served: nothing of it exists
        assert self.absent is not None
        return self.absent()

    def _replace(self, items: list[Obj]) -> None:
        fresh = {key_of(o): o for o in items}
        with self._lock:
            gone = [k for k in self._store if k not in fresh]
            self._store = fresh
        self.synced.set()
        for key in gone:
            self.changed(key, None)
        for key, obj in fresh.items():
            self.changed(key, obj)
