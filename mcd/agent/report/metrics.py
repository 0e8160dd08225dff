"""Prometheus metrics with upstream's names, on a private registry, and the /healthz endpoint.

Upstream serves `/metrics` on `--metrics-url` (127.0.0.1:8797) and has no health endpoint;
mcd adds `/healthz` (liveness: 200 unless the agent itself is stuck, `Daemon.unhealthy`) and
`/readyz` (besides, the API server answers, `Daemon.unready`) for probes, upstream's `process_*`
metrics and metrics of its own: `mcd_update_phase_seconds`, `mcd_reboots_avoided_total` and
`mcd_thread_restarts_total{thread}` (`mcd.runtime.guard`). The scrape endpoint for Prometheus,
TLS with authentication and authorization, is `mcd.agent.report.scrape`. Each server's thread
runs under the guard: a port that cannot be bound is tried again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from http.server import ThreadingHTTPServer

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from mcd.agent.report.scrape import SecureMetricsServer
from mcd.runtime import guard, httpserve

LOG = logging.getLogger(__name__)


class _ThreadRestarts(Collector):
    """`mcd_thread_restarts_total{thread}` from the guard's counts (one per process)."""

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "mcd_thread_restarts", "restarts of a failed agent thread by the guard", labels=["thread"]
        )
        for name, count in sorted(guard.restart_counts().items()):
            family.add_metric([name], count)
        yield family


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
        self.pivot_errors = Gauge(
            "mcd_pivot_errors_total", "Total number of errors encountered during pivot.", registry=r
        )
        self.state = Gauge("mcd_state", "state of daemon on specified node", ["state", "reason"], registry=r)
        self.kubelet_state = Gauge("mcd_kubelet_state", "state of kubelet health monitor", registry=r)
        self.reboots_failed = Counter(
            "mcd_reboots_failed", "Total number of reboots that failed.", registry=r
        )
        self.update_state = Gauge(
            "mcd_update_state", "completed update config or error", ["config", "err"], registry=r
        )
        self.config_drift = Gauge("mcd_config_drift", "timestamp for config drift", registry=r)
        self.unsupported_packages = Gauge(
            "mcd_local_unsupported_packages",
            "Total number of locally layered unsupported packages installed on the node",
            ["node"],
            registry=r,
        )
        self.phase_seconds = Histogram(
            "mcd_update_phase_seconds",
            "seconds spent in each phase of an update",
            ["phase"],
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900),
            registry=r,
        )
        # upstream's daemon had it while it drained (until 4.12): 1 while its drain has failed
        self.drain_err = Gauge("mcd_drain_err", "errors encountered while draining the node", registry=r)
        self.reboots_avoided = Counter(
            "mcd_reboots_avoided", "updates applied without a reboot (rebootless actions)", registry=r
        )
        r.register(_ThreadRestarts())
        # process_cpu_seconds_total, process_resident_memory_bytes, process_open_fds …, as every
        # Go component upstream exports them (Linux /proc; nothing on other systems)
        ProcessCollector(registry=r)

    def set_state(self, state: str, reason: str) -> None:
        # upstream resets the gauge so only the latest state is one series
        self.state.clear()
        self.state.labels(state=state, reason=reason).set(time.time())
        # a drain given up (mcd.agent.drain) is the Degraded reason; any later state ends it
        self.drain_err.set(1 if state == "Degraded" and "failed to drain node" in reason else 0)

    def set_update(self, config: str, err: str = "") -> None:
        """Upstream's mcd_update_state: one series, `config` from `update_label` when the node
        is Done in it, or "" with `err` when finishing the update failed."""
        self.update_state.clear()
        self.update_state.labels(config=config, err=err).set(time.time())

    def set_host_os(self, os_name: str, version: str) -> None:
        self.host_os.clear()
        self.host_os.labels(os=os_name, version=version).set(1)

    def render(self) -> bytes:
        return generate_latest(self.registry)


def update_label(config: str, image: str) -> str:
    """The `config` label upstream gives mcd_update_state (its getCurrentName). Pure."""
    if not image:
        return f"MachineConfig: {config}"
    return f"MachineConfig: {config} / Image: {image}"


