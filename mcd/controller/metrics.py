"""The pool controller's metrics, with upstream's names, on a registry of its own.

`mcc_drain_err{node}` is 1 while a node's drain has failed for longer than the drain timeout
(upstream's drain controller sets it then, and its `MCCDrainError` alert fires on it), and the
series is removed once the drain completes or the node's request changes.
"""

from __future__ import annotations

import logging
import threading
from http.server import ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Gauge, generate_latest

from mcd.runtime import guard, httpserve

LOG = logging.getLogger(__name__)


class ControllerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.drain_err = Gauge("mcc_drain_err", "errors from failed drain", ["node"], registry=self.registry)
        self._failing: set[str] = set()

    def drain_failed(self, node: str) -> None:
        self.drain_err.labels(node).set(1)
        self._failing.add(node)

    def drain_cleared(self, node: str) -> None:
        if node in self._failing:
            self._failing.discard(node)
            self.drain_err.remove(node)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class MetricsEndpoint:
    """`/metrics` over HTTP on `host:port` (the request handler is the agent's too, from
    `mcd.runtime.httpserve`). A port that cannot be bound is logged and the controller goes on."""

    def __init__(self, metrics: ControllerMetrics, address: str) -> None:
        host, _, port = address.rpartition(":")
        self.metrics = metrics
        self._stop = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        handler = httpserve.handler(self._answer, LOG, "metrics")
        try:
            self._server = ThreadingHTTPServer((host or "127.0.0.1", int(port)), handler)
        except (OSError, ValueError) as exc:
            LOG.error("cannot serve metrics on %s: %s", address, exc)
            return
        self._server.daemon_threads = True
        LOG.info("metrics on %s:%d", *self._server.server_address[:2])
        server = self._server
        guard.spawn("metrics", lambda: server.serve_forever(poll_interval=0.5), self._stop)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1]) if self._server is not None else 0

    def close(self) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def _answer(self, request: httpserve.Request) -> httpserve.Reply:
        if request.path != "/metrics":
            return httpserve.NOT_FOUND
        return httpserve.Reply(200, self.metrics.render(), CONTENT_TYPE_LATEST)
