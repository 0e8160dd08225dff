"""The HTTP transport: a threading HTTP/1.1 server, authentication (bearer tokens, client
certificates) and, when switched on, RBAC; fault rules, audit records, and watches written as
chunked streams of JSON lines."""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import select
import socket
import ssl
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from mcd_sim.apiserver import errors
from mcd_sim.apiserver.app import WRITE_VERBS, App, Request, Response, Target, WatchStream
from mcd_sim.apiserver.audit import AuditLog
from mcd_sim.apiserver.authn import ANONYMOUS, Authenticator, User
from mcd_sim.apiserver.errors import ApiError
from mcd_sim.apiserver.faults import Faults, RequestFacts, status_error
from mcd_sim.apiserver.rbac import Access, Ask, forbidden_message

LOG = logging.getLogger(__name__)

UNAUTHENTICATED_PATHS = ("/healthz", "/readyz", "/livez")


class ConnectionReset(Exception):
    """A fault rule asked for the connection to be reset instead of answered."""


class SimHTTPServer(ThreadingHTTPServer):
    """Tracks its connections so that stop() can end keep-alive and watch connections too."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        address: tuple[str, int],
        app: App,
        access: Access,
        faults: Faults,
        audit: AuditLog | None,
        *,
        ssl_context: ssl.SSLContext | None = None,
        traffic: Traffic | None = None,
    ) -> None:
        self.app, self.access, self.faults, self.audit = app, access, faults, audit
        self.traffic = traffic or Traffic()
        self.ssl_context = ssl_context
        self.stopping = threading.Event()
        self._conn_lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._conn_threads: list[threading.Thread] = []
        self._streams = 0  # open watch streams
        self._streams_done = threading.Condition()
        super().__init__(address, Handler)

    def get_request(self) -> tuple[Any, Any]:
        sock, addr = super().get_request()
        if self.ssl_context is not None:
            # the handshake runs on the first read, in the connection's own thread
            sock = self.ssl_context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, addr

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a client that hangs up mid-handshake or mid-request is routine, not worth a traceback on stderr
        LOG.debug("sim apiserver: connection from %s failed", client_address, exc_info=True)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._conn_lock:
            self._connections.add(request)
            self._conn_threads = [t for t in self._conn_threads if t.is_alive()]
        thread = threading.Thread(
            target=self.process_request_thread,
            args=(request, client_address),
            name="sim-apiserver-conn",
            daemon=True,
        )
        with self._conn_lock:
            self._conn_threads.append(thread)
        thread.start()

    def shutdown_request(self, request: Any) -> None:
        with self._conn_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def stream_opened(self) -> None:
        with self._streams_done:
            self._streams += 1

    def stream_closed(self) -> None:
        with self._streams_done:
            self._streams -= 1
            self._streams_done.notify_all()

    def wait_for_streams(self, timeout: float) -> bool:
        """Wait until every watch stream wrote its last chunk (after the store ended them)."""
        with self._streams_done:
            return self._streams_done.wait_for(lambda: self._streams == 0, timeout)

    def close_connections(self) -> None:
        with self._conn_lock:
            conns = list(self._connections)
            threads = list(self._conn_threads)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        for thread in threads:
            thread.join(timeout=5)


class Traffic:
    """Bytes the server wrote to its clients (headers, bodies, watch chunks), for benchmarks."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.bytes_sent = 0

    def add(self, count: int) -> None:
        with self._lock:
            self.bytes_sent += count


