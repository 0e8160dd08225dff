"""The drain handshake's controller side, one non-blocking pass at a time.

A node whose `desiredDrain` differs from its `lastAppliedDrain` asks for work: `uncordon-…`
is answered by making the node schedulable, `drain-…` by cordoning it (again, if someone
uncordoned it meanwhile), evicting through the Eviction API every pod a drain moves (not
DaemonSet, mirror/static or critical pods: `mcd.node.drainrules.pods_to_evict`), and, once none
of those pods is left on the node, writing `lastAppliedDrain`. An eviction a
PodDisruptionBudget refuses (429) is retried after `retry_seconds` (upstream's
EvictErrorRetryDelay, 5 s) on a later pass, so one blocked node holds neither the pools nor the
other drains. Nothing is remembered that the cluster does not show but those retry times.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mcd.kube.client import KubeClient
from mcd.kube.errors import ApiError, NotFoundError
from mcd.node.annotations import DESIRED_DRAIN, LAST_APPLIED_DRAIN
from mcd.node.drainrules import pods_to_evict

LOG = logging.getLogger(__name__)

EVICT_RETRY_SECONDS = 5.0

Obj = dict[str, Any]


def pending_request(node: Mapping[str, Any]) -> str:
    """The drain or uncordon request the node waits on ("" when none). Pure."""
    ann = (node.get("metadata") or {}).get("annotations") or {}
    desired = ann.get(DESIRED_DRAIN, "")
    return desired if desired and desired != ann.get(LAST_APPLIED_DRAIN, "") else ""


def pods_on(pods: Sequence[Mapping[str, Any]], node: str) -> list[Mapping[str, Any]]:
    return [p for p in pods if (p.get("spec") or {}).get("nodeName") == node]


class DrainSync:
    """Answers every node's pending drain request a step at a time; `blocked` names the pods whose
    eviction a budget refused in the last pass."""

    def __init__(
        self, api: KubeClient, *, retry_seconds: float = EVICT_RETRY_SECONDS,
        clock: Callable[[], float] = time.monotonic, fence: Callable[[], None] = lambda: None,
    ) -> None:  # fmt: skip
        """`fence` is called before every write (the leader's check, `LeaderElector.fence`)."""
        self.api = api
        self.fence = fence
        self.retry_seconds = retry_seconds
        self.clock = clock
        self._retry_at: dict[tuple[str, str], float] = {}
        self.blocked: list[str] = []
        self.errors: list[str] = []  # what the last pass could not do

    def next_retry(self) -> float | None:
        """Seconds until the earliest refused eviction may be tried again (None: none waits)."""
        if not self._retry_at:
            return None
        return max(0.0, min(self._retry_at.values()) - self.clock())

    def sync(self, nodes: Sequence[Obj] | None = None) -> None:
        nodes = self.api.list_all("nodes") if nodes is None else nodes
        self.blocked = []
        self.errors = []
        pending = [(n, r) for n in nodes if (r := pending_request(n))]
        now = self.clock()
        self._retry_at = {k: at for k, at in self._retry_at.items() if at > now}
        if not pending:
            return
        pods: list[Obj] | None = None
        for node, request in pending:
            name = str(node["metadata"]["name"])
            verb = request.split("-", 1)[0]
            try:
                if verb == "uncordon":
                    if (node.get("spec") or {}).get("unschedulable"):
                        self.fence()
                        self.api.patch_node(name, {"spec": {"unschedulable": None}})
                        LOG.info("uncordoned node %s", name)
                    self._complete(name, request)
                elif verb == "drain":
                    if pods is None:
                        pods = self.api.list_all("pods")
                    self._drain(node, request, pods)
                else:
                    LOG.error(
                        "node %s: unknown drain request %r (expected drain-… or uncordon-…)", name, request
                    )
            except ApiError as exc:
                # one node's failure (a pod two budgets select: 500) holds neither the others nor the pools
                LOG.warning("node %s: %s failed: %s (retrying)", name, verb, exc)
                self.errors.append(f"node {name}: {exc}")

    def _drain(self, node: Obj, request: str, pods: Sequence[Obj]) -> None:
        name = str(node["metadata"]["name"])
        if not (node.get("spec") or {}).get("unschedulable"):
            self.fence()
            self.api.patch_node(name, {"spec": {"unschedulable": True}})
            LOG.info("cordoned node %s", name)
        remaining = pods_to_evict(pods_on(pods, name), None)
        now = self.clock()
        for pod in remaining:
            meta = pod.get("metadata") or {}
            key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
            if meta.get("deletionTimestamp") or self._retry_at.get(key, 0.0) > now:
                continue  # terminating already, or a budget said no a moment ago
            self.fence()
            try:
                self.api.evict_pod(*key)
                LOG.info("evicting pod %s/%s from node %s", key[0], key[1], name)
            except NotFoundError:
                continue
            except ApiError as exc:
                if exc.status != 429:
                    raise
                LOG.info("eviction of pod %s/%s refused for now: %s", key[0], key[1], exc)
                self._retry_at[key] = now + self.retry_seconds
                self.blocked.append(f"{key[0]}/{key[1]}")
        if not remaining:
            self._complete(name, request)
            LOG.info("drained node %s", name)

    def _complete(self, name: str, request: str) -> None:
        self.fence()
        self.api.patch_node(name, {"metadata": {"annotations": {LAST_APPLIED_DRAIN: request}}})
