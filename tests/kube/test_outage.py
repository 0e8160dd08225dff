"""Liveness through an API server outage, on the real server (issue 28): the agent's `/healthz`
never fails while kube-apiserver is away, `/readyz` does once the outage outlasts
`--api-unreachable-limit`, and the same process converges afterwards. Shortened here (a 5 s
limit, a 25 s outage); `python scripts/kube/outage.py` runs the 10-minute proof with the
default limit (tests/kube/outage.py does the work for both)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import record_figure
from outage import Outage, run_outage
from realcluster import RealCluster, build_apiserver

pytestmark = pytest.mark.allow_commands

LIMIT = 5.0
OUTAGE = 25.0


@pytest.fixture(scope="module")
def outage(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Outage]:
    # a control plane of its own: the scenario creates the pool, the workload's namespace and
    # MachineConfiguration/cluster, which the session's cluster already has after test_deployed
    own = RealCluster(build_apiserver(), keep=os.environ.get("MCD_KUBE_KEEP") == "1")
    own.start()
    try:
        work: Path = tmp_path_factory.mktemp("outage")
        yield run_outage(own, work, outage_seconds=OUTAGE, poll_seconds=1.0, unreachable_limit=LIMIT)
    finally:
        own.stop()


def test_liveness_holds_through_the_outage_and_readiness_says_so(outage: Outage) -> None:
    record_figure(
        f"outage {outage.outage_seconds:.0f} s: {len(outage.samples)} probes, /readyz 503 after "
        f"{outage.readyz_failed_after or 0:.1f} s, 200 again {outage.readyz_back_after:.1f} s after the "
        f"server's start; the next change Done in {outage.converged_after:.1f} s"
    )
    assert outage.outage_seconds >= OUTAGE
    assert len(outage.samples) >= OUTAGE / 2  # probed all along, not once at the end
    assert outage.healthz_failures() == []
    assert outage.readyz_failed_after is not None
    # the limit runs from the end of the agent's watch (the API was reached while it was open),
    # so readiness fails neither as the outage begins nor long after the limit (one probe apart)
    # (times from the SIGTERM; the server answers some requests while it drains, until it exits)
    assert LIMIT - 1.5 <= outage.readyz_failed_after <= outage.stopped_after + LIMIT + 10, outage.samples


def test_the_same_agent_converges_after_it(outage: Outage) -> None:
    assert outage.agent_exit is None
    assert outage.agent_pid_after == outage.agent_pid_before
    assert outage.converged_after > 0
