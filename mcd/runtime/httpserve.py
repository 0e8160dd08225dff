"""The request handler of the process's small HTTP endpoints (metrics, health).

The agent's plain and TLS endpoints and the pool controller's metrics endpoint differ only in
what they answer; how a GET becomes a response, and where the server's access log goes, is
here once. An endpoint gives a function from the request to its `Reply`; this module never
decides who may read what.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from email.message import Message
from http.server import BaseHTTPRequestHandler
from typing import Any


@dataclass(frozen=True)
class Request:
    path: str  # without the query string
    headers: Message
    client: str  # the caller's address, for the endpoint's own log lines


@dataclass(frozen=True)
class Reply:
    code: int
    body: bytes
    content_type: str = "text/plain"
    headers: Mapping[str, str] = field(default_factory=dict)


NOT_FOUND = Reply(404, b"not found\n")

Answer = Callable[[Request], Reply]


def handler(
    answer: Answer, log: logging.Logger, name: str, timeout: float | None = None
) -> type[BaseHTTPRequestHandler]:
    """A handler class answering every GET with `answer(request)`. The server's own access log
    goes to `log` at DEBUG under `name` (a scrape every few seconds is no news at INFO); with
    `timeout`, a client that never finishes its request is dropped after that many seconds."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            request = Request(self.path.split("?", 1)[0], self.headers, str(self.client_address[0]))
            reply = answer(request)
            self.send_response(reply.code)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(reply.body)))
            for key, value in reply.headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(reply.body)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("%s: " + format, name, *args)

    if timeout is not None:
        Handler.timeout = timeout
    return Handler
