"""What the cluster's ControllerConfig says (issue 29 items 8 and 9): the rendered config's
`osImageURL` is its base OS image unless a MachineConfig sets one, and every node is annotated
with its control plane topology (the agent skips the drain on SingleReplica). Without a
ControllerConfig, one node that is the control plane is SingleReplica, any other cluster
HighlyAvailable. And a node whose agent stopped mid-update is named on its pool (item 11)."""

from __future__ import annotations

from typing import Any

from fakes import add_nodes, mc, pool
from mcd_sim.apiserver import ApiServer

from mcd.controller.events import PoolEvents
from mcd.controller.pools import PoolSync
from mcd.kube.client import KubeClient
from mcd.node import annotations as ann

BOOT = "rendered-worker-boot"
NS = "openshift-machine-config-operator"
BASE = "quay.io/openshift/os@sha256:" + "a" * 64


def controller_config(topology: str) -> dict[str, Any]:
    infra = {"status": {"controlPlaneTopology": topology}}
    return {"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "ControllerConfig",
            "metadata": {"name": "machine-config-controller"},
            "spec": {"baseOSContainerImage": BASE, "infra": infra}}  # fmt: skip


def rendered(sim: ApiServer) -> dict[str, Any]:
    spec = (sim.get("MachineConfigPool", "worker") or {}).get("spec") or {}
    return sim.get("MachineConfig", spec["configuration"]["name"]) or {}


def topologies(sim: ApiServer) -> set[str | None]:
    return {
        (n["metadata"].get("annotations") or {}).get(ann.CONTROL_PLANE_TOPOLOGY) for n in sim.objects("Node")
    }


def test_the_base_os_image_and_topology_come_from_the_controller_config(
    sim: ApiServer, api: KubeClient
) -> None:
    sim.put(controller_config("SingleReplica"))
    sim.put(mc("00-worker"))
    sim.put(pool())
    add_nodes(sim, 2, BOOT)
    pools = PoolSync(api)
    pools.sync()
    assert rendered(sim)["spec"]["osImageURL"] == BASE
    assert topologies(sim) == {"SingleReplica"}
    # a MachineConfig that sets the image wins, as upstream's render controller
    sim.put({**mc("99-image"), "spec": {"osImageURL": "registry.example/os:custom"}})
    pools.sync()
    assert rendered(sim)["spec"]["osImageURL"] == "registry.example/os:custom"


def test_without_a_controller_config_the_topology_is_inferred(sim: ApiServer, api: KubeClient) -> None:
    sim.put(mc("00-worker"))
    sim.put(pool())
    sim.put({**pool("master"), "spec": {**pool("master")["spec"],
             "nodeSelector": {"matchLabels": {"node-role.kubernetes.io/master": ""}}}})  # fmt: skip
    sim.put(mc("00-master", role="master"))
    sim.add_node("sno", **{"node-role.kubernetes.io/master": "", "node-role.kubernetes.io/worker": ""})
    pools = PoolSync(api)
    pools.sync()
    assert topologies(sim) == {"SingleReplica"}
    assert rendered(sim)["spec"]["osImageURL"] == ""
    add_nodes(sim, 1, BOOT, **{"node-role.kubernetes.io/worker": ""})
    pools.sync()
    assert topologies(sim) == {"HighlyAvailable"}


def test_a_node_whose_agent_stopped_mid_update_is_named_on_the_pool(sim: ApiServer, api: KubeClient) -> None:
    sim.put(mc("00-worker"))
    sim.put(pool())
    add_nodes(sim, 2, BOOT)
    now = [1000.0]
    pools = PoolSync(api, events=PoolEvents(api, NS), clock=lambda: now[0])
    pools.sync()  # worker-0 is asked to move; its agent never answers (killed)
    pools.sync()
    target = (sim.get("MachineConfigPool", "worker") or {})["spec"]["configuration"]["name"]
    now[0] += 899
    pools.sync()
    assert stalled(sim) == []
    now[0] += 2
    pools.sync()
    pools.sync()
    assert stalled(sim) == [
        f"Node worker-0 has made no progress toward {target} for 901s (state Done): "
        "is its machine-config daemon running?"
    ]


def stalled(sim: ApiServer) -> list[str]:
    return [e["message"] for e in sim.objects("Event", NS) if e.get("reason") == "NodeStalled"]
