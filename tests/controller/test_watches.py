"""The pool controller on watches (issue 29 item 7): an idle controller reads nothing (its caches
are kept by watches; its resyncs read them), a change reaches it through a watch, and an
informer whose watch expires lists again and misses nothing."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes import FakeDaemons, add_nodes, mc, pool
from mcd_sim.apiserver import ApiServer
from mcd_sim.apiserver.faults import RequestFacts, Rule

from mcd.controller import rollout
from mcd.controller.run import ControllerOptions, PoolController
from mcd.kube.client import KubeClient
from mcd.kube.informer import Informer
from mcd.kube.lease import LeaseSettings

BOOT = "rendered-worker-boot"
NS, LEASE = "openshift-machine-config-operator", "machine-config-controller"


class Requests:
    """Every request the stand-in takes, as `verb resource`."""

    def __init__(self, sim: ApiServer) -> None:
        self.seen: list[str] = []
        self._take = sim.faults.take
        sim.faults.take = self._on_request  # type: ignore[method-assign]

    def _on_request(self, req: RequestFacts) -> list[Rule]:
        self.seen.append(f"{req.verb} {req.resource}")
        return self._take(req)


@pytest.fixture
def controller(sim: ApiServer, kubeconfig: Path) -> Iterator[PoolController]:
    api = KubeClient.from_kubeconfig(str(kubeconfig))
    lease = LeaseSettings(NS, LEASE, "a", duration=6, renew_deadline=4, retry_period=0.5)
    c = PoolController(api, ControllerOptions(lease, interval=0.05))
    stop = threading.Event()
    thread = threading.Thread(target=c.run, args=(stop,), daemon=True)
    thread.start()
    yield c
    stop.set()
    thread.join(30)
    api.close()


def target(sim: ApiServer) -> str:
    return rollout.pool_target(sim.get("MachineConfigPool", "worker") or {})


def updated(sim: ApiServer) -> bool:
    p = sim.get("MachineConfigPool", "worker") or {}
    target = rollout.pool_target(p)
    done = ((p.get("status") or {}).get("configuration") or {}).get("name", "")
    return bool(target) and done == target and all(rollout.is_updated(n, target) for n in sim.objects("Node"))


def test_an_idle_controller_reads_nothing_and_a_change_reaches_it_by_watch(
    sim: ApiServer, controller: PoolController
) -> None:
    sim.put(mc("00-worker"))
    sim.put(pool())
    add_nodes(sim, 3, BOOT)
    with FakeDaemons(sim):
        sim.wait_for(lambda: updated(sim), timeout=60)
        first = target(sim)
        requests = Requests(sim)
        handled = controller.work.handled
        # many resyncs (every pool looked at again every 0.05 s), all from the caches
        sim.wait_for(lambda: controller.work.handled >= handled + 40, timeout=30)
        # (a watch the server ends is opened again from its resourceVersion: that is no read)
        reads = [r for r in requests.seen if r.split()[0] in ("get", "list") and "leases" not in r]
        assert reads == []
        sim.put(mc("50-extra"))  # seen by the MachineConfigs' watch: rendered and rolled out
        sim.wait_for(lambda: updated(sim) and target(sim) != first, timeout=60)
    # the only lists: each draining node's pods, by the informer its drain starts
    assert [r for r in requests.seen if r.startswith("list ")] == ["list pods"] * 3


def test_an_expired_watch_is_listed_again_and_misses_nothing(sim: ApiServer, api: KubeClient) -> None:
    add_nodes(sim, 2)
    seen: dict[str, bool] = {}
    informer = Informer(api, "nodes", changed=lambda key, obj: seen.__setitem__(key, obj is not None))
    requests = Requests(sim)
    sim.faults.expire(times=1, resource="nodes")  # the first watch is answered 410 Gone
    informer.start()
    try:
        sim.wait_for(lambda: requests.seen.count("watch nodes") == 2, timeout=30)
        assert seen == {"worker-0": True, "worker-1": True}
        sim.delete("Node", "worker-0")
        sim.add_node("worker-9")
        sim.wait_for(lambda: seen == {"worker-0": False, "worker-1": True, "worker-9": True}, timeout=30)
        assert requests.seen.count("list nodes") == 2  # the first list, and the one after the 410
        assert sorted(o["metadata"]["name"] for o in informer.items()) == ["worker-1", "worker-9"]
    finally:
        informer.stop()
