"""Events on the daemon's Node, with upstream's reasons (source `machineconfigdaemon`).

Events are best effort, as upstream's recorder: they are posted by a background thread so an
update never waits on them, and one that cannot be posted is logged and dropped. Every Event
is also a log line, so a node without API access still tells what happened.
"""

from __future__ import annotations

import datetime
import logging
import queue
import threading
import time
from collections.abc import Mapping
from typing import Any, Protocol

from mcd.agent import guard
from mcd.agent.errors import ApiError

LOG = logging.getLogger(__name__)

COMPONENT = "machineconfigdaemon"
NAMESPACE = "openshift-machine-config-operator"
QUEUE_SIZE = 100

NORMAL, WARNING = "Normal", "Warning"


class EventApi(Protocol):
    def create_event(self, namespace: str, event: Mapping[str, Any]) -> None: ...


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def build_event(
    node: str, uid: str, etype: str, reason: str, message: str, *, namespace: str = NAMESPACE
) -> dict[str, Any]:
    """The core/v1 Event upstream's recorder posts for the node."""
    stamp = _now()
    return {
        "apiVersion": "v1",
        "kind": "Event",
        # upstream's recorder names events <object>.<unix nanoseconds in hex>
        "metadata": {"name": f"{node}.{time.time_ns():x}", "namespace": namespace},
        "involvedObject": {"kind": "Node", "name": node, "uid": uid, "apiVersion": "v1"},
        "reason": reason,
        "message": message,
        "type": etype,
        "source": {"component": COMPONENT, "host": node},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
        "reportingComponent": COMPONENT,
        "reportingInstance": node,
    }


class EventRecorder:
    """Posts node Events from a queue; `record()` never blocks and never raises."""

    def __init__(self, api: EventApi | None, node: str) -> None:
        self.api = api
        self.node = node
        self.uid = ""
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue(QUEUE_SIZE)
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()

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

    def post_now(self, reason: str, message: str, namespace: str) -> None:
        """A Normal event posted at once, in `namespace`, outside the queue: upstream creates
        `OSUpdateStaged` itself, in `default`, rather than through its recorder. A failure is
        logged, never raised."""
        LOG.info("event %s on node %s: %s", reason, self.node, message)
        if self.api is None:
            return
        try:
            event = build_event(self.node, self.uid, NORMAL, reason, message, namespace=namespace)
            self.api.create_event(namespace, event)
        except ApiError as exc:
            LOG.warning("failed to post event %s: %s", reason, exc)

    def _run(self) -> None:
        assert self.api is not None
        while True:
            event = self._queue.get()
            if event is None:
                return
            try:
                self.api.create_event(NAMESPACE, event)
            except ApiError as exc:
                LOG.warning("failed to post event %s: %s", event["reason"], exc)
