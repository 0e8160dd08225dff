"""The node's MachineConfigNode through an update, as the agent (and the controller stand-in, for
the drain handshake) report it: the phases in order, the final state, a Degraded node, kubectl."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from harness import NODE, Agent, config_a, done_on, in_state, make_root
from mcd_sim.apiserver.store import WatchEvent
from simcluster import Cluster

from mcd.node import annotations as ann

pytestmark = pytest.mark.allow_commands

Obj = dict[str, Any]
A, B = "rendered-worker-a", "rendered-worker-b"


def _conditions(obj: Obj | None) -> dict[str, Obj]:
    return {c["type"]: c for c in ((obj or {}).get("status") or {}).get("conditions") or []}


class Phases:
    """The (type, status) pairs each commit of the node's MCN changed, in commit order."""

    def __init__(self, cluster: Cluster) -> None:
        self.commits: list[set[tuple[str, str]]] = []
        cluster.sim.store.add_hook(self._record)

    def _record(self, event: WatchEvent) -> None:
        if event.obj.get("kind") != "MachineConfigNode" or event.obj["metadata"]["name"] != NODE:
            return
        before, after = _conditions(event.old), _conditions(event.obj)
        changed = {(kind, c["status"]) for kind, c in after.items()
                   if kind not in before or (before[kind]["status"], before[kind]["message"])
                   != (c["status"], c["message"])}  # fmt: skip
        if changed:
            self.commits.append(changed)

    def assert_in_order(self, *expected: tuple[str, str]) -> None:
        """Each pair changed in a commit no earlier than the previous pair's (the same one allowed:
        a phase and its step are one write)."""
        at = 0
        for pair in expected:
            found = next((i for i in range(at, len(self.commits)) if pair in self.commits[i]), None)
            assert found is not None, f"{pair} not seen after commit {at} of {self.commits}"
            at = found


def _mcn(cluster: Cluster) -> Obj:
    obj = cluster.sim.get("MachineConfigNode", NODE)
    assert obj is not None
    return obj


def _setup(cluster: Cluster, tmp_path: Path, desired: str = A) -> Path:
    a = config_a()
    b = dict(config_a(), metadata={"name": B})
    b["spec"] = dict(b["spec"], kernelArguments=["nosmt"])  # a reboot, hence a drain
    root = make_root(tmp_path, a)
    cluster.add_mc(a)
    cluster.add_mc(b)
    cluster.answer_drains()
    cluster.add_node(NODE, {ann.CURRENT_CONFIG: A, ann.DESIRED_CONFIG: desired, ann.STATE: "Done"})
    return root


def _mcn_updated(cluster: Cluster, config: str) -> Callable[[], bool]:
    def pred() -> bool:
        obj = cluster.sim.get("MachineConfigNode", NODE)
        c = _conditions(obj).get("Updated")
        version = ((obj or {}).get("status") or {}).get("configVersion") or {}
        return c is not None and c["status"] == "True" and version.get("current") == config

    return pred


