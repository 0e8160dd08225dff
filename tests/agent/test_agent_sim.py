"""The agent against `mcd_sim.apiserver` (HTTPS, token, kube semantics), read back with real kubectl
and checked from the server's audit log."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import NODE, Agent, config_a, make_root
from mcd_sim.apiserver import ApiServer
from mcd_sim.apiserver.audit import read_events
from mcd_sim.apiserver.store import WatchEvent
from mcd_sim.controller import ControllerStandIn

from mcd.node import annotations as ann

pytestmark = [
    pytest.mark.allow_commands,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed"),
]

AGENT_UA = "machine-config-daemon/"
AGENT_KEYS = {ann.STATE, ann.REASON, ann.CURRENT_CONFIG, ann.DESIRED_DRAIN, ann.POST_CONFIG_ACTION,
              ann.CURRENT_IMAGE, ann.DESIRED_IMAGE}  # fmt: skip


# what the agent reads or writes (the certificate writer lists and watches controllerconfigs)
AGENT_RESOURCES = {"nodes", "machineconfigs", "machineconfigurations", "controllerconfigs", "events", "pods",
                   "poddisruptionbudgets", "machineconfignodes"}  # fmt: skip


def _changed(event: WatchEvent) -> set[str]:
    """The annotation keys (and `spec.unschedulable`) a node commit changed."""
    before = ((event.old or {}).get("metadata") or {}).get("annotations") or {}
    after = event.obj["metadata"].get("annotations") or {}
    keys = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    if ((event.old or {}).get("spec") or {}).get("unschedulable") != event.obj.get("spec", {}).get(
        "unschedulable"
    ):
        keys.add("spec.unschedulable")
    return keys


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[ApiServer]:
    server = ApiServer(audit_log_path=tmp_path / "audit.log").start()
    yield server
    server.stop()


def _kubectl(kubeconfig: Path, *args: str) -> str:
    out = subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), *args], capture_output=True, check=True, timeout=30
    )
    return out.stdout.decode()


def _audit(tmp_path: Path) -> list[dict[str, Any]]:
    return read_events(tmp_path / "audit.log")


def _setup(sim: ApiServer, tmp_path: Path) -> tuple[Path, Path]:
    a = config_a()
    b = dict(config_a(), metadata={"name": "rendered-worker-b"})
    b["spec"] = dict(b["spec"], kernelArguments=["nosmt"])
    root = make_root(tmp_path, a)
    sim.put(a)
    sim.put(b)
    sim.add_node(NODE)
    sim.add_node("worker-1")
    first = "rendered-worker-a"
    boot = {ann.CURRENT_CONFIG: first, ann.DESIRED_CONFIG: first, ann.STATE: "Done"}
    sim.patch("Node", NODE, {"metadata": {"annotations": boot}})
    return root, sim.write_kubeconfig(tmp_path / "kubeconfig")


def _annotation(name: str) -> Callable[[ApiServer], str]:
    return lambda sim: ((sim.get("Node", NODE) or {}).get("metadata", {}).get("annotations") or {}).get(
        name, ""
    )


def test_reboot_update_through_the_handshake_seen_by_kubectl_and_the_audit_log(
    sim: ApiServer, tmp_path: Path
) -> None:
    root, kubeconfig = _setup(sim, tmp_path)
    commits: list[WatchEvent] = []
    sim.store.add_hook(
        lambda e: (
            commits.append(e) if e.obj.get("kind") == "Node" and e.obj["metadata"]["name"] == NODE else None
        )
    )
    with ControllerStandIn(sim):
        agent = Agent(root, kubeconfig, tmp_path / "agent.log").start()
        try:
            agent.wait_log("is in config rendered-worker-a: Done")
            sim.patch("Node", NODE, {"metadata": {"annotations": {ann.DESIRED_CONFIG: "rendered-worker-b"}}})
            sim.wait_for(lambda: _annotation(ann.CURRENT_CONFIG)(sim) == "rendered-worker-b", timeout=30)
            agent.wait_log("is in config rendered-worker-b: Done")
            sim.wait_for(lambda: {"NodeDone", "Reboot"} <= {e["reason"] for e in sim.events()}, timeout=10)
            assert agent.stop() == 0
        finally:
            agent.kill()
    jsonpath = "{.metadata.annotations.machineconfiguration\\.openshift\\.io/state} {.spec.unschedulable}"
    assert _kubectl(kubeconfig, "get", "node", NODE, "-o", f"jsonpath={jsonpath}").strip() == "Done"
    selector = f"involvedObject.name={NODE}"
    ns = "openshift-machine-config-operator"
    events = json.loads(
        _kubectl(kubeconfig, "get", "events", "-n", ns, "--field-selector", selector, "-o", "json")
    )
    reasons = [e["reason"] for e in events["items"]]
    assert {"Drain", "Reboot", "NodeDone", "Uncordon"} <= set(reasons)
    assert all(e["source"]["component"] == "machineconfigdaemon" for e in events["items"])

    mine = [e for e in _audit(tmp_path) if e["userAgent"].startswith(AGENT_UA)]
    assert mine
    for e in mine:
        ref = e.get("objectRef") or {}
        # pods and budgets: listed (never changed) to name the budgets that would block the drain
        assert ref.get("resource") in AGENT_RESOURCES, e
        if ref.get("resource") == "machineconfignodes":  # its own, named after the node
            assert ref.get("name", NODE) == NODE, e
        if ref.get("resource") in {"pods", "poddisruptionbudgets"}:
            assert e["verb"] == "list"
        if ref.get("resource") == "nodes":
            assert ref.get("name", NODE) == NODE, e
            assert "worker-1" not in e["requestURI"]
            if "name" not in ref:  # a list or watch: of this node only
                assert (
                    f"metadata.name%3D{NODE}" in e["requestURI"] or f"metadata.name={NODE}" in e["requestURI"]
                )
        if ref.get("resource") == "machineconfigs":
            # the desired config read by name, or all of them watched from "now": the list that
            # gives the version to watch from names no object (`NO_OBJECT`), so it lists nothing
            if e["verb"] == "get":
                assert ref.get("name") in {"rendered-worker-a", "rendered-worker-b"}
            else:
                assert e["verb"] in {"list", "watch"} and "name" not in ref, e
                assert e["verb"] == "watch" or "metadata.name%3D-&" in e["requestURI"] + "&", e
        # update: the MachineConfigNode's spec and status (PUT, with its resourceVersion)
        assert e["verb"] in {"get", "list", "watch", "patch", "create"} or (
            e["verb"] == "update" and ref.get("resource") == "machineconfignodes"
        ), e
    # every node write of the agent changed the node: the server commits nothing for a no-op
    # write, and only the agent changes these keys (the controller writes lastAppliedDrain and
    # the cordon, the test desiredConfig)
    agent_patches = [e for e in mine if e["verb"] == "patch" and e["responseStatus"]["code"] == 200]
    agent_commits = [c for c in commits if _changed(c) & AGENT_KEYS]
    assert len(agent_commits) == len(agent_patches)
    assert all(not (_changed(c) - AGENT_KEYS) for c in agent_commits)
    states = [c.obj["metadata"].get("annotations", {}).get(ann.STATE) for c in commits]
    transitions = [s for i, s in enumerate(states) if i == 0 or s != states[i - 1]]
    assert transitions == ["Done", "Working", "Done"]


def test_builtin_drain_blocked_by_a_budget_shows_the_cordon_to_kubectl_and_names_it(
    sim: ApiServer, tmp_path: Path
) -> None:
    root, kubeconfig = _setup(sim, tmp_path)
    meta = {"name": "web-1", "namespace": "default", "labels": {"app": "web"}}
    spec = {"nodeName": NODE, "containers": [{"name": "c", "image": "x"}], "terminationGracePeriodSeconds": 1}
    sim.put({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
    sim.put({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
             "metadata": {"name": "web", "namespace": "default"},
             "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}})  # fmt: skip
    flags = ("--builtin-drainer", "--eviction-retry", "0.5")
    agent = Agent(root, kubeconfig, tmp_path / "agent.log", *flags).start()
    try:
        agent.wait_log("is in config rendered-worker-a: Done")
        sim.patch("Node", NODE, {"metadata": {"annotations": {ann.DESIRED_CONFIG: "rendered-worker-b"}}})
        blocked = "drain of node worker-0 blocked: PodDisruptionBudget default/web allows 0 disruptions"
        # a wait, not a failure: the node stays Working with the budget named
        sim.wait_for(lambda: _annotation(ann.REASON)(sim) == blocked, timeout=30)
        assert _annotation(ann.STATE)(sim) == "Working"
        assert "SchedulingDisabled" in _kubectl(kubeconfig, "get", "node", NODE)
        sim.patch("PodDisruptionBudget", "web", {"spec": {"minAvailable": 0}}, "default")
        sim.wait_for(lambda: _annotation(ann.CURRENT_CONFIG)(sim) == "rendered-worker-b"
                     and _annotation(ann.STATE)(sim) == "Done", timeout=40)  # fmt: skip
        assert "SchedulingDisabled" not in _kubectl(kubeconfig, "get", "node", NODE)
        assert sim.get("Pod", "web-1", "default") is None
    finally:
        agent.kill()
