"""Leadership that fences writes (issue 26 item 5, B5): two `mcd pool-controller` processes, the
leader frozen (SIGSTOP) with a change on its way to it (the pool's unpause, in its watch's
stream), for longer than the lease. The other replica takes over and the cluster moves on; when the
frozen one is thawed (SIGCONT) it writes nothing from what it read and exits, as upstream's
controller exits when it loses the lease. Never more than maxUnavailable nodes unavailable."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes import FakeDaemons, Recorder, add_nodes, mc, pool
from mcd_sim.apiserver import ApiServer
from procs import ControllerProcs

from mcd.controller import rollout
from mcd.controller.run import ControllerOptions, PoolController
from mcd.kube.client import KubeClient
from mcd.kube.lease import LeaderElector, LeaseSettings

pytestmark = pytest.mark.allow_commands

BOOT = "rendered-worker-boot"
NS, LEASE = "openshift-machine-config-operator", "machine-config-controller"
ZONE = "topology.kubernetes.io/zone"


@pytest.fixture
def procs(kubeconfig: Path, tmp_path: Path) -> Iterator[ControllerProcs]:
    p = ControllerProcs(kubeconfig, tmp_path)
    yield p
    p.stop_all()


def holder(sim: ApiServer) -> str:
    return str(((sim.get("Lease", LEASE, NS) or {}).get("spec") or {}).get("holderIdentity", ""))


def target(sim: ApiServer) -> str:
    return rollout.pool_target(sim.get("MachineConfigPool", "worker") or {})


def rolled_out(sim: ApiServer) -> bool:
    p = sim.get("MachineConfigPool", "worker") or {}
    done = ((p.get("status") or {}).get("configuration") or {}).get("name", "")
    return (
        bool(target(sim))
        and done == target(sim)
        and all(rollout.is_updated(n, target(sim)) for n in sim.objects("Node"))
    )


def test_a_leader_frozen_mid_pass_past_its_lease_writes_nothing_more_and_exits(
    sim: ApiServer, procs: ControllerProcs
) -> None:
    sim.put(mc("00-worker"))
    sim.put(pool())
    add_nodes(sim, 4, BOOT)
    record = Recorder(sim)
    with FakeDaemons(sim):
        a = procs.start("a")
        sim.wait_for(lambda: rolled_out(sim), timeout=60)
        first = target(sim)
        procs.start("b")
        # a new config, rendered while the pool is paused: the pass after the unpause moves a node
        sim.patch("MachineConfigPool", "worker", {"spec": {"paused": True}})
        sim.put(mc("50-extra"))
        sim.wait_for(lambda: target(sim) not in ("", first), timeout=30)
        second = target(sim)
        # a is stopped, then the pool unpaused: on waking, a reads the unpause (and, after it, all
        # that happened meanwhile) from its watch and would target worker-0 at once
        os.kill(a.pid, signal.SIGSTOP)
        sim.patch("MachineConfigPool", "worker", {"spec": {"paused": False}})
        # while a sleeps, a zone makes worker-3 the first to go for b
        sim.patch("Node", "worker-3", {"metadata": {"labels": {ZONE: "a"}}})
        sim.wait_for(lambda: holder(sim) == "b", timeout=30)
        sim.wait_for(lambda: ("worker-3", second) in record.targeted, timeout=30)
        os.kill(a.pid, signal.SIGCONT)
        sim.wait_for(lambda: a.poll() is not None or record.max_unavailable > 1, timeout=30)
        assert record.max_unavailable == 1
        assert a.wait(30) == 1
        sim.wait_for(lambda: rolled_out(sim), timeout=60)
    assert "leadership of openshift-machine-config-operator/machine-config-controller lost" in procs.log("a")
    assert record.max_unavailable == 1
    moved = [n for n, config in record.targeted if config == second]
    assert sorted(moved) == [f"worker-{i}" for i in range(4)]  # each node moved once, by b
    assert holder(sim) == "b"


def test_the_lease_is_renewed_through_a_pass_longer_than_the_lease(sim: ApiServer, kubeconfig: Path) -> None:
    sim.put(mc("00-worker"))
    sim.put(pool())
    add_nodes(sim, 1, BOOT)
    settings = LeaseSettings(NS, LEASE, "a", duration=3, renew_deadline=2, retry_period=0.5)
    api, other_api = (KubeClient.from_kubeconfig(str(kubeconfig)) for _ in range(2))
    controller = PoolController(api, ControllerOptions(settings, interval=0.2))
    other = LeaderElector(other_api, LeaseSettings(NS, LEASE, "b", duration=3, renew_deadline=2))
    stop = threading.Event()
    thread = threading.Thread(target=controller.run, args=(stop,), daemon=True)
    try:
        # the first write of the leader's work (to its node) is stuck for 5 s: longer than the lease
        slow = sim.faults.delay(5.0, times=1, verb="patch", resource="nodes")
        thread.start()
        sim.wait_for(lambda: holder(sim) == "a", timeout=30)
        sim.wait_for(lambda: slow.hits == 1, timeout=30)
        deadline = time.monotonic() + 4.5
        while time.monotonic() < deadline:
            assert other.tick() is False, "the other replica took the lease of a leader in a long pass"
            stop.wait(0.5)
        assert controller.elector.leading and not controller.lost.is_set()
    finally:
        stop.set()
        thread.join(30)
        api.close()
        other_api.close()