def host_os(os_release: str) -> tuple[str, str]:
    """The labels upstream gives `mcd_host_os_and_version`: the os-release ID upper-cased (as
    upstream has always fed it to Prometheus: RHCOS, FEDORA, SCOS) and the OS version, which is
    RHEL_VERSION when the file has it, else VERSION with the OpenShift release prefix cut
    ("418.94.202501…" on 4.18 gives "94.202501…"), else VERSION_ID; ("unsupported", "") when the
    text names no ID. Pure."""
    fields: dict[str, str] = {}
    for line in os_release.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            fields[key.strip()] = value.strip().strip('"').strip("'")
    os_id = fields.get("ID", "")
    if not os_id:
        return "unsupported", ""
    if "RHEL_VERSION" in fields:
        return os_id.upper(), fields["RHEL_VERSION"]
    openshift = fields.get("OPENSHIFT_VERSION")
    if openshift is not None:
        prefix = openshift.replace(".", "") + "."
        version = fields.get("VERSION", "")
        if version.startswith(prefix):
            return os_id.upper(), version.replace(prefix, "")
    return os_id.upper(), fields.get("VERSION_ID", "")


class _Listener:
    """One bound server and its guarded thread; a port that cannot be bound is tried again."""

    def __init__(self, name: str, bind: Callable[[], ThreadingHTTPServer]) -> None:
        self.name, self._bind = name, bind
        self.server: ThreadingHTTPServer | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._serving = False

    def start(self) -> None:
        try:
            self.server = self._bind()
        except OSError as exc:
            LOG.error("cannot listen for %s (retrying): %s", self.name, exc)
        guard.spawn(self.name, self._serve, self._stop)

    def _serve(self) -> None:
        with self._lock:
            if self._stop.is_set():
                return
            if self.server is None:
                self.server = self._bind()
            server = self.server
            self._serving = True
        server.serve_forever(poll_interval=0.5)

    def stop(self) -> None:
        with self._lock:
            self._stop.set()
            serving, server = self._serving, self.server
        if server is not None:
            if serving:
                server.shutdown()
            server.server_close()


class MetricsServer:
    """HTTP on `host:port` (127.0.0.1:8797 by default): /metrics, /healthz (liveness: the agent
    is not stuck) and /readyz (besides, the API server answers); with `secure`, the scrape
    endpoint over TLS too (`mcd.agent.report.scrape`)."""

    def __init__(
        self,
        metrics: Metrics,
        address: str,
        healthy: Callable[[], bool],
        ready: Callable[[], bool] | None = None,
        secure: SecureMetricsServer | None = None,
    ) -> None:
        host, _, port = address.rpartition(":")
        self.address = (host or "127.0.0.1", int(port))
        self.metrics = metrics
        self.healthy = healthy
        self.ready = ready or healthy
        self._plain = _Listener("metrics", self._bind)
        self._secure = None if secure is None else _Listener("metrics-tls", secure.bind)

    @property
    def port(self) -> int:
        """The bound port (0 while not bound)."""
        server = self._plain.server
        return int(server.server_address[1]) if server is not None else 0

    @property
    def secure_port(self) -> int:
        server = self._secure.server if self._secure is not None else None
        return int(server.server_address[1]) if server is not None else 0

    def _bind(self) -> ThreadingHTTPServer:
        handler = httpserve.handler(lambda request: _answer(self, request), LOG, "metrics")
        server = ThreadingHTTPServer(self.address, handler)
        server.daemon_threads = True
        LOG.info("metrics listening on %s:%d", server.server_address[0], server.server_address[1])
        return server

    def start(self) -> None:
        """Bind now when possible (a failure is logged and retried by the server's thread)."""
        self._plain.start()
        if self._secure is not None:
            self._secure.start()

    def stop(self) -> None:
        self._plain.stop()
        if self._secure is not None:
            self._secure.stop()


def _answer(server: MetricsServer, request: httpserve.Request) -> httpserve.Reply:
    if request.path == "/metrics":
        return httpserve.Reply(200, server.metrics.render(), CONTENT_TYPE_LATEST)
    if request.path in ("/healthz", "/livez"):
        ok = server.healthy()
        return httpserve.Reply(200 if ok else 503, b"ok\n" if ok else b"unhealthy\n")
    if request.path == "/readyz":
        ok = server.ready()
        return httpserve.Reply(200 if ok else 503, b"ok\n" if ok else b"not ready\n")
    return httpserve.NOT_FOUND
