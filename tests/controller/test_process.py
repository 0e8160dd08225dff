"""`mcd pool-controller` as processes against the stand-in API server, with fake daemons: killed
in the middle of a rollout, a second replica takes the Lease over once it expired and finishes
the rollout without passing maxUnavailable or moving a node twice; two replicas at once roll a
pool safely; SIGTERM releases the Lease."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes import FakeDaemons, Recorder, add_nodes, mc, pool
from mcd_sim.apiserver import ApiServer
from procs import REPO, ControllerProcs

from mcd.controller import rollout

pytestmark = pytest.mark.allow_commands

BOOT = "rendered-worker-boot"
NS, LEASE = "openshift-machine-config-operator", "machine-config-controller"


@pytest.fixture
def replicas(kubeconfig: Path, tmp_path: Path) -> Iterator[ControllerProcs]:
    r = ControllerProcs(kubeconfig, tmp_path)
    yield r
    r.stop_all()


def lease(sim: ApiServer) -> dict[str, object]:
    return dict((sim.get("Lease", LEASE, NS) or {}).get("spec") or {})


def rolled_out(sim: ApiServer) -> bool:
    p = sim.get("MachineConfigPool", "worker") or {}
    target = ((p.get("spec") or {}).get("configuration") or {}).get("name", "")
    done = ((p.get("status") or {}).get("configuration") or {}).get("name", "")
    return bool(target) and done == target and all(rollout.is_updated(n, target) for n in sim.objects("Node"))


def setup_pool(sim: ApiServer, nodes: int) -> Recorder:
    sim.put(mc("00-worker"))
    sim.put(pool())
    add_nodes(sim, nodes, BOOT)
    return Recorder(sim)


def test_killed_mid_rollout_another_replica_takes_over_and_finishes(
    sim: ApiServer, replicas: ControllerProcs
) -> None:
    record = setup_pool(sim, 4)
    with FakeDaemons(sim):
        a = replicas.start("a")
        sim.wait_for(lambda: len(record.targeted) >= 2, timeout=30)
        a.kill()
        a.wait(10)
        assert lease(sim)["holderIdentity"] == "a"  # killed: nothing released it
        replicas.start("b")
        sim.wait_for(lambda: rolled_out(sim), timeout=60)
    assert lease(sim)["holderIdentity"] == "b" and lease(sim)["leaseTransitions"] == 1
    assert record.max_unavailable == 1
    names = [n for n, _ in record.targeted]
    assert sorted(names) == [f"worker-{i}" for i in range(4)]  # each node moved exactly once
    assert "became the leader" in replicas.log("b")


def test_two_replicas_roll_a_pool_one_leading_and_sigterm_releases(
    sim: ApiServer, replicas: ControllerProcs
) -> None:
    record = setup_pool(sim, 3)
    with FakeDaemons(sim):
        a = replicas.start("a")
        sim.wait_for(lambda: lease(sim).get("holderIdentity") == "a", timeout=30)
        b = replicas.start("b")
        sim.wait_for(lambda: rolled_out(sim), timeout=60)
    assert lease(sim)["holderIdentity"] == "a" and lease(sim)["leaseTransitions"] == 0
    assert record.max_unavailable == 1
    assert sorted(n for n, _ in record.targeted) == ["worker-0", "worker-1", "worker-2"]
    a.send_signal(signal.SIGTERM)
    assert a.wait(15) == 0
    assert lease(sim)["holderIdentity"] in ("", "b")  # released, and perhaps taken by b already
    sim.wait_for(lambda: lease(sim).get("holderIdentity") == "b", timeout=15)
    assert "released the lease" in replicas.log("a")
    b.send_signal(signal.SIGTERM)
    assert b.wait(15) == 0
    assert lease(sim)["holderIdentity"] == ""


def test_once_passes_as_the_leader_or_fails_when_another_leads(
    sim: ApiServer, replicas: ControllerProcs, kubeconfig: Path
) -> None:
    setup_pool(sim, 1)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-m", "mcd", "pool-controller", "--kubeconfig", str(kubeconfig), "--once"]
    first = subprocess.run([*argv, "--identity", "x"], capture_output=True, text=True, env=env, check=False,
                           timeout=60)  # fmt: skip
    assert (first.returncode, first.stdout) == (0, "")
    assert ((sim.get("MachineConfigPool", "worker") or {}).get("spec") or {}).get("configuration")
    assert lease(sim)["holderIdentity"] == ""  # released at the end of the pass
    replicas.start("a")
    sim.wait_for(lambda: lease(sim).get("holderIdentity") == "a", timeout=30)
    second = subprocess.run([*argv, "--identity", "y"], capture_output=True, text=True, env=env, check=False,
                            timeout=60)  # fmt: skip
    assert second.returncode == 1
    assert (
        "the lease openshift-machine-config-operator/machine-config-controller is held by a" in second.stderr
    )
