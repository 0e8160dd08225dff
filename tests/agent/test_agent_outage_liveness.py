"""Liveness through an API server outage, shortened (issue 28): while the API server cannot be
reached, `/healthz` (the liveness probe, the watchdog) answers 200 on every probe, `/readyz` fails
once the outage outlasts `--api-unreachable-limit` (2 s here, 300 s by default) and comes back
with the server, and the same process then takes the node through an update. The 10-minute
version against the real kube-apiserver: scripts/kube/outage.py (tests/kube/test_outage.py)."""

from __future__ import annotations

import time

import pytest
from builders import ign_file, mc_object
from harness import NODE
from wire import Wire, ends_done, eventually, free_port, http_status, started_on_a

from mcd.node import annotations as ann

pytestmark = pytest.mark.allow_commands

LIMIT = 2.0
OUTAGE = 8.0  # four times the limit, and eight resyncs (--resync-interval 1) that cannot reach it
POLL = 0.2


def test_liveness_holds_through_an_outage_and_readiness_follows_the_api(wire: Wire) -> None:
    port = free_port()
    _, agent = started_on_a(
        wire, "--api-unreachable-limit", str(LIMIT), "--resync-interval", "1", metrics_url=f"127.0.0.1:{port}"
    )
    eventually(lambda: http_status(port, "/readyz") == 200, "/readyz 200", agent=agent)
    pid = agent.proc.pid if agent.proc is not None else 0
    wire.proxy.outage(True)
    wire.proxy.cut_streams()
    samples: list[tuple[float, int, int]] = []
    began = time.monotonic()
    # the outage's length is what is measured: probes every POLL seconds until it is over
    while (t := time.monotonic() - began) < OUTAGE:
        samples.append((round(t, 1), http_status(port, "/healthz"), http_status(port, "/readyz")))
        time.sleep(POLL)
    assert agent.log.count("cannot reach the API server") >= 1
    wire.proxy.outage(False)
    assert [s for s in samples if s[1] != 200] == [], samples  # alive all along
    assert any(r == 503 for _, _, r in samples), samples  # not ready while the API was away
    # probed all along (how often depends on the machine's load), not once at either end
    assert len(samples) >= 5 and samples[0][0] < 1 and samples[-1][0] >= OUTAGE - 2, samples
    eventually(lambda: http_status(port, "/readyz") == 200, "/readyz 200 again", agent=agent)
    # and the process that lived through it still works
    wire.cluster.add_mc(mc_object("rendered-worker-b", files=[ign_file("/etc/mcd-test/a.conf", "a=2\n")]))
    wire.cluster.patch_node(NODE, {"metadata": {"annotations": {ann.DESIRED_CONFIG: "rendered-worker-b"}}})
    ends_done(wire, agent, "rendered-worker-b", timeout=120.0)
    assert agent.proc is not None and agent.proc.pid == pid and http_status(port, "/healthz") == 200
    assert agent.stop() == 0
