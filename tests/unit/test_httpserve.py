"""The shared request handler of the metrics and health endpoints, on a real loopback server."""

from __future__ import annotations

import http.client
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer

import pytest

from mcd.runtime import httpserve

LOG = logging.getLogger("test.httpserve")


@contextmanager
def _serving(answer: httpserve.Answer, timeout: float | None = None) -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), httpserve.handler(answer, LOG, "probe", timeout))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _get(server: ThreadingHTTPServer, path: str, headers: dict[str, str]) -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
    conn.request("GET", path, headers=headers)
    response = conn.getresponse()
    response.read()
    conn.close()
    return response


def test_the_answer_gets_the_path_headers_and_caller_and_its_reply_is_sent() -> None:
    seen: list[httpserve.Request] = []

    def answer(request: httpserve.Request) -> httpserve.Reply:
        seen.append(request)
        return httpserve.Reply(401, b"no\n", "text/x-test", {"WWW-Authenticate": "Bearer"})

    with _serving(answer) as server:
        response = _get(server, "/metrics?name=x", {"Authorization": "Bearer t"})
    assert (response.status, response.getheader("Content-Type")) == (401, "text/x-test")
    assert (response.getheader("Content-Length"), response.getheader("WWW-Authenticate")) == ("3", "Bearer")
    [request] = seen
    assert (request.path, request.headers["Authorization"], request.client) == (
        "/metrics",
        "Bearer t",
        "127.0.0.1",
    )


def test_not_found_is_a_plain_404() -> None:
    with _serving(lambda _: httpserve.NOT_FOUND) as server:
        response = _get(server, "/other", {})
    assert (response.status, response.getheader("Content-Type")) == (404, "text/plain")


def test_the_access_log_goes_to_the_given_logger_at_debug_under_its_name(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.DEBUG, logger=LOG.name), _serving(lambda _: httpserve.NOT_FOUND) as server:
        _get(server, "/x", {})
    lines = [r for r in caplog.records if r.name == LOG.name]
    assert lines and all(r.levelno == logging.DEBUG for r in lines)
    assert any(r.getMessage().startswith('probe: "GET /x HTTP/1.1" 404') for r in lines)


def test_the_timeout_is_set_only_when_asked() -> None:
    assert httpserve.handler(lambda _: httpserve.NOT_FOUND, LOG, "a", timeout=30).timeout == 30
    assert httpserve.handler(lambda _: httpserve.NOT_FOUND, LOG, "a").timeout is None
