"""Events on the daemon's Node, with upstream's reasons (source `machineconfigdaemon`).

Events are best effort, as upstream's recorder: they are posted by a background thread so an
update never waits on them, and one that cannot be posted is logged and dropped. Every Event
is also a log line, so a node without API access still tells what happened.

Repeats are aggregated as client-go's recorder does (`tools/record/events_cache.go`): an Event
equal to an earlier one (same source, object, type, reason and message) is not created again;
the earlier one's `count` goes up and its `lastTimestamp` moves, by a PATCH. And when more than
ten different messages of one reason come within ten minutes, the further ones become one
Event "(combined from similar events): <latest message>", counted the same way.
"""

from __future__ import annotations

import datetime
import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from mcd.kube.errors import ApiError, NotFoundError
from mcd.runtime import guard

LOG = logging.getLogger(__name__)

COMPONENT = "machineconfigdaemon"
NAMESPACE = "openshift-machine-config-operator"
QUEUE_SIZE = 100

NORMAL, WARNING = "Normal", "Warning"

# client-go's correlator: its LRU caches' size, and the aggregation of similar messages
CACHE_ENTRIES = 4096
AGGREGATE_MAX_EVENTS = 10
AGGREGATE_INTERVAL = 600.0
COMBINED_PREFIX = "(combined from similar events): "


class EventApi(Protocol):
    def create_event(self, namespace: str, event: Mapping[str, Any]) -> object: ...

    def patch_event(self, namespace: str, name: str, patch: Mapping[str, Any]) -> object: ...


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def build_event(
    node: str, uid: str, etype: str, reason: str, message: str, *, recorder: bool = True
) -> dict[str, Any]:
    """The core/v1 Event upstream posts for the node.

    `recorder`: as its recorder does. Upstream's node reference has only kind, name and uid
    (no apiVersion), and its recorder wrapper gives a cluster-scoped object the MCO's namespace
    (`NamespacedEventRecorder`), which client-go then uses for the Event itself; client-go adds
    the reporting controller and instance. Otherwise as the one Event upstream creates itself
    (`OSUpdateStaged`): the bare reference, in `default`, no reporting fields.
    """
    stamp = _now()
    involved = {"kind": "Node", "name": node, "uid": uid}
    if recorder:
        involved["namespace"] = NAMESPACE
    event: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Event",
        # upstream names events <object>.<unix nanoseconds in hex>
        "metadata": {"name": f"{node}.{time.time_ns():x}", "namespace": NAMESPACE if recorder else "default"},
        "involvedObject": involved,
        "reason": reason,
        "message": message,
        "type": etype,
        "source": {"component": COMPONENT, "host": node},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }
    if recorder:
        event["reportingComponent"] = COMPONENT
        event["reportingInstance"] = node
    return event


@dataclass
class _Seen:
    """client-go's eventLog: the Event a key was last posted as."""

    count: int
    first: str
    name: str


@dataclass
class _Similar:
    """client-go's aggregateRecord: the messages seen for one reason, and when last."""

    messages: set[str] = field(default_factory=set)
    last: float = 0.0


