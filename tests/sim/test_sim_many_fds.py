"""The stand-in API server past FD_SETSIZE: at 200 agents (each with its TLS connections and
watches) its descriptors pass 1024, which select() cannot take; it must go on serving."""

from __future__ import annotations

import http.client
import json
import os
import resource
from collections.abc import Iterator

import pytest
from mcd_sim.apiserver import ApiServer

FD_SETSIZE = 1024
WANTED = FD_SETSIZE + 200


@pytest.fixture
def many_fds() -> Iterator[None]:
    """This process with every descriptor below FD_SETSIZE taken: what the server opens next
    (its listener, the accepted connections) is numbered above it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < WANTED + 64:
        pytest.skip(f"RLIMIT_NOFILE hard limit {hard} is below {WANTED + 64}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, WANTED + 64), hard))
    held: list[int] = []
    try:
        while not held or held[-1] < FD_SETSIZE + 8:
            held.append(os.open(os.devnull, os.O_RDONLY))
        yield
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _watch(sim: ApiServer) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    host, port = sim.listen
    conn = http.client.HTTPConnection(host, port, timeout=30)
    conn.request(
        "GET",
        "/api/v1/nodes?watch=true&allowWatchBookmarks=true&timeoutSeconds=60",
        headers={"Authorization": f"Bearer {sim.token}"},
    )
    return conn, conn.getresponse()


def test_watch_outlives_idle_checks_on_a_descriptor_above_fd_setsize(many_fds: None) -> None:
    # between events the stream checks whether its client hung up; the bookmarks come after
    # such checks, so reading three of them and then a change proves the checks did not end it
    with ApiServer(tls=False, bookmark_interval=0.1) as sim:
        sim.add_node("worker-0")
        conn, resp = _watch(sim)
        try:
            assert resp.status == 200
            assert conn.sock is not None and conn.sock.fileno() > FD_SETSIZE
            bookmarks = 0
            while bookmarks < 3:
                event = json.loads(resp.readline())
                bookmarks += event["type"] == "BOOKMARK"
            sim.add_node("worker-1")
            seen = []
            while "worker-1" not in seen:
                event = json.loads(resp.readline())
                seen.append(event["object"]["metadata"].get("name"))
        finally:
            conn.close()
        # and plain requests are served too
        host, port = sim.listen
        plain = http.client.HTTPConnection(host, port, timeout=30)
        plain.request("GET", "/api/v1/nodes", headers={"Authorization": f"Bearer {sim.token}"})
        names = [n["metadata"]["name"] for n in json.loads(plain.getresponse().read())["items"]]
        plain.close()
        assert names == ["worker-0", "worker-1"]
