"""Nothing escapes, in process: the guard restarts a failing thread and counts it, the kubelet poll
survives a non-HTTP answer, the event poster survives a bad event, the signal handler takes no
lock, and the health rule sees a revoked token, an unreachable API and a stuck sync (the drift
notifier: tests/watch/test_notifier_guard.py)."""

from __future__ import annotations

import logging
import signal
import socket
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from mcd_sim.sandbox import make_sandbox_root
from recording import RecordingRunner

from mcd.agent.health import SyncClock
from mcd.agent.kubelet import KubeletHealth
from mcd.agent.loop import Daemon
from mcd.agent.node_apply import NodeApplier
from mcd.agent.report.events import EventRecorder
from mcd.agent.report.metrics import Metrics
from mcd.agent.settings import AgentSettings
from mcd.host.root import HostRoot
from mcd.kube.client import KubeClient
from mcd.kube.reach import ApiReach
from mcd.runtime import guard


def _eventually(pred: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def test_the_guard_logs_counts_backs_off_and_restarts(caplog: pytest.LogCaptureFixture) -> None:
    runs: list[int] = []
    restarts: list[int] = []
    done = threading.Event()

    def body() -> None:
        runs.append(1)
        if len(runs) <= 2:
            raise OSError(f"failure {len(runs)}")
        done.set()

    stop = threading.Event()
    with caplog.at_level(logging.ERROR, logger="mcd.runtime.guard"):
        guard.spawn("test-flaky", body, stop, on_restart=lambda: restarts.append(1), start=0.01)
        assert done.wait(5)
    assert len(runs) == 3 and len(restarts) == 2
    assert guard.restart_counts()["test-flaky"] == 2
    assert [r.levelname for r in caplog.records].count("ERROR") == 2
    assert "thread test-flaky failed (restart 1" in caplog.records[0].getMessage()
    assert 'mcd_thread_restarts_total{thread="test-flaky"} 2.0' in Metrics().render().decode()


def test_the_guard_stops_waiting_when_told_to() -> None:
    stop = threading.Event()

    def body() -> None:
        raise RuntimeError("always")

    thread = guard.spawn("test-always", body, stop, start=30)
    _eventually(lambda: guard.restart_counts().get("test-always", 0) >= 1, "the first failure")
    stop.set()
    thread.join(5)
    assert not thread.is_alive()


@pytest.fixture
def not_http() -> Any:
    """Something on the kubelet's port that does not speak HTTP."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")

    threading.Thread(target=serve, daemon=True).start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}/healthz"
    stop.set()
    server.close()


def test_a_non_http_answer_counts_as_a_kubelet_failure(not_http: str) -> None:
    """Reported: http.client.BadStatusLine (no OSError) ended the poll thread; the gauge never rose."""
    metrics = Metrics()
    poll = KubeletHealth(not_http, 30, metrics.kubelet_state, threading.Event())
    poll.check()
    poll.check()
    assert metrics.registry.get_sample_value("mcd_kubelet_state") == 2


class _FlakyEvents:
    def __init__(self) -> None:
        self.posted: list[str] = []

    def create_event(self, namespace: str, event: Mapping[str, Any]) -> None:
        if not self.posted and event["reason"] == "First":
            self.posted.append("raised")
            raise TypeError("an answer the client did not expect")
        self.posted.append(str(event["reason"]))


def test_the_event_poster_survives_an_unexpected_error() -> None:
    api = _FlakyEvents()
    recorder = EventRecorder(api, "node-0")
    recorder.start()
    try:
        recorder.normal("First", "x")
        recorder.normal("Second", "y")
        _eventually(lambda: "Second" in api.posted, "the event after the failure", timeout=10)
    finally:
        recorder.stop()


def _daemon(tmp_path: Path, **settings: Any) -> Daemon:
    root = make_sandbox_root(tmp_path / "root")
    client = KubeClient.connect(str(_kubeconfig(tmp_path)), HostRoot(root))
    applier = NodeApplier(HostRoot(root), RecordingRunner())
    return Daemon(
        AgentSettings(
            "node-0", root_mount=str(root), metrics_url="", kubelet_healthz_enabled=False, **settings
        ),
        client,
        applier,
    )


def _kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    return path


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals: main thread")
def test_the_signal_handler_takes_no_lock(tmp_path: Path) -> None:
    """Reported: the SIGTERM handler put into the work queue and set an Event from signal context,
    where the main thread may hold the same locks: a deadlock."""
    daemon = _daemon(tmp_path)
    previous = signal.getsignal(signal.SIGTERM)
    daemon.install_signal_handlers()
    try:
        handler = signal.getsignal(signal.SIGTERM)
        assert callable(handler)
        # the main thread in the middle of queue.put() and of an Event's wait/set
        with daemon.queue._cond, daemon.stop._cond:
            call = threading.Thread(target=handler, args=(signal.SIGTERM, None), daemon=True)
            call.start()
            call.join(2)
            assert not call.is_alive(), "the signal handler blocked on a lock the main thread holds"
        _eventually(daemon.stop.is_set, "the stop flag, set outside signal context")
        assert daemon.queue.get(timeout=5) is not None  # the loop is woken
    finally:
        daemon.shutdown()
        signal.signal(signal.SIGTERM, previous)


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_an_api_outage_is_logged_once_and_its_end_once(caplog: pytest.LogCaptureFixture) -> None:
    clock = _Clock()
    reach = ApiReach("https://api.example:6443", clock)
    with caplog.at_level(logging.WARNING, logger="mcd.agent.health"):
        for _ in range(5):
            reach.answered(401, "GET nodes (watch)", "GET /api/v1/nodes: 401 Unauthorized")
            clock.now += 2
        assert reach.unreached_for() == 10
        reach.answered(200, "PATCH node", "")
        for _ in range(3):
            reach.answered(0, "PATCH node", "connection refused")
        clock.now += 7
        reach.answered(503, "PATCH node", "503 Service Unavailable")  # the same outage, going on
        reach.answered(200, "GET node", "")
        reach.answered(403, "GET pods", "forbidden")
        reach.answered(403, "GET pods", "forbidden")
    lines = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert [level for level, _ in lines] == ["ERROR", "WARNING", "WARNING", "WARNING", "WARNING"]
    assert "https://api.example:6443" in lines[0][1] and "token" in lines[0][1]
    assert "accepts the agent's credentials again" in lines[1][1]
    assert "cannot reach" in lines[2][1] and "kubeconfig" in lines[2][1]
    assert "answers again, after 7s and 4 failed request(s)" in lines[3][1]
    assert "forbids GET pods (403)" in lines[4][1] and "RBAC" in lines[4][1]
    assert reach.unreached_for() == 0
    reach.stream(True)
    clock.now += 1000
    assert reach.unreached_for() == 0  # an open watch is a reached API
    reach.stream(False)
    assert reach.unreached_for() == 0  # the watch reached the API until it ended
    clock.now += 5
    assert reach.unreached_for() == 5  # the limit runs from the stream's end
    reach.answered(200, "GET node", "")
    reach.stream(True)
    clock.now += 1000
    # the server goes away: a request's failure may be told before the watch's end
    reach.answered(0, "PATCH node", "connection refused")
    reach.stream(False)
    assert reach.unreached_for() == 0
    clock.now += 5
    assert reach.unreached_for() == 5


def test_liveness_fails_on_a_sync_past_its_deadline_never_on_an_unreached_api(tmp_path: Path) -> None:
    """Readiness says the API server is away; liveness (the probe, the watchdog) does not:
    restarting every agent at once during an outage would not bring the API server back."""
    daemon = _daemon(tmp_path, api_unreachable_seconds=300)
    clock = _Clock()
    daemon.client.reach = ApiReach(daemon.client.host, clock)
    daemon.sync_clock = SyncClock(clock)
    assert daemon.healthy() and daemon.ready()
    clock.now += 301
    assert daemon.healthy() and daemon.unhealthy() == ""
    assert not daemon.ready()
    clock.now += 600  # a ten-minute outage
    assert daemon.healthy() and not daemon.ready()
    daemon.client.reach.answered(200, "GET node", "")
    assert daemon.healthy() and daemon.ready()
    daemon.sync_clock.begin(60)  # a sync whose longest command may take 60 s
    clock.now += 59
    assert daemon.healthy()
    daemon.sync_clock.extend(3600)  # it waits for a drain: the drain's timeout is its own
    clock.now += 600
    daemon.client.reach.stream(True)  # the watch is open all along
    assert daemon.healthy()
    clock.now += 3600
    assert "past its deadline" in daemon.unhealthy()
    assert not daemon.ready()  # a stuck agent is not ready either
    daemon.sync_clock.end()
    assert daemon.healthy()
    daemon.shutdown()


def test_the_unsupported_packages_gauge_is_set_for_the_node_at_start(tmp_path: Path) -> None:
    daemon = _daemon(tmp_path)  # a sandbox root: no rpm-ostree, upstream's 0
    daemon._set_host_metrics()
    sample = daemon.metrics.registry.get_sample_value("mcd_local_unsupported_packages", {"node": "node-0"})
    assert sample == 0


def test_a_sigterm_during_an_update_is_told_in_upstreams_words(tmp_path: Path) -> None:
    daemon = _daemon(tmp_path)
    seen: list[tuple[str, str]] = []
    daemon.events.record = lambda etype, reason, message: seen.append((reason, message))  # type: ignore[method-assign]
    daemon.syncer.protection.add()
    daemon._on_signal(signal.SIGTERM)
    assert seen[-1] == ("GotSigtermDuringUpdate", "Got SIGTERM but actively updating")
    assert daemon.stop.is_set()
    daemon.syncer.protection.remove()
    seen.clear()
    daemon.stop.clear()
    daemon._on_signal(signal.SIGTERM)  # no update: no protection, no event
    assert seen == [] and daemon.stop.is_set()


def test_a_programming_error_in_the_sync_is_logged_with_its_traceback_and_reported_as_a_sentence(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reported (B6): a bug in the sync became the node's Degraded reason (its repr) and its
    traceback was logged nowhere."""
    daemon = _daemon(tmp_path)
    daemon.writer.observe({"metadata": {"name": "node-0", "resourceVersion": "1", "annotations": {}}})

    def buggy(*, boot: bool) -> Any:
        return {}["spec"]  # a KeyError, as a bug would raise

    reported: list[tuple[str, str]] = []
    monkeypatch.setattr(daemon.syncer, "sync", buggy)
    monkeypatch.setattr(daemon, "_report", lambda state, reason: reported.append((state.value, reason)))
    try:
        with caplog.at_level(logging.ERROR, logger="mcd.agent.loop"):
            daemon._process("node")
    finally:
        daemon.shutdown()
    assert reported == [("Degraded", "internal error in mcd during sync: KeyError; see the agent log")]
    errors = [r for r in caplog.records if r.levelno == logging.ERROR and r.exc_info]
    assert errors and errors[0].exc_info is not None and errors[0].exc_info[0] is KeyError
    assert daemon.queue.pending("node") == pytest.approx(1, abs=0.2)  # retried after its backoff
