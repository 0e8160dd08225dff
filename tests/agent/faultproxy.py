"""A fault-injecting HTTP proxy on 127.0.0.1, between the agent and the stand-in API server.

The server's own fault rules act inside the server; this proxy sits on the wire, as a load
balancer or a broken network would: it answers a request itself (any status, such as 503 or
401), resets the connection, closes it without an answer, refuses every connection for an
outage, or cuts the streams (watches) that are open. Everything else is forwarded to the
server, one request per upstream connection (the answer is marked `Connection: close`, so
the client never reuses a connection the proxy is about to close).

Plain HTTP on both sides (the stand-in server runs without TLS for these tests): a proxy that
must read the requests cannot pass TLS through.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import struct
import threading
from dataclasses import dataclass, field

_HEAD_LIMIT = 1 << 16
_WATCH = re.compile(r"[?&]watch=(true|1)\b", re.IGNORECASE)


@dataclass
class Rule:
    """Which requests to fault, how, and how many more times (None: until removed)."""

    action: str  # "503", "401" … (answer that status), "reset", "close"
    method: str | None = None
    path: str | None = None  # a regular expression searched in the request target
    body: str | None = None  # a substring of the request body
    times: int | None = 1
    fired: int = 0

    def matches(self, method: str, target: str, body: bytes) -> bool:
        if self.times is not None and self.times <= 0:
            return False
        if self.method is not None and method != self.method:
            return False
        if self.path is not None and not re.search(self.path, target):
            return False
        return self.body is None or self.body.encode() in body


@dataclass
class Seen:
    method: str
    target: str
    action: str  # "forward" or the rule's action
    body: bytes = field(repr=False, default=b"")


def _reset(sock: socket.socket) -> None:
    """Close with an RST instead of a FIN."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()


def _read_head(sock: socket.socket, buf: bytes) -> tuple[bytes, bytes] | None:
    """(head, rest) once a blank line arrived; None when the peer closed first."""
    while b"\r\n\r\n" not in buf:
        if len(buf) > _HEAD_LIMIT:
            return None
        chunk = sock.recv(65536)
        if not chunk:
            return None
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    return head, rest


def _headers(head: bytes) -> tuple[str, list[tuple[str, str]]]:
    lines = head.decode("latin-1").split("\r\n")
    out = []
    for line in lines[1:]:
        name, _, value = line.partition(":")
        out.append((name.strip(), value.strip()))
    return lines[0], out


class FaultProxy:
    """Forwards 127.0.0.1:<port> to `upstream` (host, port), faulting what the rules say."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.rules: list[Rule] = []
        self.seen: list[Seen] = []
        self.cut_at = 0
        self.refusing = False  # an outage: every connection is reset at once
        self._lock = threading.Lock()
        self._streams: dict[socket.socket, str] = {}  # open forwarded connections: their targets
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="fault-proxy", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def start(self) -> FaultProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        self.cut_streams()
        self._thread.join(5)

    # -- faults

    def add(self, action: str, **match: object) -> Rule:
        rule = Rule(action, **match)  # type: ignore[arg-type]
        with self._lock:
            self.rules.append(rule)
        return rule

    def clear(self) -> None:
        with self._lock:
            self.rules.clear()

    def outage(self, on: bool) -> None:
        """Reset every connection (new ones at accept, and the streams open now)."""
        self.refusing = on
        if on:
            self.cut_streams()

    def cut_streams(self) -> int:
        """Reset every forwarded connection still open (watches); how many there were. `cut_at`:
        how many requests were seen then (those after it were sent after the cut)."""
        with self._lock:
            streams, self._streams = set(self._streams), {}
            self.cut_at = len(self.seen)
        for sock in streams:
            _reset(sock)
        return len(streams)

    def open_watches(self) -> int:
        """How many forwarded watches are open now."""
        with self._lock:
            return sum(1 for target in self._streams.values() if _WATCH.search(target))

    def faulted(self) -> list[Seen]:
        with self._lock:
            return [s for s in self.seen if s.action != "forward"]

    # -- the wire

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            if self.refusing:
                _reset(conn)
                continue
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            self._one(conn)
        except OSError:
            pass
        finally:
            with self._lock:
                self._streams.pop(conn, None)
            with contextlib.suppress(OSError):
                conn.close()

    def _one(self, conn: socket.socket) -> None:
        got = _read_head(conn, b"")
        if got is None:
            return
        head, body = got
        request_line, headers = _headers(head)
        method, target, _ = request_line.split(" ", 2)
        length = next((int(v) for k, v in headers if k.lower() == "content-length"), 0)
        while len(body) < length:
            chunk = conn.recv(65536)
            if not chunk:
                return
            body += chunk
        with self._lock:
            rule = next((r for r in self.rules if r.matches(method, target, body)), None)
            if rule is not None:
                rule.fired += 1
                if rule.times is not None:
                    rule.times -= 1
            action = rule.action if rule is not None else "forward"
            self.seen.append(Seen(method, target, action, body))
            if action == "forward":
                # open from the moment it is seen: a cut of the streams then resets every
                # forwarded request seen before it (`cut_at`), none is left half way
                self._streams[conn] = target
        if self.refusing or action == "reset":
            _reset(conn)
        elif action == "close":
            conn.close()
        elif action.isdigit():
            status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": int(action)}
            status["message"] = f"injected by the test proxy: {action}"
            payload = json.dumps(status).encode()
            conn.sendall(
                f"HTTP/1.1 {action} Injected\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n".encode()
                + payload
            )
        else:
            self._forward(conn, method, target, headers, body)

    def _forward(
        self, conn: socket.socket, method: str, target: str, headers: list[tuple[str, str]], body: bytes
    ) -> None:
        up = socket.create_connection(self.upstream, timeout=30)
        try:
            up.settimeout(None)
            kept = [(k, v) for k, v in headers if k.lower() not in ("connection", "keep-alive")]
            head = f"{method} {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in kept)
            up.sendall((head + "Connection: close\r\n\r\n").encode("latin-1") + body)
            got = _read_head(up, b"")
            if got is None:
                _reset(conn)
                return
            status_line, answer_headers = _headers(got[0])
            kept = [(k, v) for k, v in answer_headers if k.lower() not in ("connection", "keep-alive")]
            answer = status_line + "\r\n" + "".join(f"{k}: {v}\r\n" for k, v in kept)
            conn.sendall((answer + "Connection: close\r\n\r\n").encode("latin-1") + got[1])
            while True:
                chunk = up.recv(65536)
                if not chunk:
                    break
                conn.sendall(chunk)
        finally:
            up.close()
