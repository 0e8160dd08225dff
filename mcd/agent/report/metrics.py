"""Prometheus metrics with upstream's names, on a private registry, and the /healthz endpoint.

Upstream serves `/metrics` on `--metrics-url` (127.0.0.1:8797) and has no health endpoint;
mcd adds `/healthz` (200 while the daemon loop is alive) for systemd and liveness probes, and
two metrics of its own: `mcd_update_phase_seconds` and `mcd_reboots_avoided_total`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)

LOG = logging.getLogger(__name__)


class Metrics:
    """The daemon's metrics; one instance per process, never the global registry."""

    def __init__(self) -> None:
        # upstream exports no `_created` series; without this every counter would add one
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.host_os = Gauge(
            "mcd_host_os_and_version",
            "os that MCD is running on and version if RHCOS",
            ["os", "version"],
            registry=r,
        )
        # upstream declares it a gauge, reset to 0 after a successful OS update
        self.pivot_errors = Gauge("mcd_pivot_errors_total", "errors encountered during pivot", registry=r)
        self.state = Gauge("mcd_state", "state of daemon on specified node", ["state", "reason"], registry=r)
        self.kubelet_state = Gauge("mcd_kubelet_state", "state of kubelet health monitor", registry=r)
        self.reboots_failed = Counter("mcd_reboots_failed", "reboot failed", registry=r)
        self.update_state = Gauge(
            "mcd_update_state", "completed update config or error", ["config", "err"], registry=r
        )
        self.config_drift = Gauge("mcd_config_drift", "timestamp of the last config drift", registry=r)
        self.phase_seconds = Histogram(
            "mcd_update_phase_seconds",
            "seconds spent in each phase of an update",
            ["phase"],
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900),
            registry=r,
        )
        self.reboots_avoided = Counter(
            "mcd_reboots_avoided", "updates applied without a reboot (rebootless actions)", registry=r
        )

    def set_state(self, state: str, reason: str) -> None:
        # upstream resets the gauge so only the latest state is one series
        self.state.clear()
        self.state.labels(state=state, reason=reason).set(time.time())

    def set_update(self, config: str, err: str = "") -> None:
        self.update_state.clear()
        self.update_state.labels(config=config, err=err).set(time.time())

    def set_host_os(self, os_name: str, version: str) -> None:
        self.host_os.clear()
        self.host_os.labels(os=os_name, version=version).set(1)

    def render(self) -> bytes:
        return generate_latest(self.registry)


def host_os(os_release: str) -> tuple[str, str]:
    """(ID, VERSION_ID) of an os-release text, ("unsupported", "") when it has no ID."""
    fields: dict[str, str] = {}
    for line in os_release.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            fields[key.strip()] = value.strip().strip('"')
    return (fields.get("ID") or "unsupported", fields.get("VERSION_ID", "") if fields.get("ID") else "")


class MetricsServer:
    """HTTP on `host:port`: /metrics (Prometheus text) and /healthz (the daemon loop's liveness)."""

    def __init__(self, metrics: Metrics, address: str, healthy: Callable[[], bool]) -> None:
        host, _, port = address.rpartition(":")
        self.metrics = metrics
        self.healthy = healthy
        handler = _handler(self)
        self._server = ThreadingHTTPServer((host or "127.0.0.1", int(port)), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="metrics", daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> None:
        self._thread.start()
        LOG.info("metrics listening on %s:%d", self._server.server_address[0], self.port)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _handler(server: MetricsServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._send(200, server.metrics.render(), CONTENT_TYPE_LATEST)
            elif path == "/healthz":
                ok = server.healthy()
                self._send(200 if ok else 503, b"ok\n" if ok else b"unhealthy\n", "text/plain")
            else:
                self._send(404, b"not found\n", "text/plain")

        def _send(self, code: int, body: bytes, ctype: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            LOG.debug("metrics: " + format, *args)

    return Handler
