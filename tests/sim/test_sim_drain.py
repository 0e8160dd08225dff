"""`kubectl drain` against the stand-in: DaemonSet pods ignored, a PDB blocks the eviction (429)
until it allows a disruption, evicted pods terminate after their grace period."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcd_sim.apiserver import ApiServer
from simkube import Kubectl

pytestmark = pytest.mark.allow_commands


def _pod(name: str, ns: str, node: str, owner: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": {"app": owner["name"]},
            "ownerReferences": [{**owner, "controller": True, "blockOwnerDeletion": True}],
        },
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "c", "image": "registry.example/app:1"}],
            **extra,
        },
    }


@pytest.fixture(scope="module")
def drain_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    with ApiServer() as sim:
        sim.add_node("worker-0")
        ds = sim.put(
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "metadata": {
                    "name": "machine-config-daemon",
                    "namespace": "openshift-machine-config-operator",
                },
                "spec": {"selector": {"matchLabels": {"app": "machine-config-daemon"}}},
            }
        )
        rs = sim.put(
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}}},
            }
        )

        def owner(obj: dict[str, Any]) -> dict[str, Any]:
            return {
                "apiVersion": "apps/v1",
                "kind": obj["kind"],
                "name": obj["metadata"]["name"],
                "uid": obj["metadata"]["uid"],
            }

        sim.put(_pod("machine-config-daemon-x1", "openshift-machine-config-operator", "worker-0", owner(ds)))
        sim.put(
            _pod("web-1", "default", "worker-0", owner(rs), volumes=[{"name": "scratch", "emptyDir": {}}])
        )
        sim.put(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
            }
        )
        yield sim


@pytest.fixture(scope="module")
def drain_kubectl(
    drain_sim: ApiServer, kubectl: Kubectl, tmp_path_factory: pytest.TempPathFactory
) -> Kubectl:
    path: Path = drain_sim.write_kubeconfig(tmp_path_factory.mktemp("drain") / "kubeconfig")
    return Kubectl(path, kubectl.home)


def test_pdb_status_counts_healthy_pods(drain_sim: ApiServer, drain_kubectl: Kubectl) -> None:
    pdb = drain_sim.get("PodDisruptionBudget", "web", "default")
    assert pdb is not None
    status = pdb["status"]
    assert (status["currentHealthy"], status["desiredHealthy"], status["disruptionsAllowed"]) == (1, 1, 0)
    out = drain_kubectl("get", "pdb", "-n", "default").splitlines()
    assert out[0].split() == [
        "NAME",
        "MIN",
        "AVAILABLE",
        "MAX",
        "UNAVAILABLE",
        "ALLOWED",
        "DISRUPTIONS",
        "AGE",
    ]
    assert out[1].split()[:4] == ["web", "1", "N/A", "0"]


def test_drain_waits_for_the_pdb_then_completes(drain_sim: ApiServer, drain_kubectl: Kubectl) -> None:
    lines: queue.SimpleQueue[str] = queue.SimpleQueue()
    args = ("drain", "worker-0", "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=60s")
    with drain_kubectl.popen(*args) as proc:
        readers = [
            threading.Thread(
                target=lambda s=stream: [lines.put(line.rstrip("\n")) for line in s], daemon=True
            )
            for stream in (proc.stdout, proc.stderr)
            if stream is not None
        ]
        for r in readers:
            r.start()
        seen: list[str] = []
        try:
            while not any("disruption budget" in line for line in seen):
                seen.append(lines.get(timeout=30))
            drain_sim.patch("PodDisruptionBudget", "web", {"spec": {"minAvailable": 0}}, "default")
            assert proc.wait(timeout=60) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            for r in readers:
                r.join(timeout=10)
        while not lines.empty():
            seen.append(lines.get())
    assert "node/worker-0 cordoned" in seen
    assert (
        "Warning: ignoring DaemonSet-managed Pods: openshift-machine-config-operator/machine-config-daemon-x1"
        in seen
    )
    assert "evicting pod default/web-1" in seen
    assert (
        'error when evicting pods/"web-1" -n "default" (will retry after 5s): Cannot evict pod as it would '
        "violate the pod's disruption budget." in seen
    )
    assert "pod/web-1 evicted" in seen
    assert seen[-1] == "node/worker-0 drained"
    assert drain_sim.get("Pod", "web-1", "default") is None
    assert drain_sim.get("Pod", "machine-config-daemon-x1", "openshift-machine-config-operator") is not None
    node = drain_sim.get("Node", "worker-0")
    assert node is not None and node["spec"]["unschedulable"] is True
