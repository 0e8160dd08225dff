"""Metrics, /healthz, the kubelet health poll and sd_notify, without a cluster."""

from __future__ import annotations

import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from mcd.agent import sdnotify
from mcd.agent.kubelet import KubeletHealth
from mcd.agent.report.metrics import Metrics, MetricsServer, host_os

UPSTREAM_NAMES = (
    "mcd_host_os_and_version", "mcd_pivot_errors_total", "mcd_state", "mcd_kubelet_state",
    "mcd_reboots_failed_total", "mcd_update_state", "mcd_config_drift", "mcd_local_unsupported_packages",
    "mcd_update_phase_seconds", "mcd_reboots_avoided_total",
)  # fmt: skip


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_metrics_use_upstream_names_on_a_private_registry() -> None:
    m = Metrics()
    m.set_state("Degraded", "content mismatch")
    m.set_state("Done", "")
    m.reboots_failed.inc()
    m.reboots_avoided.inc()
    m.phase_seconds.labels(phase="apply").observe(0.2)
    text = m.render().decode()
    for name in UPSTREAM_NAMES:
        assert f"# TYPE {name.removesuffix('_total')}" in text or f"# TYPE {name}" in text, name
    # only the latest state is a series, as upstream resets the gauge
    assert 'mcd_state{reason="",state="Done"}' in text and "Degraded" not in text
    assert "mcd_reboots_failed_total 1.0" in text
    assert "_created" not in text
    from prometheus_client import REGISTRY

    assert REGISTRY.get_sample_value("mcd_reboots_failed_total") is None


def test_metrics_and_healthz_are_served() -> None:
    healthy = [True]
    server = MetricsServer(Metrics(), "127.0.0.1:0", lambda: healthy[0])
    server.start()
    try:
        base = f"http://127.0.0.1:{server.port}"
        code, body = _get(base + "/metrics")
        assert code == 200 and "mcd_kubelet_state" in body
        assert _get(base + "/healthz") == (200, "ok\n")
        healthy[0] = False
        assert _get(base + "/healthz")[0] == 503
        assert _get(base + "/nothing")[0] == 404
    finally:
        server.stop()


RHCOS_418 = (
    'NAME="Red Hat Enterprise Linux CoreOS"\nID="rhcos"\nVERSION="418.94.202501221327-0"\n'
    'VERSION_ID="4.18"\nOPENSHIFT_VERSION="4.18"\nRHEL_VERSION="9.4"\n'
)


@pytest.mark.parametrize(
    ("text", "labels"),
    [
        (RHCOS_418, ("RHCOS", "9.4")),
        (RHCOS_418.replace('RHEL_VERSION="9.4"\n', ""), ("RHCOS", "94.202501221327-0")),
        ('ID=fedora\nVARIANT_ID=coreos\nVERSION_ID=41\nVERSION="41.20250105.3.0"\n', ("FEDORA", "41")),
        ('ID="debian"\nVERSION_ID="12"\n', ("DEBIAN", "12")),
        ("", ("unsupported", "")),
    ],
    ids=["rhcos-rhel-version", "rhcos-openshift-version", "fcos", "debian", "none"],
)
def test_host_os_labels_are_upstreams(text: str, labels: tuple[str, str]) -> None:
    assert host_os(text) == labels


@pytest.fixture
def kubelet() -> Iterator[tuple[str, list[str]]]:
    answers = ["ok"]

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = answers[0].encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/healthz", answers
    httpd.shutdown()
    httpd.server_close()


def test_kubelet_failures_are_counted_until_it_answers(kubelet: tuple[str, list[str]]) -> None:
    url, answers = kubelet
    metrics = Metrics()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/healthz"  # bound, not listening: refused
        poll = KubeletHealth(dead, 30, metrics.kubelet_state, threading.Event())
        poll.check()
        poll.check()
    assert metrics.registry.get_sample_value("mcd_kubelet_state") == 2
    poll.url = url
    answers[0] = "not ok"  # an answer, even a bad one, means the kubelet is up (upstream)
    poll.check()
    assert metrics.registry.get_sample_value("mcd_kubelet_state") == 0


def test_sd_notify_reaches_the_notify_socket(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "notify"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(path))
        sock.settimeout(5)
        monkeypatch.setenv("NOTIFY_SOCKET", str(path))
        sdnotify.notify("READY=1")
        assert sock.recv(64) == b"READY=1"


def test_no_notify_socket_sends_nothing_and_watchdog_interval_is_half(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    sdnotify.notify("READY=1")  # nothing to send to: no error
    monkeypatch.setenv("WATCHDOG_USEC", "20000000")
    monkeypatch.delenv("WATCHDOG_PID", raising=False)
    assert sdnotify.watchdog_interval() == 10.0
    monkeypatch.setenv("WATCHDOG_PID", "1")
    assert sdnotify.watchdog_interval() is None