class _CountingWriter:
    """The handler's wfile, counting what is written through it into `Traffic`."""

    def __init__(self, inner: Any, traffic: Traffic) -> None:
        self._inner, self._traffic = inner, traffic

    def write(self, data: bytes) -> int:
        written = self._inner.write(data)
        self._traffic.add(len(data))
        return int(written or 0)

    def __getattr__(self, name: str) -> Any:  # flush, close, closed: the socket writer's own
        return getattr(self._inner, name)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: SimHTTPServer
    server_version = "mcd-sim-apiserver"
    _user: User = ANONYMOUS
    sys_version = ""

    def setup(self) -> None:
        super().setup()
        # watch events and small answers must not wait for Nagle's algorithm
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.wfile = _CountingWriter(self.wfile, self.server.traffic)  # type: ignore[assignment]

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the audit log is the access log; the default one writes to stderr

    def do_GET(self) -> None:
        self._serve()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

    def _serve(self) -> None:
        received = time.time()
        srv = self.server
        url = urlsplit(self.path)
        query = dict(parse_qsl(url.query, keep_blank_values=True))
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        target = srv.app.target(self.command, url.path, query)
        code = 500
        self._user = ANONYMOUS
        try:
            self._user = self._authenticate(url.path)
            self._authorize(target)
            self._apply_faults(target)
            result = srv.app.handle(
                Request(self.command, url.path, query, {k.lower(): v for k, v in self.headers.items()}, body),
                target,
            )
            if isinstance(result, WatchStream):
                code = 200
                self._stream(result)
            else:
                code = result.code
                try:
                    self._send(result)
                except OSError:  # ssl.SSLError included
                    # the client went away after its request was done (a killed controller): the
                    # write stands, and the audit log says so with its code, as kube-apiserver's
                    self.close_connection = True
        except ConnectionReset:
            code = 0
            self._reset()
        except ApiError as exc:
            code = exc.code
            if target.verb == "watch" and exc.code == 410:
                code = 200
                self._stream_error(exc)
                return
            headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after is not None else {}
            self._send(Response(exc.code, exc.status(), headers))
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception:  # a server bug answers 500, like kube-apiserver's panic recovery
            LOG.exception("sim apiserver: %s %s failed", self.command, url.path)
            code = 500
            self._send(Response(500, ApiError(500, "InternalError", "internal error").status()))
        finally:
            self._audit(target, code, received, body)

    def _authenticate(self, path: str) -> User:
        """The request's user: a client certificate first, then a bearer token (kube-apiserver's
        order); 401 when neither names one."""
        if path in UNAUTHENTICATED_PATHS:
            return ANONYMOUS
        peer = self.connection.getpeercert() if isinstance(self.connection, ssl.SSLSocket) else None
        user = Authenticator.by_certificate(peer) or self.server.access.authn.by_header(
            self.headers.get("Authorization", "")
        )
        if user is None:
            raise errors.unauthorized()
        return user

    def _authorize(self, target: Target) -> None:
        authorizer = self.server.access.authorizer
        if authorizer is None or self._user is ANONYMOUS:
            return
        if target.rt is None:
            if authorizer.allows_path(self._user):
                return
            raise errors.forbidden(
                f'forbidden: User "{self._user.name}" cannot {target.verb} path', "", "", ""
            )
        resource = target.rt.plural + (f"/{target.subresource}" if target.subresource else "")
        ask = Ask(target.verb, target.rt.group, resource, target.namespace, target.name)
        if not authorizer.allows(self._user, ask):
            message = forbidden_message(self._user, ask)
            raise errors.forbidden(message, target.rt.plural, target.rt.group, target.name)

    def _apply_faults(self, target: Target) -> None:
        facts = RequestFacts(
            target.verb,
            target.rt.plural if target.rt else "",
            target.subresource,
            target.namespace,
            target.name,
        )
        for rule in self.server.faults.take(facts):
            if rule.action == "delay":
                time.sleep(rule.seconds)
            elif rule.action == "reset":
                raise ConnectionReset()
            elif rule.action == "expire":
                raise errors.gone("too old resource version: injected (fault)")
            else:
                raise status_error(rule, facts)

    def _send(self, response: Response) -> None:
        if isinstance(response.body, str):
            data = response.body.encode()
        else:
            data = json.dumps(response.body, separators=(",", ":")).encode()
        self.send_response(response.code)
        self.send_header("Content-Type", response.headers.pop("Content-Type", "application/json"))
        self.send_header("Cache-Control", "no-cache, private")
        for key, value in response.headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _reset(self) -> None:
        # SO_LINGER 0 makes close() send RST: the client sees "connection reset by peer"
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        self.connection.close()

    def _chunk(self, obj: Any) -> None:
        data = json.dumps(obj, separators=(",", ":")).encode() + b"\n"
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _client_gone(self) -> bool:
        # a watch client sends nothing: readable means it hung up (or sent bytes we may drop).
        # poll, not select: with 200 agents' connections and watches the server's descriptors
        # pass FD_SETSIZE (1024), which select() cannot take
        try:
            poller = select.poll()
            poller.register(self.connection, select.POLLIN)
            if not poller.poll(0):
                return False
            self.connection.settimeout(0)
            try:
                return bool(self.connection.recv(1) == b"")
            finally:
                self.connection.settimeout(None)
        except (ssl.SSLWantReadError, BlockingIOError):
            return False
        except OSError:
            return True

    def _start_stream(self) -> None:
        self.close_connection = True  # a watch connection ends with the watch
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _stream(self, watch: WatchStream) -> None:
        self.server.stream_opened()
        try:
            self._start_stream()
            self._stream_events(watch)
            self.wfile.write(b"0\r\n\r\n")
        except OSError:  # ssl.SSLError too: a client that hangs up mid-watch is routine
            LOG.debug("sim apiserver: watch client went away", exc_info=True)
            self.close_connection = True
        finally:
            self.server.app.store.unwatch(watch.watcher)
            self.server.stream_closed()

    def _stream_error(self, exc: ApiError) -> None:
        """A watch that cannot start (expired resourceVersion) is, as from kube-apiserver's watch
        cache, a 200 stream with one ERROR event."""
        self._start_stream()
        self._chunk({"type": "ERROR", "object": exc.status()})
        self.wfile.write(b"0\r\n\r\n")

    def _stream_events(self, watch: WatchStream) -> None:
        last_rv = watch.start_rv
        for event in watch.backlog:
            rendered = watch.render(event)
            last_rv = max(last_rv, event.rv)
            if rendered is not None:
                self._chunk(rendered)
        if watch.initial_end and watch.bookmark is not None:
            mark = watch.bookmark(last_rv)
            mark["object"]["metadata"]["annotations"] = {"k8s.io/initial-events-end": "true"}
            self._chunk(mark)
        interval = self.server.app.bookmark_interval
        deadline = time.monotonic() + watch.timeout
        next_bookmark = time.monotonic() + interval
        while not self.server.stopping.is_set():
            now = time.monotonic()
            if now >= deadline:
                if watch.bookmark is not None:
                    self._chunk(watch.bookmark(last_rv))
                return
            wait = min(deadline, next_bookmark if watch.bookmark else deadline, now + 1.0) - now
            try:
                change = watch.watcher.events.get(timeout=max(wait, 0.0))
            except queue.Empty:
                if self._client_gone():
                    return
                if watch.bookmark is not None and time.monotonic() >= next_bookmark:
                    self._chunk(watch.bookmark(last_rv))
                    next_bookmark = time.monotonic() + interval
                continue
            if change is None:
                return  # the store ended every watch (fault injection or shutdown)
            last_rv = max(last_rv, change.rv)
            rendered = watch.render(change)
            if rendered is not None:
                self._chunk(rendered)

    def _audit(self, target: Target, code: int, received: float, body: bytes) -> None:
        audit = self.server.audit
        if audit is None:
            return
        request_object: Any = None
        if target.verb in WRITE_VERBS and body:
            try:
                request_object = json.loads(body)
            except (json.JSONDecodeError, UnicodeDecodeError):
                request_object = None
        audit.record(
            verb=target.verb,
            request_uri=self.path,
            username=self._user.name,
            groups=list(self._user.groups),
            source_ip=str(self.client_address[0]),
            user_agent=self.headers.get("User-Agent", ""),
            object_ref=target.object_ref(),
            code=code,
            received=received,
            completed=time.time(),
            request_object=request_object,
        )