class Correlator:
    """client-go's EventCorrelator without the spam filter: turns an Event into the request
    that records it (a create, or a patch of the Event it repeats). Not thread-safe: one
    poster thread uses it."""

    def __init__(self, clock: Any = time.monotonic) -> None:
        self._clock = clock
        self._seen: OrderedDict[tuple[str, ...], _Seen] = OrderedDict()
        self._similar: OrderedDict[tuple[str, ...], _Similar] = OrderedDict()

    @staticmethod
    def _lru(cache: OrderedDict[tuple[str, ...], Any], key: tuple[str, ...], value: Any) -> None:
        cache[key] = value
        cache.move_to_end(key)
        while len(cache) > CACHE_ENTRIES:
            cache.popitem(last=False)

    def forget(self, name: str) -> None:
        """The Event `name` was not made: its next repeat is created, not patched (client-go
        patches, meets 404 and creates; this saves that refused request)."""
        for key in [k for k, seen in self._seen.items() if seen.name == name]:
            del self._seen[key]

    def correlate(self, event: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """(the Event as it now stands, the merge patch to send) — no patch: create it."""
        obj, src = event["involvedObject"], event["source"]
        similar = (
            src["component"],
            src.get("host", ""),
            obj["kind"],
            event["metadata"]["namespace"],
            obj["name"],
            obj.get("uid", ""),
            obj.get("apiVersion", ""),
            event["type"],
            event["reason"],
            event.get("reportingComponent", ""),
            event.get("reportingInstance", ""),
        )
        now = self._clock()
        record = self._similar.get(similar)
        if record is None or now - record.last > AGGREGATE_INTERVAL:
            record = _Similar()
        record.messages.add(event["message"])
        record.last = now
        self._lru(self._similar, similar, record)
        key: tuple[str, ...]
        if len(record.messages) < AGGREGATE_MAX_EVENTS:
            key = (*similar, event["message"])
        else:
            record.messages.pop()  # the set grows no further
            event = dict(event, message=COMBINED_PREFIX + event["message"])
            key = similar
        seen = self._seen.get(key)
        if seen is None:
            self._lru(self._seen, key, _Seen(1, event["firstTimestamp"], event["metadata"]["name"]))
            return event, None
        seen.count += 1
        self._seen.move_to_end(key)
        event = dict(
            event,
            count=seen.count,
            firstTimestamp=seen.first,
            metadata=dict(event["metadata"], name=seen.name),
        )
        patch = {"count": seen.count, "lastTimestamp": event["lastTimestamp"], "message": event["message"]}
        return event, patch


class EventRecorder:
    """Posts node Events from a queue; `record()` never blocks and never raises."""

    def __init__(self, api: EventApi | None, node: str) -> None:
        self.api = api
        self.node = node
        self.uid = ""
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue(QUEUE_SIZE)
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()
        self._correlator = Correlator()

    def start(self) -> None:
        if self.api is not None and self._thread is None:
            self._stopped.clear()
            self._thread = guard.spawn("events", self._run, self._stopped)

    def stop(self, timeout: float = 5.0) -> None:
        """Post what is queued (up to `timeout` seconds), then stop the thread."""
        if self._thread is None:
            return
        self._stopped.set()
        self._queue.put(None)
        self._thread.join(timeout)
        self._thread = None

    def normal(self, reason: str, message: str) -> None:
        self.record(NORMAL, reason, message)

    def warning(self, reason: str, message: str) -> None:
        self.record(WARNING, reason, message)

    def record(self, etype: str, reason: str, message: str) -> None:
        log = LOG.warning if etype == WARNING else LOG.info
        log("event %s on node %s: %s", reason, self.node, message)
        if self.api is None:
            return
        try:
            self._queue.put_nowait(build_event(self.node, self.uid, etype, reason, message))
        except queue.Full:
            LOG.warning("event queue full: dropped event %s", reason)

    def post_now(self, reason: str, message: str) -> None:
        """A Normal event posted at once, in `default`, outside the queue: upstream creates
        `OSUpdateStaged` itself rather than through its recorder. A failure is logged, never
        raised."""
        LOG.info("event %s on node %s: %s", reason, self.node, message)
        if self.api is None:
            return
        try:
            event = build_event(self.node, self.uid, NORMAL, reason, message, recorder=False)
            self.api.create_event("default", event)
        except ApiError as exc:
            LOG.warning("failed to post event %s: %s", reason, exc)

    def _run(self) -> None:
        while True:
            event = self._queue.get()
            if event is None:
                return
            self._post(event)

    def _post(self, event: dict[str, Any]) -> None:
        """client-go's recordToSink: a repeat patches its Event (created again if it is gone)."""
        assert self.api is not None
        event, patch = self._correlator.correlate(event)
        try:
            if patch is not None:
                try:
                    self.api.patch_event(NAMESPACE, event["metadata"]["name"], patch)
                    return
                except NotFoundError:
                    pass
            # (a repeat whose Event is gone is created again, with its count, as client-go does)
            self.api.create_event(NAMESPACE, event)
        except ApiError as exc:
            if patch is None:
                self._correlator.forget(event["metadata"]["name"])
            LOG.warning("failed to post event %s: %s", event["reason"], exc)


class SigtermProtection:
    """Upstream's SIGTERM protection: on for the whole of an update, from just after Working is
    written to its end (Done, the error, or just before the reboot), each change posted as an
    Event. While it is on, a SIGTERM is not obeyed at once (`GotSigtermDuringUpdate`).
    Thread-safe: the signal thread reads it while the loop changes it."""

    def __init__(self, events: EventRecorder) -> None:
        self._events = events
        self._lock = threading.Lock()
        self._on = False

    @property
    def on(self) -> bool:
        with self._lock:
            return self._on

    def add(self) -> None:
        with self._lock:
            if self._on:
                return
            self._on = True
            self._events.normal("AddSigtermProtection", "Adding SIGTERM protection")

    def remove(self) -> None:
        with self._lock:
            if not self._on:
                return
            self._on = False
            self._events.normal("RemoveSigtermProtection", "Removing SIGTERM protection")

    def __enter__(self) -> None:
        self.add()

    def __exit__(self, *_exc: object) -> None:
        self.remove()
