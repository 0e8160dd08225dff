"""A replicated workload for fleet simulations: the ReplicaSet controller, the scheduler and the
kubelet's start-up time in one small stand-in, so that a drain has pods to evict and a
PodDisruptionBudget has something to protect.

`replicas` pods labelled `app=<name>`, owned by a ReplicaSet (so drain evicts them rather than
deleting them as unmanaged), with a one-second grace period. A pod that is terminating or gone
is replaced at once on the schedulable node with the fewest of the workload's pods; the new pod
is Pending and becomes Running and Ready `start_seconds` later (a real pod pulls and starts;
with an instant start a budget would never have to hold). It works on the server's store in
this process, like the controller stand-in: the agents stay the only REST clients.
"""

from __future__ import annotations

import time
from typing import Any

from mcd_sim.apiserver import ApiServer
from mcd_sim.apiserver.lifecycle import running_status
from mcd_sim.changeloop import ChangeLoop

Obj = dict[str, Any]
NAMESPACE = "default"
GRACE_SECONDS = 1


class Workload:
    def __init__(self, cluster: ApiServer, name: str, replicas: int, *, start_seconds: float = 2.0) -> None:
        self.cluster = cluster
        self.name = name
        self.replicas = replicas
        self.start_seconds = start_seconds
        self._ready_at: dict[str, float] = {}  # pending pod -> when its containers are up
        self._serial = 0
        self._loop = ChangeLoop(cluster.store, self.reconcile, self._wait, "sim-workload")
        self._uid = ""

    @property
    def selector(self) -> dict[str, str]:
        return {"app": self.name}

    def create(self, pdb: Obj | None = None) -> None:
        """The ReplicaSet, its pods spread over the schedulable nodes and Ready now, and the
        budget (`spec` of a PodDisruptionBudget selecting the pods) when given."""
        rs = self.cluster.put(
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {"name": self.name, "namespace": NAMESPACE, "labels": self.selector},
                "spec": {
                    "replicas": self.replicas,
                    "selector": {"matchLabels": self.selector},
                    "template": {"metadata": {"labels": self.selector}},
                },
            }
        )
        self._uid = rs["metadata"]["uid"]
        for _ in range(self.replicas):
            self._add_pod(ready=True)
        if pdb is not None:
            self.cluster.put(
                {
                    "apiVersion": "policy/v1",
                    "kind": "PodDisruptionBudget",
                    "metadata": {"name": self.name, "namespace": NAMESPACE},
                    "spec": {**pdb, "selector": {"matchLabels": self.selector}},
                }
            )

    def _mine(self) -> list[Obj]:
        return [
            p
            for p in self.cluster.objects("Pod", NAMESPACE)
            if (p["metadata"].get("labels") or {}).get("app") == self.name
        ]

    def _add_pod(self, *, ready: bool) -> None:
        counts = {
            n["metadata"]["name"]: 0
            for n in self.cluster.objects("Node")
            if not (n.get("spec") or {}).get("unschedulable")
        }
        if not counts:
            return  # nowhere to run: the next change (an uncordon) tries again
        for pod in self._mine():
            node = (pod.get("spec") or {}).get("nodeName")
            if node in counts and not pod["metadata"].get("deletionTimestamp"):
                counts[node] += 1
        node = min(counts, key=lambda n: (counts[n], n))
        self._serial += 1
        name = f"{self.name}-{self._serial:04d}"
        body: Obj = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": NAMESPACE,
                "labels": self.selector,
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "ReplicaSet",
                        "name": self.name,
                        "uid": self._uid,
                        "controller": True,
                    }
                ],
            },
            "spec": {
                "nodeName": node,
                "terminationGracePeriodSeconds": GRACE_SECONDS,
                "containers": [{"name": "app", "image": "registry.example.com/app:1"}],
            },
        }
        if not ready:  # with no status the server's kubelet would make it Ready at once
            body["status"] = {"phase": "Pending"}
            self._ready_at[name] = time.monotonic() + self.start_seconds
        self.cluster.put(body)

    def reconcile(self) -> None:
        """Start the pods whose time came, and replace the terminating and the gone."""
        now = time.monotonic()
        for name, at in list(self._ready_at.items()):
            if at <= now:
                del self._ready_at[name]
                pod = self.cluster.get("Pod", name, NAMESPACE)
                if pod is not None and not pod["metadata"].get("deletionTimestamp"):
                    status = running_status(pod, self.cluster.store.clock())
                    self.cluster.patch("Pod", name, {"status": status}, NAMESPACE, status=True)
        active = [p for p in self._mine() if not p["metadata"].get("deletionTimestamp")]
        for _ in range(self.replicas - len(active)):
            self._add_pod(ready=False)

    # --- background thread, as the controller stand-in's -------------------------------

    def start(self) -> Workload:
        self._loop.start()
        return self

    def stop(self) -> None:
        self._loop.stop()

    def __enter__(self) -> Workload:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def _wait(self) -> float:
        if not self._ready_at:
            return 1.0
        return max(0.0, min(self._ready_at.values()) - time.monotonic())
