"""The scrape endpoint for Prometheus: `/metrics` over TLS, for authenticated and authorized
callers only (`--secure-metrics-url`, 0.0.0.0:9001 in the DaemonSet, upstream's port).

Upstream puts a kube-rbac-proxy sidecar in front of its plain 127.0.0.1:8797; mcd makes the
same two checks itself, as the kubelet does for its own `/metrics`: the caller's bearer token
goes to a TokenReview, the user it names to a SubjectAccessReview of `get` on the `metrics`
subresource of this node (`nodes/metrics`, name = the node), the kubelet's own rule, so a
Prometheus that may scrape a node's kubelet may scrape its agent, and a grant can be narrowed
to some nodes by name. No token: 401; a token the API server does not accept: 401; a user not
allowed: 403; the API server unreachable and no answer remembered: 503. Answers are remembered
as kube-rbac-proxy remembers them (a token 2 minutes, an allowed user 5 minutes, a refusal 30
seconds), so a scrape every 30 s costs the API server nothing most of the time.

The serving certificate and key come from files (a mounted Secret: OpenShift's service CA
fills `proxy-tls`); read again when they change (the service CA rotates them). Without them
the agent makes a self-signed pair at start (`openssl`, through the one runner), logged at INFO:
the scraper then has to skip verification.
"""

from __future__ import annotations

import hashlib
import logging
import os
import ssl
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol

from prometheus_client import CONTENT_TYPE_LATEST

from mcd.agent.settings import AgentSettings
from mcd.host.runner import CommandError, Runner, SubprocessRunner
from mcd.kube.errors import ApiError
from mcd.runtime import httpserve

LOG = logging.getLogger(__name__)

TOKEN_TTL = 120.0
ALLOWED_TTL = 300.0
DENIED_TTL = 30.0
# remembered answers at most (a scrape job uses one token; more than this is a flood)
CACHE_LIMIT = 256
# the certificate files are looked at again at most this often
RELOAD_CHECK_SECONDS = 10.0

Obj = dict[str, Any]


class ReviewApi(Protocol):
    def review_token(self, token: str) -> Obj: ...

    def review_access(self, spec: Obj) -> Obj: ...


@dataclass(frozen=True)
class Decision:
    code: int  # 200, 401, 403 or 503
    reason: str


class _Ttl:
    """A small map whose entries expire (thread-safe)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._items: dict[object, tuple[float, object]] = {}

    def get(self, key: object) -> object | None:
        with self._lock:
            found = self._items.get(key)
            if found is None or found[0] <= self._clock():
                self._items.pop(key, None)
                return None
            return found[1]

    def put(self, key: object, value: object, ttl: float) -> None:
        with self._lock:
            if len(self._items) >= CACHE_LIMIT:
                self._items.clear()
            self._items[key] = (self._clock() + ttl, value)


class ScrapeAuth:
    """Who may read `/metrics`: TokenReview, then SubjectAccessReview of `get nodes/metrics`."""

    def __init__(self, api: ReviewApi, node_name: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.api = api
        self.node_name = node_name
        self._users = _Ttl(clock)
        self._verdicts = _Ttl(clock)

    def attributes(self) -> Obj:
        return {"verb": "get", "resource": "nodes", "subresource": "metrics", "name": self.node_name}

    def decide(self, authorization: str) -> Decision:
        scheme, _, token = authorization.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return Decision(401, "no bearer token")
        key = hashlib.sha256(token.encode()).digest()  # the token itself is never kept
        user = self._users.get(key)
        if user is None:
            try:
                review = self.api.review_token(token)
            except ApiError as exc:
                return Decision(503, f"cannot check the token: {exc}")
            status = review.get("status") or {}
            if not status.get("authenticated"):
                return Decision(401, "the API server does not accept the token")
            user = status.get("user") or {}
            self._users.put(key, user, TOKEN_TTL)
        assert isinstance(user, dict)
        name = str(user.get("username", ""))
        verdict_key = (name, tuple(user.get("groups") or ()))
        allowed = self._verdicts.get(verdict_key)
        if allowed is None:
            spec = {
                "user": name,
                "groups": list(user.get("groups") or []),
                "resourceAttributes": self.attributes(),
            }
            if user.get("uid"):
                spec["uid"] = user["uid"]
            if user.get("extra"):
                spec["extra"] = user["extra"]
            try:
                review = self.api.review_access(spec)
            except ApiError as exc:
                return Decision(503, f"cannot check {name}'s access: {exc}")
            allowed = bool((review.get("status") or {}).get("allowed"))
            self._verdicts.put(verdict_key, allowed, ALLOWED_TTL if allowed else DENIED_TTL)
        if not allowed:
            return Decision(403, f'user "{name}" may not get nodes/metrics of node {self.node_name}')
        return Decision(200, "")


class ServingCertificate:
    """The TLS context of the scrape endpoint, from files that may be replaced while it runs."""

    def __init__(self, cert_file: str, key_file: str, runner: Runner | None = None) -> None:
        self.cert_file, self.key_file = cert_file, key_file
        self._lock = threading.Lock()
        self._stamp: tuple[float, float] | None = None
        self._checked = 0.0
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        if cert_file and key_file and Path(cert_file).is_file() and Path(key_file).is_file():
            self._load()
            self.self_signed = False
        else:
            if cert_file or key_file:
                LOG.info("no serving certificate at %s and %s: using a self-signed one", cert_file, key_file)
            else:
                LOG.info("no serving certificate given: using a self-signed one")
            self._self_signed(runner or SubprocessRunner())
            self.self_signed = True

    def _stat(self) -> tuple[float, float]:
        return Path(self.cert_file).stat().st_mtime, Path(self.key_file).stat().st_mtime

    def _load(self) -> None:
        stamp = self._stat()
        self.context.load_cert_chain(self.cert_file, self.key_file)
        self._stamp = stamp

    def refresh(self, now: float | None = None) -> None:
        """Load the files again when they changed (new connections get the new pair)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            if self._stamp is None or now - self._checked < RELOAD_CHECK_SECONDS:
                return
            self._checked = now
            try:
                if self._stat() == self._stamp:
                    return
                self._load()
                LOG.info("serving certificate %s loaded again", self.cert_file)
            except (OSError, ssl.SSLError) as exc:
                # a Secret update swaps the files in one rename; a half-seen pair is tried again
                LOG.warning("cannot load the serving certificate %s again: %s", self.cert_file, exc)

    def _self_signed(self, runner: Runner) -> None:
        host = os.uname().nodename
        with tempfile.TemporaryDirectory(prefix="mcd-tls-") as tmp:
            cert, key = os.path.join(tmp, "tls.crt"), os.path.join(tmp, "tls.key")
            runner.run(
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
                    "3650",
                    "-subj",
                    f"/CN={host}",
                    "-keyout",
                    key,
                    "-out",
                    cert,
                    "-addext",
                    f"subjectAltName=DNS:{host},DNS:localhost,IP:127.0.0.1",
                ]
            )
            self.context.load_cert_chain(cert, key)


