"""What a fleet run measures, taken from the API server's store and audit log, never from the
controller's own account: `Recorder` samples every Node and workload Pod commit (a store hook),
`in_order` puts the samples in revision order, `requests_between` counts the audit log's
requests by client, `budget` is the PodDisruptionBudget the timeline checks."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from mcd.node import annotations as ann
from mcd_sim import nodephase, timeline
from mcd_sim.apiserver.audit import read_events
from mcd_sim.apiserver.lifecycle import pod_ready
from mcd_sim.apiserver.store import WatchEvent
from mcd_sim.poolcontrollers import peak_rss_kib

Obj = dict[str, Any]
Sample = TypeVar("Sample", timeline.NodeSample, timeline.PodSample)
AGENT_UA = "machine-config-daemon/"
WORKLOAD = "web"


class Recorder:
    """Store hook: a sample of every Node and workload Pod commit (it runs under the store's
    lock, so it only copies the few fields the timeline reads)."""

    def __init__(self) -> None:
        # (resourceVersion, sample): a hook's own write (the server's kubelet making a new pod
        # Ready) reaches the hooks before the write that caused it, so order is the revision's
        self.nodes: list[tuple[int, timeline.NodeSample]] = []
        self.pods: list[tuple[int, timeline.PodSample]] = []
        self.pids: dict[str, int] = {}  # node -> its agent's process
        self.on_reboot: Callable[[str], None] | None = None  # called as a node announces its reboot
        self._rebooting: set[str] = set()
        self.rss: dict[str, int] = {}  # node -> its agent's peak resident memory, KiB

    def peak(self, node: str, pid: int) -> None:
        kib = peak_rss_kib(pid)
        if kib is not None:
            self.rss[node] = max(kib, self.rss.get(node, 0))

    def hook(self, event: WatchEvent) -> None:
        obj, t = event.obj, time.time()
        kind, meta = obj.get("kind"), obj["metadata"]
        if kind == "Node":
            annotations = meta.get("annotations") or {}
            ready = nodephase.ready(
                (obj.get("status") or {}).get("conditions") or [],
                bool((obj.get("spec") or {}).get("unschedulable")),
            )
            sample = {k: annotations[k] for k in nodephase.KEYS if k in annotations}
            rebooting = sample.get(ann.POST_CONFIG_ACTION) == ann.REBOOTING
            if rebooting and meta["name"] in self.pids and meta["name"] not in self._rebooting:
                self._rebooting.add(meta["name"])
                # the agent is alive, waiting for this write's answer; its memory goes with the exec
                self.peak(meta["name"], self.pids[meta["name"]])
                if self.on_reboot is not None:
                    self.on_reboot(meta["name"])
            elif not rebooting:
                self._rebooting.discard(meta["name"])
            self.nodes.append((event.rv, timeline.NodeSample(t, meta["name"], sample, ready)))
        elif kind == "Pod" and (meta.get("labels") or {}).get("app") == WORKLOAD:
            gone = event.type == "DELETED"
            pod = timeline.PodSample(t, meta["name"], dict(meta["labels"]), pod_ready(obj), gone)
            self.pods.append((event.rv, pod))


def budget(pdb: Obj, replicas: int) -> timeline.Budget:
    def scaled(value: object, round_up: bool) -> int:
        if isinstance(value, str) and value.endswith("%"):
            part = int(value[:-1]) * replicas
            return -(-part // 100) if round_up else part // 100
        return int(str(value))

    if "minAvailable" in pdb:
        desired = scaled(pdb["minAvailable"], True)
    else:
        desired = max(0, replicas - scaled(pdb.get("maxUnavailable", 0), True))
    return timeline.Budget(WORKLOAD, {"app": WORKLOAD}, desired)


def in_order(samples: list[tuple[int, Sample]]) -> list[tuple[float, Sample]]:
    """Samples in commit order, with times that never go back (a nested commit is stamped first)."""
    out: list[tuple[float, Sample]] = []
    last = 0.0
    for _, s in sorted(samples, key=lambda pair: pair[0]):
        last = max(last, s.t)
        out.append((last, s))
    return out


def _stamp(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1e6):06d}Z"


def requests_between(audit: Path, since: float, until: float) -> dict[str, int]:
    """Requests received between `since` and `until` (wall clock), by client: agents and the rest."""
    counts = {"agents": 0, "others": 0}
    first, last = _stamp(since), _stamp(until)
    for event in read_events(audit):
        if first <= event["requestReceivedTimestamp"] <= last:
            counts["agents" if event.get("userAgent", "").startswith(AGENT_UA) else "others"] += 1
    return counts
