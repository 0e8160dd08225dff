"""A stand-in for the Machine Config Controller and Operator, for tests and the simulator.

For one pool it plays the controller: sets `desiredConfig` on the pool's nodes, answers the
drain handshake (`desiredDrain` -> cordon, evict, `lastAppliedDrain`; `uncordon-…` ->
uncordon), reporting it on the node's MachineConfigNode as upstream's drain controller does
(Cordoned, Drained, Uncordoned), and keeps the pool's status counts, its degraded machines and
their reasons read from the MachineConfigNodes' NodeDegraded condition as upstream's node
controller does (a node without one counts by its state annotation). For
`MachineConfiguration/cluster` it plays the operator:
`status.nodeDisruptionPolicyStatus.clusterPolicies` is the defaults merged with the spec
(mcd.policy.merge_policies, as upstream's MergeClusterPolicies) and `observedGeneration` follows
`metadata.generation`.

It works on an `ApiServer` in the same process (its store), never over HTTP, so the agent under
test is the only client of the REST API.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from typing import Any

from mcd.node import machineconfignode as mcn
from mcd.policy import DEFAULT_POLICIES, PolicyError, merge_policies
from mcd_sim import nodephase
from mcd_sim.apiserver import ApiError, ApiServer
from mcd_sim.apiserver.resources import MC_GROUP, lookup
from mcd_sim.changeloop import ChangeLoop

LOG = logging.getLogger(__name__)

PREFIX = "machineconfiguration.openshift.io/"
DESIRED_CONFIG = PREFIX + "desiredConfig"
CURRENT_CONFIG = PREFIX + "currentConfig"
STATE = PREFIX + "state"
REASON = PREFIX + "reason"
DESIRED_DRAIN = PREFIX + "desiredDrain"
LAST_APPLIED_DRAIN = PREFIX + "lastAppliedDrain"
MIRROR_POD = "kubernetes.io/config.mirror"

Obj = dict[str, Any]


def _annotations(obj: Obj) -> dict[str, str]:
    return dict(obj["metadata"].get("annotations") or {})


def max_unavailable(value: object, total: int) -> int:
    """A pool's spec.maxUnavailable (a count or a percentage, rounded down; default 1) as a
    count, at least 1 as upstream's maxUnavailable()."""
    if value is None:
        return 1
    if isinstance(value, str) and value.endswith("%"):
        return max(1, int(value[:-1]) * total // 100)
    return max(1, int(str(value)))


def _skipped_by_drain(pod: Obj) -> bool:
    """kubectl drain with --ignore-daemonsets never evicts DaemonSet pods nor static (mirror) pods."""
    owners = pod["metadata"].get("ownerReferences") or []
    if any(o.get("kind") == "DaemonSet" and o.get("controller") for o in owners):
        return True
    return MIRROR_POD in (pod["metadata"].get("annotations") or {})


class ControllerStandIn:
    """The controller's and operator's part for one pool; `step()` runs one idempotent pass,
    `start()` runs passes in a thread on every change (and every `interval` seconds)."""

    def __init__(
        self,
        cluster: ApiServer,
        pool: str = "worker",
        *,
        interval: float = 1.0,
        evict_retry: float = 5.0,
        rollout: bool = False,
    ) -> None:
        self.cluster = cluster
        self.pool = pool
        # with `rollout`, a pass also moves the pool's nodes to spec.configuration, no more than
        # spec.maxUnavailable at a time (else the test or simulation sets desiredConfig itself)
        self.rollout = rollout
        self.interval = interval
        self.evict_retry = evict_retry  # upstream's EvictErrorRetryDelay
        self._retry_at: dict[tuple[str, str], float] = {}
        self._loop = ChangeLoop(cluster.store, self.step, self._next_wait, "sim-controller")
        self._lock = threading.Lock()  # one pass at a time (the thread and a test may both call step)
        self.errors: list[str] = []  # what a pass could not do, for tests to assert on
        self._drain_reported: dict[str, str] = {}  # node -> the desiredDrain whose start was reported

    # --- the pool ------------------------------------------------------------------------

    def nodes(self) -> list[Obj]:
        role = f"node-role.kubernetes.io/{self.pool}"
        return [n for n in self.cluster.objects("Node") if role in (n["metadata"].get("labels") or {})]

    def set_desired_config(self, config: str, nodes: Iterable[str] | None = None) -> None:
        """Point the pool (and so its nodes, or only `nodes`) at rendered config `config`."""
        self._ensure_pool()
        self.cluster.patch("MachineConfigPool", self.pool, {"spec": {"configuration": {"name": config}}})
        wanted = set(nodes) if nodes is not None else None
        for node in self.nodes():
            name = node["metadata"]["name"]
            if (wanted is None or name in wanted) and _annotations(node).get(DESIRED_CONFIG) != config:
                self.cluster.patch("Node", name, {"metadata": {"annotations": {DESIRED_CONFIG: config}}})

    def _ensure_pool(self) -> None:
        if self.cluster.get("MachineConfigPool", self.pool) is None:
            self.cluster.put(
                {
                    "apiVersion": "machineconfiguration.openshift.io/v1",
                    "kind": "MachineConfigPool",
                    "metadata": {"name": self.pool},
                    "spec": {
                        "machineConfigSelector": {"matchLabels": {PREFIX + "role": self.pool}},
                        "nodeSelector": {"matchLabels": {f"node-role.kubernetes.io/{self.pool}": ""}},
                        "paused": False,
                    },
                }
            )

    # --- one pass ------------------------------------------------------------------------

    def step(self) -> None:
        with self._lock:
            parts = [self.reconcile_drains, self.reconcile_machineconfiguration, self.reconcile_pool]
            if self.rollout:
                parts.insert(1, self.reconcile_rollout)
            for part in parts:
                try:
                    part()
                except ApiError as exc:  # a fault injected by the test, or a race with a deletion
                    self.errors.append(f"{part.__name__}: {exc.message}")

    def reconcile_drains(self) -> None:
        now = time.monotonic()
        # a due retry is the same as none; dropping them keeps _next_wait from spinning on old pods
        self._retry_at = {key: at for key, at in self._retry_at.items() if at > now}
        for node in self.nodes():
            ann = _annotations(node)
            desired, done = ann.get(DESIRED_DRAIN, ""), ann.get(LAST_APPLIED_DRAIN, "")
            if not desired or desired == done:
                continue
            name = node["metadata"]["name"]
            verb = desired.split("-", 1)[0]
            if verb == "uncordon":
                self._set_unschedulable(node, False)
                self._complete(name, desired)
                self.report(node, mcn.uncordoned(False))
            elif verb == "drain":
                self._set_unschedulable(node, True)
                if self._drain_reported.get(name) != desired:
                    self._drain_reported[name] = desired
                    self.report(node, mcn.cordoned(True))
                    self.report(node, mcn.draining(f"complete once {LAST_APPLIED_DRAIN} is {desired}"))
                if self._drain_pods(name):
                    self._complete(name, desired)
                    self.report(node, mcn.drained(f"{LAST_APPLIED_DRAIN} is {desired}"))

    def report(self, node: Obj, report: mcn.Report) -> None:
        """Write a phase on the node's MachineConfigNode (created when missing), as upstream's
        drain controller does; atomic against the agent's writes (the store's lock)."""
        rt = lookup(MC_GROUP, "v1", "machineconfignodes")
        assert rt is not None
        name = node["metadata"]["name"]
        ann = _annotations(node)
        desired = ann.get(DESIRED_CONFIG, "")
        if self.cluster.store.find(rt, "", name) is None:
            self.cluster.store.create(rt, "", mcn.new_object(name, mcn.pool_of(desired, self.pool), desired))

        def change(obj: Obj) -> Obj:
            spec_desired = str(((obj.get("spec") or {}).get("configVersion") or {}).get("desired", ""))
            status = mcn.merge(
                obj.get("status"),
                report,
                spec_desired=spec_desired,
                current_config=ann.get(CURRENT_CONFIG, ""),
                desired_config=desired,
                now=self.cluster.store.clock(),
            )
            return obj if status is None else {**obj, "status": status}

        self.cluster.store.mutate(rt, "", name, change, subresource="status")

    def _mcn_degraded(self, node: Obj) -> tuple[bool, str] | None:
        """(degraded, message) from the node's MachineConfigNode; None without its conditions."""
        obj = self.cluster.get("MachineConfigNode", node["metadata"]["name"])
        conditions = ((obj or {}).get("status") or {}).get("conditions") or []
        if not conditions:
            return None
        for c in conditions:
            if c.get("type") == mcn.NODE_DEGRADED and c.get("status") == mcn.TRUE:
                return True, str(c.get("message", ""))
        return False, ""

    def _set_unschedulable(self, node: Obj, value: bool) -> None:
        if bool((node.get("spec") or {}).get("unschedulable")) != value:
            self.cluster.patch("Node", node["metadata"]["name"], {"spec": {"unschedulable": value or None}})

    def _complete(self, name: str, desired: str) -> None:
        self.cluster.patch("Node", name, {"metadata": {"annotations": {LAST_APPLIED_DRAIN: desired}}})

    def _drain_pods(self, node: str) -> bool:
        """Evict what can go now; True once only pods drain leaves alone remain on the node."""
        remaining = False
        now = time.monotonic()
        for pod in self.cluster.objects("Pod"):
            if (pod.get("spec") or {}).get("nodeName") != node or _skipped_by_drain(pod):
                continue
            remaining = True
            meta = pod["metadata"]
            key = (meta["namespace"], meta["name"])
            if meta.get("deletionTimestamp") or self._retry_at.get(key, 0.0) > now:
                continue  # terminating, or a PDB said no a moment ago
            try:
                self.cluster.evict(meta["namespace"], meta["name"])
                self._retry_at.pop(key, None)
            except ApiError as exc:
                if exc.code == 404:
                    continue
                if exc.code != 429:
                    raise
                self._retry_at[key] = now + self.evict_retry
        return not remaining

    def reconcile_rollout(self) -> None:
        """Upstream's node controller in short: capacity = maxUnavailable minus the unavailable
        nodes (`nodephase.unavailable`), spent on ready nodes not yet targeting the pool's config,
        in upstream's order (zone, then age), less the nodes failing on that config."""
        pool = self.cluster.get("MachineConfigPool", self.pool)
        config = (((pool or {}).get("spec") or {}).get("configuration") or {}).get("name", "")
        if pool is None or not config or (pool.get("spec") or {}).get("paused"):
            return
        nodes = self.nodes()
        limit = max_unavailable(pool["spec"].get("maxUnavailable"), len(nodes))
        capacity = limit - sum(1 for n in nodes if nodephase.node_unavailable(n))
        # a node failing on this config counts against capacity too: if it recovers, it must not
        # find others already moving (upstream's failingThisConfig)
        failing = [_annotations(n) for n in nodes]
        capacity -= sum(
            1 for a in failing if a.get(DESIRED_CONFIG) == config and a.get(STATE) in nodephase.FAILING_STATES
        )
        for node in nodephase.update_order(nodes):
            if capacity <= 0:
                return
            annotations = _annotations(node)
            if annotations.get(DESIRED_CONFIG) == config or nodephase.node_unavailable(node):
                continue
            patch = {"metadata": {"annotations": {DESIRED_CONFIG: config}}}
            self.cluster.patch("Node", node["metadata"]["name"], patch)
            capacity -= 1

    def reconcile_machineconfiguration(self) -> None:
        obj = self.cluster.get("MachineConfiguration", "cluster")
        if obj is None:
            obj = self.cluster.put(
                {
                    "apiVersion": "operator.openshift.io/v1",
                    "kind": "MachineConfiguration",
                    "metadata": {"name": "cluster"},
                    "spec": {
                        "logLevel": "Normal",
                        "operatorLogLevel": "Normal",
                        "managementState": "Managed",
                    },
                }
            )
        generation = obj["metadata"].get("generation", 1)
        status = dict(obj.get("status") or {})
        if status.get("observedGeneration") == generation and "nodeDisruptionPolicyStatus" in status:
            return
        user = (obj.get("spec") or {}).get("nodeDisruptionPolicy") or {}
        try:
            policies = merge_policies(DEFAULT_POLICIES, user, ("spec", "nodeDisruptionPolicy"))
        except PolicyError as exc:
            # the operator keeps the last good status; the daemon then waits for observedGeneration
            self.errors.append("; ".join(f.message for f in exc.findings))
            return
        status["nodeDisruptionPolicyStatus"] = {"clusterPolicies": policies.to_api()}
        status["observedGeneration"] = generation
        self.cluster.patch("MachineConfiguration", "cluster", {"status": status}, status=True)

    def reconcile_pool(self) -> None:
        pool = self.cluster.get("MachineConfigPool", self.pool)
        if pool is None:
            return
        config = ((pool.get("spec") or {}).get("configuration") or {}).get("name", "")
        nodes = self.nodes()
        updated = [
            n
            for n in nodes
            if _annotations(n).get(CURRENT_CONFIG) == config
            and _annotations(n).get(STATE, "Done") == "Done"
            and _annotations(n).get(DESIRED_CONFIG) == config
        ]
        degraded: list[Obj] = []
        reasons: list[str] = []
        for n in nodes:
            health = self._mcn_degraded(n)
            if health is None:  # no MachineConfigNode yet: the state annotation tells
                health = (_annotations(n).get(STATE) in ("Degraded", "Unreconcilable"), "")
            if health[0]:
                degraded.append(n)
                text = health[1] or _annotations(n).get(REASON, "")
                reasons.append(f"node {n['metadata']['name']}: {text}")
        unavailable = [n for n in nodes if (n.get("spec") or {}).get("unschedulable") or n in degraded]
        all_updated = bool(config) and len(updated) == len(nodes)
        old = pool.get("status") or {}

        def condition(kind: str, value: bool, reason: str = "", message: str = "") -> Obj:
            previous = next((c for c in old.get("conditions") or [] if c.get("type") == kind), None)
            status = "True" if value else "False"
            if previous is not None and previous.get("status") == status:
                return {**previous, "reason": reason, "message": message}
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            return {
                "type": kind,
                "status": status,
                "lastTransitionTime": stamp,
                "reason": reason,
                "message": message,
            }

        why = (f"{len(degraded)} node(s) degraded", "; ".join(reasons)) if degraded else ("", "")

        status = {
            "observedGeneration": pool["metadata"].get("generation", 1),
            "configuration": {
                "name": config if all_updated else old.get("configuration", {}).get("name", "")
            },
            "machineCount": len(nodes),
            "updatedMachineCount": len(updated),
            "readyMachineCount": len([n for n in updated if n not in unavailable]),
            "unavailableMachineCount": len(unavailable),
            "degradedMachineCount": len(degraded),
            "conditions": [
                condition("Updated", all_updated),
                condition("Updating", not all_updated and bool(config)),
                condition("NodeDegraded", bool(degraded), *why),
                condition("Degraded", bool(degraded), *why),
            ],
        }
        if status != old:
            self.cluster.patch("MachineConfigPool", self.pool, {"status": status}, status=True)

    # --- background thread ---------------------------------------------------------------

    def start(self) -> ControllerStandIn:
        self._loop.start()
        return self

    def stop(self) -> None:
        self._loop.stop()

    def __enter__(self) -> ControllerStandIn:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def _next_wait(self) -> float:
        """Until the next pass with no change: `interval`, or sooner when an eviction retry is due."""
        retries = list(self._retry_at.values())
        if not retries:
            return self.interval
        return max(0.0, min(self.interval, min(retries) - time.monotonic()))
