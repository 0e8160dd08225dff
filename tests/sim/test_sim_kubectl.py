"""Real kubectl against the stand-in: each command prints what it prints on a real cluster."""

from __future__ import annotations

import json
import queue
import re
import threading

import pytest
from conftest import Kubectl

from mcd.sim.apiserver import ApiServer

pytestmark = pytest.mark.allow_commands

AGE = r"\d+(s|m\d*s?)"


def test_get_nodes_prints_the_node_table(sim: ApiServer, kubectl: Kubectl) -> None:
    proc = kubectl.run("get", "nodes")
    lines = proc.stdout.splitlines()
    assert re.fullmatch(r"NAME\s+STATUS\s+ROLES\s+AGE\s+VERSION", lines[0])
    assert re.fullmatch(rf"worker-0\s+Ready\s+worker\s+{AGE}\s+v1\.31\.6", lines[1])
    assert proc.stderr == ""  # no discovery or deprecation warnings


def test_annotate_label_and_read_back(sim: ApiServer, kubectl: Kubectl) -> None:
    assert kubectl("annotate", "node", "worker-0", "machineconfiguration.openshift.io/state=Done") == (
        "node/worker-0 annotated\n"
    )
    assert kubectl("label", "node", "worker-0", "pool=a") == "node/worker-0 labeled\n"
    annotations = json.loads(kubectl("get", "node", "worker-0", "-o", "jsonpath={.metadata.annotations}"))
    assert annotations["machineconfiguration.openshift.io/state"] == "Done"
    node = sim.get("Node", "worker-0")
    assert node is not None and node["metadata"]["labels"]["pool"] == "a"
    overwrite = kubectl.run("label", "node", "worker-0", "pool=b", check=False)
    assert overwrite.returncode == 1
    assert "'pool' already has a value (a), and --overwrite is false" in overwrite.stderr


@pytest.mark.parametrize(
    ("kind", "patch", "key"),
    [
        ("merge", '{"metadata":{"annotations":{"m":"1"}}}', "m"),
        ("json", '[{"op":"add","path":"/metadata/annotations/j","value":"1"}]', "j"),
        ("strategic", '{"metadata":{"annotations":{"s":"1"}}}', "s"),
    ],
)
def test_patch_types(sim: ApiServer, kubectl: Kubectl, kind: str, patch: str, key: str) -> None:
    assert kubectl("patch", "node", "worker-1", "--type", kind, "-p", patch) == "node/worker-1 patched\n"
    node = sim.get("Node", "worker-1")
    assert node is not None and node["metadata"]["annotations"][key] == "1"
    again = kubectl("patch", "node", "worker-1", "--type", kind, "-p", patch)
    assert again == "node/worker-1 patched (no change)\n"


def test_cordon_and_uncordon(sim: ApiServer, kubectl: Kubectl) -> None:
    assert kubectl("cordon", "worker-1") == "node/worker-1 cordoned\n"
    node = sim.get("Node", "worker-1")
    assert node is not None and node["spec"]["unschedulable"] is True
    assert re.search(r"worker-1\s+Ready,SchedulingDisabled\s+worker", kubectl("get", "nodes"))
    assert kubectl("cordon", "worker-1") == "node/worker-1 already cordoned\n"
    assert kubectl("uncordon", "worker-1") == "node/worker-1 uncordoned\n"
    node = sim.get("Node", "worker-1")
    assert node is not None and not node["spec"].get("unschedulable")


def test_get_events_by_involved_object(sim: ApiServer, kubectl: Kubectl) -> None:
    for n, node in enumerate(("worker-0", "worker-1")):
        sim.put({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{node}.{n}", "namespace": "openshift-machine-config-operator"},
            "involvedObject": {"kind": "Node", "name": node, "apiVersion": "v1"},
            "reason": "Drain", "message": f"Draining node {node} to update config.", "type": "Normal",
            "source": {"component": "machineconfigdaemon", "host": node}, "count": 1,
        })  # fmt: skip
    out = kubectl("get", "events", "-n", "openshift-machine-config-operator", "--field-selector",
                  "involvedObject.name=worker-1")  # fmt: skip
    lines = out.splitlines()
    assert re.fullmatch(r"LAST SEEN\s+TYPE\s+REASON\s+OBJECT\s+MESSAGE", lines[0])
    assert len(lines) == 2
    expected = rf"{AGE}\s+Normal\s+Drain\s+node/worker-1\s+Draining node worker-1 to update config\."
    assert re.fullmatch(expected, lines[1])


def test_get_nodes_watch_sees_a_change(sim: ApiServer, kubectl: Kubectl) -> None:
    lines: queue.SimpleQueue[str] = queue.SimpleQueue()
    with kubectl.popen("get", "nodes", "-w") as proc:
        stdout = proc.stdout
        assert stdout is not None
        reader = threading.Thread(target=lambda: [lines.put(line) for line in stdout], daemon=True)
        reader.start()
        try:
            header = lines.get(timeout=20)
            assert header.split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
            assert {lines.get(timeout=10).split()[0] for _ in range(2)} == {"worker-0", "worker-1"}
            sim.patch("Node", "worker-0", {"spec": {"unschedulable": True}})
            changed = lines.get(timeout=10).split()
            assert changed[:3] == ["worker-0", "Ready,SchedulingDisabled", "worker"]
        finally:
            proc.terminate()
            proc.wait(timeout=10)
            reader.join(timeout=10)
            sim.patch("Node", "worker-0", {"spec": {"unschedulable": None}})
