"""Real kubectl against the stand-in: each command prints what it prints on a real cluster."""

from __future__ import annotations

import json
import queue
import re
import threading
from pathlib import Path

import pytest
import yaml
from mcd_sim.apiserver import ApiServer
from simkube import Kubectl

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


MACHINE_CONFIG = """\
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 99-worker-ssh
  labels:
    machineconfiguration.openshift.io/role: worker
spec:
  config:
    ignition:
      version: 3.4.0
    passwd:
      users:
      - name: core
        sshAuthorizedKeys: ["ssh-ed25519 AAAA core@example"]
"""

MACHINE_CONFIGURATION = """\
apiVersion: operator.openshift.io/v1
kind: MachineConfiguration
metadata:
  name: cluster
spec:
  logLevel: Normal
  operatorLogLevel: Normal
  nodeDisruptionPolicy:
    files:
    - path: /etc/my-app.conf
      actions:
      - type: Restart
        restart:
          serviceName: my-app.service
"""


CREATE_CASES = {
    "machineconfig": (MACHINE_CONFIG, "machineconfig.machineconfiguration.openshift.io/99-worker-ssh created",
                      "mc", "99-worker-ssh"),
    "machineconfiguration": (MACHINE_CONFIGURATION,
                             "machineconfiguration.operator.openshift.io/cluster created",
                             "machineconfigurations.operator.openshift.io", "cluster"),
}  # fmt: skip


@pytest.mark.parametrize("case", CREATE_CASES)
def test_create_from_file_and_get(sim: ApiServer, kubectl: Kubectl, tmp_path: Path, case: str) -> None:
    text, created, resource, name = CREATE_CASES[case]
    manifest = tmp_path / "obj.yaml"
    manifest.write_text(text)
    proc = kubectl.run("create", "-f", str(manifest))  # validation on: the server-side kind
    assert (proc.stdout, proc.stderr) == (created + "\n", "")
    again = kubectl.run("create", "-f", str(manifest), check=False)
    assert again.returncode == 1
    assert "(AlreadyExists)" in again.stderr and f'"{name}" already exists' in again.stderr
    got = json.loads(kubectl("get", resource, name, "-o", "json"))
    expected = yaml.safe_load(text)
    assert got["spec"] == expected["spec"]
    assert got["metadata"]["generation"] == 1
    table = kubectl("get", resource, name).splitlines()
    assert table[1].split()[0] == name


def test_patch_status_subresource(sim: ApiServer, kubectl: Kubectl) -> None:
    patch = '{"status":{"conditions":[{"type":"Ready","status":"False","reason":"KubeletNotReady"}]}}'
    out = kubectl("patch", "node", "worker-1", "--subresource=status", "--type", "strategic", "-p", patch)
    assert out == "node/worker-1 patched\n"
    node = sim.get("Node", "worker-1")
    assert node is not None
    conditions = {c["type"]: c["status"] for c in node["status"]["conditions"]}
    assert conditions["Ready"] == "False" and conditions["MemoryPressure"] == "False"  # merged by type
    assert re.search(r"worker-1\s+NotReady\s+worker", kubectl("get", "nodes"))
    # a status write through the main resource is ignored, as kube-apiserver does
    kubectl("patch", "node", "worker-1", "--type", "merge", "-p", '{"status":{"phase":"Gone"}}')
    node = sim.get("Node", "worker-1")
    assert node is not None and "phase" not in node["status"]
    ready_again = [
        {**c, "status": "True"} if c["type"] == "Ready" else c for c in node["status"]["conditions"]
    ]
    sim.patch("Node", "worker-1", {"status": {"conditions": ready_again}}, status=True)


def test_invalid_name_is_422(kubectl: Kubectl, tmp_path: Path) -> None:
    manifest = tmp_path / "bad.yaml"
    manifest.write_text("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: Bad_Name\n")
    proc = kubectl.run("create", "-f", str(manifest), check=False)
    assert proc.returncode == 1
    assert proc.stderr.startswith(
        'The Namespace "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123'
    )