def test_an_update_reports_its_phases_in_order_and_ends_updated(
    cluster: Cluster, start_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    root = _setup(cluster, tmp_path)
    phases = Phases(cluster)
    start_agent(cluster, root)
    cluster.wait(_mcn_updated(cluster, A), "the MCN of the node at rest")
    cluster.patch_node(NODE, {"metadata": {"annotations": {ann.DESIRED_CONFIG: B}}})
    cluster.wait_node(NODE, done_on(B), timeout=30)
    cluster.wait(_mcn_updated(cluster, B), "the MCN after the update", timeout=10)

    phases.assert_in_order(
        ("Updated", "False"),  # the node needs an update
        ("UpdatePrepared", "True"),
        ("Cordoned", "True"),  # the drain handshake, reported by the controller stand-in
        ("Drained", "Unknown"),
        ("Drained", "True"),
        ("AppliedFilesAndOS", "Unknown"),
        ("AppliedFilesAndOS", "True"),
        ("UpdateExecuted", "True"),
        ("RebootedNode", "Unknown"),  # the reboot is asked for
        ("RebootedNode", "True"),  # and seen after it
        ("Resumed", "True"),
        ("Uncordoned", "True"),
        ("UpdateComplete", "True"),
        ("Updated", "True"),
    )
    obj = _mcn(cluster)
    spec = {"node": {"name": NODE}, "pool": {"name": "worker"}, "configVersion": {"desired": B}}
    assert obj["spec"] == spec
    assert obj["status"]["configVersion"] == {"current": B, "desired": B}
    conditions = _conditions(obj)
    assert conditions["Updated"]["reason"] == "Updated"
    # Updated put every phase of the update back to False, saying which update it belonged to
    phases = ("UpdatePrepared", "UpdateExecuted", "Drained", "AppliedFilesAndOS", "RebootedNode", "Resumed")
    for kind in phases:
        assert conditions[kind]["status"] == "False", conditions[kind]
        assert conditions[kind]["message"].startswith(f"During the update to {B}: "), conditions[kind]
    assert conditions["Drained"]["reason"] == "UpdateExecutedDrained"
    assert conditions["AppliedFilesAndOS"]["reason"] == "UpdateExecutedAppliedFilesAndOS"
    # False since the first Done (a report that says it again writes nothing, as upstream's)
    assert conditions["NodeDegraded"]["status"] == "False"
    assert conditions["PinnedImageSetsDegraded"]["reason"] == "NotYetOccurred"


def test_a_degraded_node_reports_nodedegraded_and_the_pool_counts_it_from_the_mcn(
    cluster: Cluster, start_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    root = _setup(cluster, tmp_path)
    start_agent(cluster, root)
    cluster.wait(_mcn_updated(cluster, A), "the MCN of the node at rest")
    assert cluster.controller is not None
    cluster.controller.set_desired_config("rendered-worker-gone")  # the pool too
    cluster.wait_node(NODE, in_state("Degraded"))

    def degraded() -> bool:
        c = _conditions(cluster.sim.get("MachineConfigNode", NODE)).get("NodeDegraded")
        return c is not None and c["status"] == "True"

    cluster.wait(degraded, "NodeDegraded=True")
    c = _conditions(_mcn(cluster))["NodeDegraded"]
    assert c["reason"] == "NodeDegraded"
    assert c["message"].startswith(f"Node {NODE} failed to update: ")
    assert "rendered-worker-gone" in c["message"] and "not found" in c["message"]

    def pool_degraded() -> bool:
        pool = cluster.sim.get("MachineConfigPool", "worker") or {}
        return (pool.get("status") or {}).get("degradedMachineCount") == 1

    cluster.wait(pool_degraded, "the pool to count the degraded node")
    pool = cluster.sim.get("MachineConfigPool", "worker") or {}
    node_degraded = next(x for x in pool["status"]["conditions"] if x["type"] == "NodeDegraded")
    assert node_degraded["status"] == "True" and c["message"] in node_degraded["message"]

    # the admin points the node back at a config that exists: the node recovers
    cluster.controller.set_desired_config(A)
    cluster.wait_node(NODE, done_on(A))
    cluster.wait(lambda: not degraded(), "NodeDegraded=False")
    cluster.wait(_mcn_updated(cluster, A), "Updated=True again")
    cluster.wait(lambda: not pool_degraded(), "the pool to be healthy again")


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")
def test_kubectl_get_mcn_shows_the_phases(
    cluster: Cluster, start_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    root = _setup(cluster, tmp_path, desired=B)
    start_agent(cluster, root)
    cluster.wait_node(NODE, done_on(B), timeout=30)
    cluster.wait(_mcn_updated(cluster, B), "the MCN after the update", timeout=10)
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubectl.kubeconfig")

    def kubectl(*args: str) -> list[list[str]]:
        out = subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), *args],
                             capture_output=True, check=True, timeout=30)  # fmt: skip
        return [line.split() for line in out.stdout.decode().splitlines()]

    header, row = kubectl("get", "mcn")
    assert header == ["NAME", "POOLNAME", "DESIREDCONFIG", "CURRENTCONFIG", "UPDATED", "AGE"]
    assert row[:5] == [NODE, "worker", B, B, "True"]
    header, row = kubectl("get", "machineconfignodes", NODE, "-o", "wide")
    assert header[6:] == ["UPDATEPREPARED", "UPDATEEXECUTED", "UPDATEPOSTACTIONCOMPLETE", "UPDATECOMPLETE",
                          "RESUMED", "UPDATEDFILESANDOS", "CORDONEDNODE", "DRAINEDNODE", "REBOOTEDNODE",
                          "UNCORDONEDNODE"]  # fmt: skip
    assert row[4] == "True" and row[6:] == ["False"] * 10
    jsonpath = '{.status.conditions[?(@.type=="NodeDegraded")].status}'
    assert kubectl("get", "mcn", NODE, "-o", f"jsonpath={jsonpath}") == [["False"]]