class SecureMetricsServer:
    """HTTPS on `address`: `/metrics` for callers `auth` lets in; everything else 404."""

    def __init__(
        self,
        address: str,
        render: Callable[[], bytes],
        content_type: str,
        auth: ScrapeAuth,
        certificate: ServingCertificate,
    ) -> None:
        host, _, port = address.rpartition(":")
        self.address = (host or "0.0.0.0", int(port))
        self.render, self.content_type, self.auth, self.certificate = render, content_type, auth, certificate

    def bind(self) -> ThreadingHTTPServer:
        # a client that never finishes its handshake or request is dropped after 30 s
        handler = httpserve.handler(
            lambda request: _answer(self, request), LOG, "metrics over TLS", timeout=30
        )
        server = _TlsServer(self.address, handler, self.certificate)
        server.daemon_threads = True
        LOG.info("metrics over TLS listening on %s:%d", server.server_address[0], server.server_address[1])
        return server


class _TlsServer(ThreadingHTTPServer):
    def __init__(self, address: tuple[str, int], handler: Any, certificate: ServingCertificate) -> None:
        super().__init__(address, handler)
        self.certificate = certificate

    def get_request(self) -> tuple[Any, Any]:
        sock, addr = super().get_request()
        self.certificate.refresh()
        # the handshake happens on the request's thread (first read), never on the accept loop
        context = self.certificate.context
        return context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr

    def handle_error(self, request: Any, client_address: Any) -> None:
        LOG.debug("metrics over TLS: a connection from %s failed", client_address, exc_info=True)


def _answer(server: SecureMetricsServer, request: httpserve.Request) -> httpserve.Reply:
    if request.path != "/metrics":
        return httpserve.NOT_FOUND
    decision = server.auth.decide(request.headers.get("Authorization", ""))
    if decision.code != 200:
        LOG.info("metrics over TLS: %d for %s: %s", decision.code, request.client, decision.reason)
        extra = {"WWW-Authenticate": 'Bearer realm="mcd"'} if decision.code == 401 else {}
        words = {401: b"Unauthorized\n", 403: b"Forbidden\n", 503: b"Service Unavailable\n"}
        return httpserve.Reply(decision.code, words[decision.code], "text/plain", extra)
    return httpserve.Reply(200, server.render(), server.content_type)


def secure_endpoint(
    settings: AgentSettings, api: ReviewApi, render: Callable[[], bytes]
) -> SecureMetricsServer | None:
    """The scrape endpoint the settings ask for (None: `--secure-metrics-url` empty)."""
    if not settings.secure_metrics_url:
        return None
    try:
        certificate = ServingCertificate(settings.tls_cert_file, settings.tls_key_file)
    except (OSError, ssl.SSLError, CommandError) as exc:
        # a metrics endpoint never stops the agent: it runs without one, said at ERROR
        LOG.error("no metrics over TLS on %s: %s", settings.secure_metrics_url, exc)
        return None
    auth = ScrapeAuth(api, settings.node_name)
    return SecureMetricsServer(settings.secure_metrics_url, render, CONTENT_TYPE_LATEST, auth, certificate)
