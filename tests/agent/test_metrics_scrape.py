"""The scrape endpoint (`mcd.agent.report.scrape`): TLS, the scraper's token reviewed, its access
reviewed, against the stand-in API server with the shipped roles enforced; the liveness and
readiness endpoints; `process_*` and `mcd_drain_err`."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from mcd_sim.apiserver import ApiServer
from mcd_sim.apiserver.authn import service_account

from mcd.agent.report.metrics import Metrics, MetricsServer
from mcd.agent.report.scrape import (
    ALLOWED_TTL,
    DENIED_TTL,
    TOKEN_TTL,
    ScrapeAuth,
    SecureMetricsServer,
    ServingCertificate,
)
from mcd.kube.client import KubeClient
from mcd.kube.errors import ApiError

REPO = Path(__file__).resolve().parents[2]
NODE = "worker-0"
AGENT = service_account("openshift-machine-config-operator", "machine-config-daemon")
PROMETHEUS = service_account("monitoring", "prometheus-k8s")
NOSY = service_account("default", "nosy")

Obj = dict[str, Any]


def _shipped(*dirs: str) -> list[Obj]:
    out: list[Obj] = []
    for d in dirs:
        for p in sorted((REPO / "manifests" / d).glob("*.yaml")):
            out.extend(x for x in yaml.safe_load_all(p.read_text()) if x)
    return out


# -- the decision, with a stand-in for the two reviews


class FakeReviews:
    def __init__(self) -> None:
        self.tokens: dict[str, Obj] = {}
        self.allowed: set[str] = set()
        self.calls: list[str] = []
        self.down = False

    def review_token(self, token: str) -> Obj:
        self.calls.append("token")
        if self.down:
            raise ApiError(0, "POST tokenreviews: connection refused")
        user = self.tokens.get(token)
        return {"status": {"authenticated": True, "user": user} if user else {"authenticated": False}}

    def review_access(self, spec: Obj) -> Obj:
        self.calls.append("access")
        if self.down:
            raise ApiError(0, "POST subjectaccessreviews: connection refused")
        assert spec["resourceAttributes"] == {
            "verb": "get",
            "resource": "nodes",
            "subresource": "metrics",
            "name": NODE,
        }
        return {"status": {"allowed": spec["user"] in self.allowed}}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_no_token_or_a_token_not_accepted_is_401_a_user_not_allowed_403_an_allowed_one_200() -> None:
    api = FakeReviews()
    api.tokens = {"good": {"username": "prom", "groups": ["g"]}, "other": {"username": "nosy"}}
    api.allowed = {"prom"}
    auth = ScrapeAuth(api, NODE, Clock())
    assert auth.decide("").code == 401
    assert auth.decide("Basic dXNlcjpwdw==").code == 401
    assert auth.decide("Bearer ").code == 401
    assert api.calls == []  # nothing asked of the API server without a token
    assert auth.decide("Bearer forged").code == 401
    refused = auth.decide("Bearer other")
    assert (refused.code, refused.reason) == (403, f'user "nosy" may not get nodes/metrics of node {NODE}')
    assert auth.decide("bearer good").code == 200  # the scheme is case-insensitive


def test_answers_are_remembered_for_their_time_and_asked_again_after() -> None:
    api, clock = FakeReviews(), Clock()
    api.tokens = {"good": {"username": "prom"}, "other": {"username": "nosy"}}
    api.allowed = {"prom"}
    auth = ScrapeAuth(api, NODE, clock)
    assert auth.decide("Bearer good").code == 200
    assert auth.decide("Bearer good").code == 200
    assert api.calls == ["token", "access"]
    assert auth.decide("Bearer other").code == 403
    api.allowed.add("nosy")
    clock.now += DENIED_TTL - 1
    assert auth.decide("Bearer other").code == 403  # a refusal is remembered 30 s
    clock.now += 2
    assert auth.decide("Bearer other").code == 200
    # the API server away: what is remembered still answers, the rest is 503 (not 401: unknown)
    api.down = True
    assert auth.decide("Bearer good").code == 200
    assert auth.decide("Bearer unknown").code == 503
    clock.now += max(TOKEN_TTL, ALLOWED_TTL) + 1
    assert auth.decide("Bearer good").code == 503


# -- over TLS, against the stand-in API server with the shipped roles


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ApiServer]:
    sim = ApiServer(tls=True).start()
    sim.enforce_rbac(_shipped(".", "monitoring"))
    try:
        yield sim
    finally:
        sim.stop()


def _client(sim: ApiServer, tmp_path: Path) -> KubeClient:
    path = tmp_path / "agent.kubeconfig"
    path.write_text(yaml.safe_dump(sim.kubeconfig(user={"token": sim.add_token(AGENT)})))
    return KubeClient.from_kubeconfig(str(path))


def _scrape(port: int, token: str | None) -> tuple[int, str]:
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE  # self-signed
    req = urllib.request.Request(f"https://127.0.0.1:{port}/metrics")
    if token is not None:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=10, context=context) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.fixture
def serving(tmp_path: Path) -> tuple[Path, Path]:
    return _pair(tmp_path / "a", "first")


def _pair(directory: Path, cn: str) -> tuple[Path, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / "tls.crt", directory / "tls.key"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-days",
            "1",
            "-subj",
            f"/CN={cn}",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


needs_openssl = pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed")


@pytest.mark.allow_commands
@needs_openssl
def test_the_shipped_roles_let_the_agent_review_and_prometheus_scrape(
    cluster: ApiServer, tmp_path: Path
) -> None:
    client = _client(cluster, tmp_path)
    metrics = Metrics()
    certificate = ServingCertificate("", "")  # no pair given: self-signed, made with openssl
    assert certificate.self_signed
    secure = SecureMetricsServer(
        "127.0.0.1:0", metrics.render, "text/plain; version=0.0.4", ScrapeAuth(client, NODE), certificate
    )
    server = MetricsServer(metrics, "127.0.0.1:0", lambda: True, secure=secure)
    server.start()
    try:
        port = server.secure_port
        assert _scrape(port, None)[0] == 401
        assert _scrape(port, "not-a-token")[0] == 401
        assert _scrape(port, cluster.add_token(NOSY))[0] == 403
        code, body = _scrape(port, cluster.add_token(PROMETHEUS))
        assert code == 200
        assert "# TYPE mcd_state gauge" in body and "process_resident_memory_bytes" in body
        # plain HTTP on the TLS port is refused: nothing is served unencrypted there
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
            assert b"mcd_state" not in s.recv(4096)
    finally:
        server.stop()
        client.close()


@pytest.mark.allow_commands
@needs_openssl
def test_a_replaced_serving_pair_is_served_to_new_connections(tmp_path: Path) -> None:
    cert, key = _pair(tmp_path / "tls", "first")
    certificate = ServingCertificate(str(cert), str(key))
    assert not certificate.self_signed
    api = FakeReviews()
    secure = SecureMetricsServer("127.0.0.1:0", lambda: b"", "text/plain", ScrapeAuth(api, NODE), certificate)
    server = secure.bind()
    import threading

    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        assert "first" in _peer_subject(port)
        new_cert, new_key = _pair(tmp_path / "new", "second")
        new_cert.replace(cert)
        new_key.replace(key)
        certificate.refresh(now=1e12)  # past the check interval
        assert "second" in _peer_subject(port)
    finally:
        server.shutdown()
        server.server_close()


def _peer_subject(port: int) -> str:
    pem = ssl.get_server_certificate(("127.0.0.1", port), timeout=10)
    proc = subprocess.run(
        ["openssl", "x509", "-noout", "-subject"],
        input=pem,
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    return proc.stdout


# -- liveness and readiness, the process collector, the drain gauge


def _get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def test_readyz_follows_readiness_and_healthz_only_liveness() -> None:
    state = {"alive": True, "ready": False}
    server = MetricsServer(Metrics(), "127.0.0.1:0", lambda: state["alive"], lambda: state["ready"])
    server.start()
    try:
        base = f"http://127.0.0.1:{server.port}"
        assert (_get(base + "/healthz"), _get(base + "/readyz")) == (200, 503)
        state["ready"] = True
        assert (_get(base + "/healthz"), _get(base + "/readyz")) == (200, 200)
        state["alive"] = False
        assert _get(base + "/healthz") == 503
    finally:
        server.stop()


def test_process_metrics_and_the_drain_gauge() -> None:
    m = Metrics()
    assert m.registry.get_sample_value("process_resident_memory_bytes")
    assert m.registry.get_sample_value("process_cpu_seconds_total") is not None
    m.set_state("Degraded", "failed to drain node: worker-0 after 1h0m0s: evicting web-1")
    assert m.registry.get_sample_value("mcd_drain_err") == 1
    m.set_state("Working", "")
    assert m.registry.get_sample_value("mcd_drain_err") == 0
    m.set_state("Degraded", "content mismatch for file /etc/a")
    assert m.registry.get_sample_value("mcd_drain_err") == 0


def test_an_unusable_serving_pair_leaves_the_agent_without_the_tls_endpoint_not_stopped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from mcd.agent.report.scrape import secure_endpoint
    from mcd.agent.settings import AgentSettings

    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert.write_text("not a certificate\n")
    key.write_text("not a key\n")
    settings = AgentSettings(
        node_name=NODE, secure_metrics_url="127.0.0.1:0", tls_cert_file=str(cert), tls_key_file=str(key)
    )
    assert secure_endpoint(settings, FakeReviews(), lambda: b"") is None
    assert "no metrics over TLS on 127.0.0.1:0" in caplog.text
