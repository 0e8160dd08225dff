"""A pool of nodes for the controller to roll, fake daemons that play the agent's side of an
update, a ReplicaSet stand-in, and a recorder of what the cluster went through."""

from __future__ import annotations

import contextlib
import queue
import threading
from dataclasses import dataclass, field
from typing import Any

from mcd_sim.apiserver import ApiServer
from mcd_sim.apiserver.lifecycle import pod_ready
from mcd_sim.apiserver.store import WatchEvent

from mcd.controller import rollout
from mcd.node import annotations as ann

Obj = dict[str, Any]
P = "machineconfiguration.openshift.io/"
DESIRED_DRAIN, LAST_APPLIED_DRAIN = P + "desiredDrain", P + "lastAppliedDrain"
ROLE = P + "role"


def mc(name: str, role: str = "worker", **spec: Any) -> Obj:
    files = [{"path": f"/etc/{name}.conf", "contents": {"source": "data:,x"}, "mode": 420}]
    return {"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
            "metadata": {"name": name, "labels": {ROLE: role}},
            "spec": {"config": {"ignition": {"version": "3.4.0"}, "storage": {"files": files}},
                     **spec}}  # fmt: skip


def pool(name: str = "worker", **spec: Any) -> Obj:
    return {"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
            "metadata": {"name": name},
            "spec": {"machineConfigSelector": {"matchLabels": {ROLE: name}},
                     "nodeSelector": {"matchLabels": {f"node-role.kubernetes.io/{name}": ""}},
                     "paused": False, **spec}}  # fmt: skip


def add_nodes(sim: ApiServer, count: int, config: str = "", **labels: str) -> list[str]:
    names = []
    for i in range(count):
        name = f"worker-{i}"
        sim.add_node(name, **labels)
        if config:
            done = {ann.CURRENT_CONFIG: config, ann.DESIRED_CONFIG: config, ann.STATE: "Done"}
            sim.patch("Node", name, {"metadata": {"annotations": done}})
        names.append(name)
    return names


def _ann(node: Obj) -> dict[str, str]:
    return dict(node["metadata"].get("annotations") or {})


def agent_step(sim: ApiServer, name: str) -> bool:
    """One move of the node's daemon, as mcd's agent makes them (True when it wrote something):
    Working and a drain request, then the config applied and an uncordon request, then Done."""
    a = _ann(sim.get("Node", name) or {})
    desired, current = a.get(ann.DESIRED_CONFIG, ""), a.get(ann.CURRENT_CONFIG, "")
    state = a.get(ann.STATE, "Done")
    patch: dict[str, str] = {}
    if desired and desired != current and state == "Done":
        patch = {ann.STATE: "Working", DESIRED_DRAIN: f"drain-{desired}"}
    elif state == "Working" and desired != current and a.get(LAST_APPLIED_DRAIN) == f"drain-{desired}":
        patch = {ann.CURRENT_CONFIG: desired, DESIRED_DRAIN: f"uncordon-{desired}"}
    elif state == "Working" and desired == current and a.get(LAST_APPLIED_DRAIN) == f"uncordon-{desired}":
        patch = {ann.STATE: "Done"}
    if patch:
        sim.patch("Node", name, {"metadata": {"annotations": patch}})
    return bool(patch)


@dataclass
class Replicas:
    """A ReplicaSet's part: keep `count` pods labelled app=`app`, on schedulable nodes."""

    sim: ApiServer
    app: str
    count: int
    namespace: str = "shop"
    made: int = 0

    def __post_init__(self) -> None:
        if self.sim.get("Namespace", self.namespace) is None:
            self.sim.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}})

    def pods(self) -> list[Obj]:
        return [p for p in self.sim.objects("Pod", self.namespace)
                if (p["metadata"].get("labels") or {}).get("app") == self.app]  # fmt: skip

    def reconcile(self) -> None:
        live = [p for p in self.pods() if not p["metadata"].get("deletionTimestamp")]
        nodes = sorted(n["metadata"]["name"] for n in self.sim.objects("Node")
                       if not (n.get("spec") or {}).get("unschedulable"))  # fmt: skip
        for _ in range(self.count - len(live)):
            node = nodes[self.made % len(nodes)]
            self.made += 1
            owner = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": self.app, "uid": "rs-uid",
                      "controller": True}]  # fmt: skip
            self.sim.put({"apiVersion": "v1", "kind": "Pod",
                          "metadata": {"namespace": self.namespace, "name": f"{self.app}-{self.made}",
                                       "labels": {"app": self.app}, "ownerReferences": owner},
                          "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x"}],
                                   "terminationGracePeriodSeconds": 0}})  # fmt: skip

    def ready(self) -> int:
        return sum(1 for p in self.pods() if pod_ready(p))


@dataclass
class Recorder:
    """Every commit's view of the pool: the most nodes unavailable at once, the fewest ready
    replicas, each node's successive desiredConfig."""

    sim: ApiServer
    replicas: Replicas | None = None
    max_unavailable: int = 0
    min_ready: int | None = None
    targeted: list[tuple[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.sim.store.add_hook(self._on_commit)

    def _on_commit(self, event: WatchEvent) -> None:
        kind = event.obj.get("kind")
        if kind == "Node":
            nodes = self.sim.objects("Node")
            self.max_unavailable = max(
                self.max_unavailable, sum(1 for n in nodes if rollout.is_unavailable(n))
            )
            before = _ann(event.old or {"metadata": {}}).get(ann.DESIRED_CONFIG)
            after = _ann(event.obj).get(ann.DESIRED_CONFIG)
            if after and after != before:
                self.targeted.append((event.obj["metadata"]["name"], after))
        if kind == "Pod" and self.replicas is not None:
            ready = self.replicas.ready()
            self.min_ready = ready if self.min_ready is None else min(self.min_ready, ready)


class FakeDaemons:
    """`agent_step` for every node on every change of the cluster, in a thread (for controllers
    that run as processes); a context manager."""

    def __init__(self, sim: ApiServer) -> None:
        self.sim = sim
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fake-daemons", daemon=True)

    def __enter__(self) -> FakeDaemons:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        watcher, _ = self.sim.store.watch_all()
        try:
            while not self._stop.is_set():
                for node in self.sim.objects("Node"):
                    agent_step(self.sim, node["metadata"]["name"])
                with contextlib.suppress(queue.Empty):
                    change = watcher.events.get(timeout=0.2)
                    while change is not None:  # one round for a burst of changes
                        change = watcher.events.get_nowait()
        finally:
            self.sim.store.unwatch(watcher)
