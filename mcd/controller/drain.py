"""The drain handshake's controller side, one non-blocking pass at a time.

A node whose `desiredDrain` differs from its `lastAppliedDrain` asks for work: `uncordon-…`
is answered by making the node schedulable, `drain-…` by cordoning it (again, if someone
uncordoned it meanwhile), evicting through the Eviction API every pod a drain moves (not
DaemonSet, mirror/static or critical pods: `mcd.node.drainrules.pods_to_evict`), and, once none
of those pods is left on the node and a fresh read shows it still cordoned (upstream re-reads
it too: pods may have landed on a node uncordoned meanwhile), writing `lastAppliedDrain`.

A refused eviction (a PodDisruptionBudget's 429) is retried as upstream's drain controller
retries a failing drain (`DrainTiming`): every `retry` seconds (5, upstream's
EvictErrorRetryDelay) for the first `failing_threshold` (10 min), then every `failing_delay`
(5 min) with a `DrainThresholdExceeded` Warning Event on the node; past `timeout` (1 h) each
failure also posts `DrainFailed` and sets `mcc_drain_err{node}`. After `blocked_notice` seconds
(30) of refusals the budgets that hold the drain are named, once, at WARNING and in a Warning
Event `DrainBlocked` on the node (`stuck` carries the sentence for the pool's Event). The
phases go on the node's MachineConfigNode (`mcd.controller.drainreport`). What is remembered
that the cluster does not show: when each drain started, the retry times, what was told.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from mcd.controller.caches import Live, Reads
from mcd.controller.drainreport import MachineConfigNodeReports, budgets_sentence
from mcd.controller.events import PoolEvents
from mcd.controller.metrics import ControllerMetrics
from mcd.kube.client import KubeClient
from mcd.kube.errors import ApiError, NotFoundError
from mcd.node import machineconfignode as mcn
from mcd.node.annotations import DESIRED_DRAIN, LAST_APPLIED_DRAIN
from mcd.node.drainrules import pods_to_evict

LOG = logging.getLogger(__name__)

EVICT_RETRY_SECONDS = 5.0

Obj = dict[str, Any]


@dataclass(frozen=True)
class DrainTiming:
    """Seconds; upstream's drain controller's defaults (and 30 s before a blocked drain is named)."""

    retry: float = EVICT_RETRY_SECONDS
    failing_threshold: float = 600.0
    failing_delay: float = 300.0
    timeout: float = 3600.0
    blocked_notice: float = 30.0


def pending_request(node: Mapping[str, Any]) -> str:
    """The drain or uncordon request the node waits on ("" when none). Pure."""
    ann = (node.get("metadata") or {}).get("annotations") or {}
    desired = ann.get(DESIRED_DRAIN, "")
    return desired if desired and desired != ann.get(LAST_APPLIED_DRAIN, "") else ""


def pods_on(pods: Sequence[Mapping[str, Any]], node: str) -> list[Mapping[str, Any]]:
    return [p for p in pods if (p.get("spec") or {}).get("nodeName") == node]


class DrainSync:
    """Answers every node's pending drain request a step at a time; `stuck` names, per node, the
    budgets found holding its drain (once it has been refused for `blocked_notice`)."""

    def __init__(
        self,
        api: KubeClient,
        *,
        retry_seconds: float | None = None,
        timing: DrainTiming = DrainTiming(),
        clock: Callable[[], float] = time.monotonic,
        fence: Callable[[], None] = lambda: None,
        events: PoolEvents | None = None,
        metrics: ControllerMetrics | None = None,
        reads: Reads | None = None,
    ) -> None:
        """`fence` is called before every write (the leader's check, `LeaderElector.fence`);
        `reads`: where the nodes and pods are read (the informers' caches; by default a list)."""
        self.api = api
        self.reads = reads or Live(api)
        self.timing = timing if retry_seconds is None else replace(timing, retry=retry_seconds)
        self.clock = clock
        self.fence = fence
        self.events = events or PoolEvents(api, fence=fence)
        self.metrics = metrics or ControllerMetrics()
        self.mcns = MachineConfigNodeReports(api, fence=fence)
        self._retry_at: dict[tuple[str, str], float] = {}
        self._node_retry: dict[str, float] = {}  # node → when its refused evictions may be tried again
        self._started: dict[str, tuple[str, float]] = {}  # node → (request, when first seen)
        self._told: dict[str, set[str]] = {}  # node → what was said of its current request
        self.blocked: list[str] = []  # the pods whose eviction was refused in the last pass
        self.stuck: dict[str, str] = {}  # node → the budgets named as holding its drain
        self.errors: list[str] = []  # what the last pass could not do

    @property
    def retry_seconds(self) -> float:
        return self.timing.retry

    @retry_seconds.setter
    def retry_seconds(self, value: float) -> None:
        self.timing = replace(self.timing, retry=value)

    def next_retry(self) -> float | None:
        """Seconds until the earliest refused eviction may be tried again (None: none waits)."""
        if not self._retry_at:
            return None
        return max(0.0, min(self._retry_at.values()) - self.clock())

    def tracks(self, name: str) -> bool:
        """Whether a request of node `name` was being answered (its end is to be noticed)."""
        return name in self._started

    def next_retry_for(self, name: str) -> float | None:
        """Seconds until node `name`'s refused evictions may be tried again (None: none waits)."""
        at = self._node_retry.get(name)
        return None if at is None else max(0.0, at - self.clock())

    def sync(self, nodes: Sequence[Obj] | None = None) -> None:
        """Every node's pending request."""
        nodes = self.reads.list_all("nodes") if nodes is None else nodes
        self._begin()
        pending = [(n, r) for n in nodes if (r := pending_request(n))]
        self._forget({str(n["metadata"]["name"]): r for n, r in pending})
        for node, request in pending:
            self._step(node, request)

    def sync_node(self, name: str, node: Obj | None) -> None:
        """Node `name`'s pending request (`node`: as last seen; None: it is gone)."""
        self._begin()
        request = pending_request(node) if node is not None else ""
        started = self._started.get(name)
        if started is not None and started[0] != request:
            self._forget_node(name)
        if node is not None and request:
            self._step(node, request)

    def _begin(self) -> None:
        self.errors = []
        self.blocked = []
        now = self.clock()
        self._retry_at = {k: at for k, at in self._retry_at.items() if at > now}
        self._node_retry = {k: at for k, at in self._node_retry.items() if at > now}

    def _step(self, node: Obj, request: str) -> None:
        name = str(node["metadata"]["name"])
        verb = request.split("-", 1)[0]
        try:
            if verb == "uncordon":
                self._uncordon(node, request)
            elif verb == "drain":
                # only the draining node's pods (a field selector), not every pod of the cluster
                self._drain(node, request, self.reads.list_pods_on_node(name))
            else:
                LOG.error("node %s: unknown drain request %r (expected drain-… or uncordon-…)", name, request)
        except ApiError as exc:
            # one node's failure (a pod two budgets select: 500) holds neither the others nor the pools
            LOG.warning("node %s: %s failed: %s (retrying)", name, verb, exc)
            self.errors.append(f"node {name}: {exc}")

    def _uncordon(self, node: Obj, request: str) -> None:
        name = str(node["metadata"]["name"])
        if (node.get("spec") or {}).get("unschedulable"):
            self.fence()
            node = self._patch_node(name, {"spec": {"unschedulable": None}})
            LOG.info("uncordoned node %s", name)
        self._complete(name, request)
        self.mcns.report(node, mcn.uncordoned(bool((node.get("spec") or {}).get("unschedulable"))))

    def _forget(self, pending: Mapping[str, str]) -> None:
        """Drop what is kept about drains no longer asked for (done, changed, node gone)."""
        for name, (request, _) in list(self._started.items()):
            if pending.get(name) != request:
                self._forget_node(name)

    def _forget_node(self, name: str) -> None:
        del self._started[name]
        self._told.pop(name, None)
        self.stuck.pop(name, None)
        self._node_retry.pop(name, None)
        self.metrics.drain_cleared(name)

    def _drain(self, node: Obj, request: str, pods: Sequence[Obj]) -> None:
        name = str(node["metadata"]["name"])
        now = self.clock()
        if self._started.get(name, ("", 0.0))[0] != request:
            self._started[name] = (request, now)
            self._told[name] = set()
        if not (node.get("spec") or {}).get("unschedulable"):
            self.fence()
            node = self._patch_node(name, {"spec": {"unschedulable": True}})
            LOG.info("cordoned node %s", name)
        if self._once(name, "started"):
            self.mcns.report(node, mcn.cordoned(True))
            self.mcns.report(node, mcn.draining(f"complete once {LAST_APPLIED_DRAIN} is {request}"))
        remaining = pods_to_evict(pods_on(pods, name), None)
        refused: list[tuple[Mapping[str, Any], str]] = []
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
                refused.append((pod, str(exc)))
        if refused:
            self._refused(node, refused, now)
        if not remaining:
            self._finish(name, request)

    def _refused(self, node: Obj, refused: list[tuple[Mapping[str, Any], str]], now: float) -> None:
        """Upstream's escalation of a failing drain, and the budgets named once."""
        name = str(node["metadata"]["name"])
        t = self.timing
        failing_for = now - self._started[name][1]
        delay = t.failing_delay if failing_for > t.failing_threshold else t.retry
        for pod, _ in refused:
            meta = pod.get("metadata") or {}
            self._retry_at[(str(meta.get("namespace", "")), str(meta.get("name", "")))] = now + delay
        self._node_retry[name] = now + delay
        first = refused[0][1]
        if failing_for > t.timeout:
            message = f"node {name}: drain exceeded timeout: {_duration(t.timeout)}. Will continue to retry."
            self.events.node_warning("DrainFailed", node, message)
            self.metrics.drain_failed(name)
        if failing_for > t.failing_threshold:
            message = (
                f"Drain failed. Drain has been failing for more than {t.failing_threshold / 60:g} minutes. "
                f"Waiting {t.failing_delay / 60:g} minutes then retrying. Error message from drain: {first}"
            )
            self.events.node_warning("DrainThresholdExceeded", node, message)
            if self._once(name, "failing"):
                self.mcns.report(node, mcn.drain_failed(first))
        else:
            LOG.info("node %s: eviction refused for now (retry in %gs): %s", name, delay, first)
        self.blocked.extend(_key(p) for p, _ in refused)
        if failing_for >= t.blocked_notice and name not in self.stuck:
            pods = [p for p, _ in refused]
            sentence = budgets_sentence(self.api.list_pdbs(), pods) or f"evictions refused: {first}"
            self.stuck[name] = f"drain of node {name} blocked for {failing_for:.0f}s: {sentence}"
            self.events.node_warning("DrainBlocked", node, self.stuck[name])

    def _finish(self, name: str, request: str) -> None:
        """Every pod is gone: `lastAppliedDrain`, once a fresh read shows the node still cordoned."""
        node = self.api.get_node(name)
        if not (node.get("spec") or {}).get("unschedulable"):
            LOG.info("node %s was uncordoned during its drain: cordoning it again before completing", name)
            return  # the next pass cordons it again and looks for pods that landed meanwhile
        self._complete(name, request)
        LOG.info("drained node %s", name)
        self.mcns.report(node, mcn.drained(f"{LAST_APPLIED_DRAIN} is {request}"))

    def _once(self, name: str, what: str) -> bool:
        told = self._told.setdefault(name, set())
        if what in told:
            return False
        told.add(what)
        return True

    def _complete(self, name: str, request: str) -> None:
        self.fence()
        self._patch_node(name, {"metadata": {"annotations": {LAST_APPLIED_DRAIN: request}}})

    def _patch_node(self, name: str, patch: Mapping[str, Any]) -> Obj:
        """The caller fenced; the answer goes into the cache at once."""
        node = self.api.patch_node(name, patch)
        self.reads.wrote("nodes", node)
        return node


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _duration(seconds: float) -> str:
    """Go's time.Duration text for whole seconds (1h0m0s, 10m0s, 45s)."""
    s = int(seconds)
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    if h:
        return f"{h}h{m}m{sec}s"
    if m:
        return f"{m}m{sec}s"
    return f"{sec}s"
