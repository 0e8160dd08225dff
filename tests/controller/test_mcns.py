"""MachineConfigNodes belong to their Node (issue 29 item 4): a pass gives the agent's
MachineConfigNode an ownerReference to its Node (the garbage collector's link), and deletes the
MachineConfigNode of a node that is gone, as upstream's operator does."""

from __future__ import annotations

from fakes import add_nodes, mc, pool
from mcd_sim.apiserver import ApiServer

from mcd.controller.run import ControllerOptions, PoolController
from mcd.kube.client import KubeClient
from mcd.kube.lease import LeaseSettings
from mcd.node import machineconfignode as mcn

BOOT = "rendered-worker-boot"


def test_machineconfignodes_are_owned_by_their_node_and_go_with_it(sim: ApiServer, api: KubeClient) -> None:
    sim.put(mc("00-worker"))
    sim.put(pool())
    add_nodes(sim, 2, BOOT)
    for name in ("worker-0", "worker-1"):  # as the agents create them
        api.create_machineconfignode(mcn.new_object(name, "worker", BOOT))
    controller = PoolController(api, ControllerOptions(LeaseSettings("default", "lease", "me"), resync=0.0))
    try:
        assert controller.elector.tick()
        controller.one_pass()
        for name in ("worker-0", "worker-1"):
            node = sim.get("Node", name) or {}
            refs = (sim.get("MachineConfigNode", name) or {})["metadata"].get("ownerReferences")
            assert refs == [
                {"apiVersion": "v1", "kind": "Node", "name": name, "uid": node["metadata"]["uid"]}
            ]
        sim.delete("Node", "worker-1")
        assert controller.one_pass()
        assert sim.get("MachineConfigNode", "worker-1") is None
        assert sim.get("MachineConfigNode", "worker-0") is not None
        before = (sim.get("MachineConfigNode", "worker-0") or {})["metadata"]["resourceVersion"]
        controller.one_pass()  # nothing more to do: no write
        assert (sim.get("MachineConfigNode", "worker-0") or {})["metadata"]["resourceVersion"] == before
    finally:
        controller.elector.release()


def test_no_machineconfignode_is_deleted_when_the_nodes_cannot_be_listed(
    sim: ApiServer, api: KubeClient
) -> None:
    add_nodes(sim, 1, BOOT)
    api.create_machineconfignode(mcn.new_object("worker-0", "worker", BOOT))
    sim.faults.fail(code=503, times=None, verb="list", resource="nodes")
    controller = PoolController(api, ControllerOptions(LeaseSettings("default", "lease", "me"), resync=0.0))
    try:
        assert controller.elector.tick()
        assert controller.one_pass() is False
        assert sim.get("MachineConfigNode", "worker-0") is not None
    finally:
        sim.faults.clear()
        controller.elector.release()
