"""One pass over every MachineConfigPool: render, retarget, move nodes, write the status.

For each pool, as upstream's render and node controllers do between them: the MachineConfigs
its machineConfigSelector picks are merged (in name order) into `rendered-<pool>-<hash>`,
created when absent, and set as `spec.configuration` (name and source); a failure to render
sets RenderDegraded and leaves the target alone. Then, unless the pool is paused, the nodes the
rollout rules pick (`mcd.controller.rollout.choose`) get the target as their `desiredConfig`,
and the status is written from the nodes (`mcd.controller.status.pool_status`), only when it
changed, with the pool's resourceVersion as a precondition.

Every decision is read from the cluster at the start of the pass (nothing is remembered between
passes), so a pass after a restart, or by another replica, continues where the last one stopped.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mcd.config.selector import selector_text
from mcd.config.selector import selects as matches
from mcd.controller import rollout
from mcd.controller.caches import Live, Reads
from mcd.controller.events import RENDER_CONTROLLER, PoolEvents
from mcd.controller.reconcilable import unreconcilable
from mcd.controller.status import pool_status, render_degraded, spec_invalid
from mcd.kube.client import KubeClient
from mcd.kube.errors import ApiError, ConflictError, NotFoundError
from mcd.node import annotations as ann
from mcd.planner.nodefacts import HIGHLY_AVAILABLE, SINGLE_REPLICA
from mcd.render import RenderError, render_pool, source_refs

LOG = logging.getLogger(__name__)

Obj = dict[str, Any]
MC_API_VERSION = "machineconfiguration.openshift.io/v1"
SELECTING_ALL_NODES = "This machineconfigpool is selecting all nodes. A non-empty selector is required."


CONTROLLER_CONFIG = "machine-config-controller"
RESYNC_SECONDS = 30.0
# a node on its way to a config whose agent writes none of these for this long is said stalled
STALL_SECONDS = 900.0
PROGRESS_KEYS = (
    ann.STATE,
    ann.CURRENT_CONFIG,
    ann.DESIRED_CONFIG,
    ann.DESIRED_DRAIN,
    ann.LAST_APPLIED_DRAIN,
    ann.REASON,
)
CONTROL_PLANE_LABELS = ("node-role.kubernetes.io/master", "node-role.kubernetes.io/control-plane")


@dataclass(frozen=True)
class Cluster:
    base_os_image: str  # the ControllerConfig's baseOSContainerImage ("" without one)
    topology: str  # its infra's controlPlaneTopology, or inferred


def rfc3339(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


class PoolSync:
    """The render and node-controller part of a pass; `errors` holds what the last pass could not do."""

    def __init__(
        self,
        api: KubeClient,
        *,
        events: PoolEvents | None = None,
        clock: Callable[[], float] = time.time,
        fence: Callable[[], None] = lambda: None,
        stuck: Callable[[], Mapping[str, str]] = dict,
        reads: Reads | None = None,
    ) -> None:
        """`fence` is called before every write (the leader's check, `LeaderElector.fence`);
        `stuck`: the drains found blocked, by node (`DrainSync.stuck`), told on their pool;
        `reads`: where the pools, configs and nodes are read (the informers' caches; by default
        a list each)."""
        self.api = api
        self.reads = reads or Live(api)
        self.fence = fence
        self.stuck = stuck
        self._told_stuck: dict[str, str] = {}  # node → the sentence told on its pool
        self.stall_after = STALL_SECONDS
        # node → (its progress annotations, since when unchanged (our clock), told)
        self._progress: dict[str, tuple[tuple[str, ...], float, bool]] = {}
        self.events = events or PoolEvents(api, fence=fence)
        self.clock = clock
        # (monotonic) no render before this: set by the work queue on a MachineConfig change
        self.render_after = 0.0
        self.errors: list[str] = []
        self.cluster = Cluster("", "")
        self.resync = RESYNC_SECONDS  # seconds between two reads of the ControllerConfig
        self._controller_config: tuple[float, list[Obj]] | None = None  # (read again after, objects)
        # per pool, the last (current, rendered) pair checked for reconcilability, and the answer
        self._verdicts: dict[str, tuple[tuple[str, str], str | None]] = {}
        self._selecting_all: dict[str, str] = {}  # the pools warned of SelectingAll: name → uid
        self._invalid: dict[str, str] = {}  # the pools whose spec stops them, and why (said once)

    def sync(self, only: str | None = None) -> None:
        """Every pool, or the pool `only` (its nodes are still judged against every pool's)."""
        self.errors = []
        pools = self.reads.list_all("machineconfigpools")
        configs = self.reads.list_all("machineconfigs")
        nodes = self.reads.list_all("nodes")
        self.cluster = self._cluster(nodes)
        for pool in sorted(pools, key=rollout.name_of):
            if only is not None and rollout.name_of(pool) != only:
                continue
            try:
                self.sync_pool(pool, pools, configs, nodes)
            except (ApiError, rollout.PoolError) as exc:
                # one pool's failure does not hold the others; the next pass retries it
                LOG.warning("pool %s: %s", rollout.name_of(pool), exc)
                self.errors.append(f"pool {rollout.name_of(pool)}: {exc}")

    def _cluster(self, nodes: Sequence[Obj]) -> Cluster:
        """What the ControllerConfig says of the cluster (upstream's render and node controllers
        read it too): its base OS image and control plane topology. A cluster without one (no
        operator, no CRD) has no base image, and a topology inferred from its nodes: a cluster
        whose one node is its control plane is SingleReplica (its agent does not drain: there is
        nowhere to drain to), any other HighlyAvailable."""
        if self._controller_config is None or time.monotonic() >= self._controller_config[0]:
            try:
                configs = self.reads.list_all("controllerconfigs")
            except NotFoundError:
                configs = []
            # read again every half minute: it changes with an upgrade, not between passes
            self._controller_config = (time.monotonic() + self.resync, configs)
        found = [c for c in self._controller_config[1] if rollout.name_of(c) == CONTROLLER_CONFIG]
        spec = (found[0].get("spec") or {}) if found else {}
        topology = str((((spec.get("infra") or {}).get("status") or {}).get("controlPlaneTopology")) or "")
        if not found:
            single = len(nodes) == 1 and bool(set(CONTROL_PLANE_LABELS) & set(rollout.labels_of(nodes[0])))
            topology = SINGLE_REPLICA if single else HIGHLY_AVAILABLE
        return Cluster(str(spec.get("baseOSContainerImage") or ""), topology)

    def _set_topology(self, members: list[Obj]) -> list[Obj]:
        """The cluster's control plane topology on each node, as upstream's node controller
        writes it (the agent skips the drain on SingleReplica)."""
        topology = self.cluster.topology
        if not topology:
            return members
        out = []
        for node in members:
            if rollout.annotations_of(node).get(ann.CONTROL_PLANE_TOPOLOGY) == topology:
                out.append(node)
                continue
            self.fence()
            patch = {"metadata": {"annotations": {ann.CONTROL_PLANE_TOPOLOGY: topology}}}
            LOG.info("node %s: controlPlaneTopology %s", rollout.name_of(node), topology)
            out.append(self._patch_node(rollout.name_of(node), patch))
        return out

    def sync_pool(self, pool: Obj, pools: Sequence[Obj], configs: list[Obj], nodes: Sequence[Obj]) -> None:
        name = rollout.name_of(pool)
        spec = pool.get("spec") or {}
        now = rfc3339(self.clock())
        served = dict(pool.get("status") or {})
        settled = time.monotonic() >= self.render_after  # MachineConfigs still changing: later
        if settled and not (pool.get("metadata") or {}).get("deletionTimestamp"):
            pool = self._render(pool, configs, now)
        if spec.get("nodeSelector") == {}:
            # upstream's node controller: a Warning Event and nothing else for this pool (its
            # selector matches no node, `rollout.selects_nothing`); said once while the selector
            # stays `{}` here, where upstream's recorder folds every sync's repeat into one Event
            key = str(pool["metadata"].get("uid", ""))
            if self._selecting_all.get(name) != key:
                self._selecting_all[name] = key
                self.events.warning("SelectingAll", pool, SELECTING_ALL_NODES)
            return
        self._selecting_all.pop(name, None)
        members = rollout.nodes_of(pool, nodes, pools)
        members = self._set_topology(members)
        members = self._adopt_joining(name, members)
        self._tell_stuck(pool, members)
        self._tell_stalled(pool, members)
        invalid = self._invalid_spec(pool, members)
        if (
            invalid is None
            and not spec.get("paused")
            and not (pool.get("metadata") or {}).get("deletionTimestamp")
        ):
            members = self._move_nodes(pool, members)
        elif spec.get("paused"):
            LOG.debug("pool %s is paused and will not update", name)
        self._write_status(pool, served, members, now, invalid)

    def _tell_stuck(self, pool: Obj, members: Sequence[Obj]) -> None:
        """A drain of one of the pool's nodes found blocked (by budgets that may never allow it):
        a Warning Event `DrainBlocked` on the pool, once per node and sentence."""
        stuck = self.stuck()
        for node in members:
            node_name = rollout.name_of(node)
            sentence = stuck.get(node_name)
            if sentence is None:
                self._told_stuck.pop(node_name, None)
            elif self._told_stuck.get(node_name) != sentence:
                self._told_stuck[node_name] = sentence
                self.events.warning("DrainBlocked", pool, sentence)

    def _tell_stalled(self, pool: Obj, members: Sequence[Obj]) -> None:
        """A node asked to move whose agent has written nothing for `stall_after` seconds (killed,
        or wedged) would only show as one more unavailable machine: a Warning Event `NodeStalled`
        on the pool and a WARNING say which node, once per stall."""
        target, now = rollout.pool_target(pool), self.clock()
        for node in members:
            name = rollout.name_of(node)
            a = rollout.annotations_of(node)
            if not target or rollout.is_done(node) or rollout.is_failing(node) or not rollout.is_ready(node):
                self._progress.pop(name, None)
                continue
            mark = tuple(a.get(k, "") for k in PROGRESS_KEYS)
            seen = self._progress.get(name)
            if seen is None or seen[0] != mark:
                self._progress[name] = (mark, now, False)
                continue
            if not seen[2] and now - seen[1] >= self.stall_after:
                self._progress[name] = (mark, seen[1], True)
                state = a.get(ann.STATE, "") or "not reported"
                message = (
                    f"Node {name} has made no progress toward {a.get(ann.DESIRED_CONFIG, '')} for "
                    f"{now - seen[1]:.0f}s (state {state}): is its machine-config daemon running?"
                )
                self.events.warning("NodeStalled", pool, message)

    def _invalid_spec(self, pool: Obj, members: Sequence[Obj]) -> str | None:
        """What in the pool's spec stops its nodes from moving (a bad maxUnavailable), said at
        WARNING when it starts or changes, not every pass; None when nothing does. The status
        is still written (as upstream's syncStatusOnly), with the InvalidSpec condition."""
        name = rollout.name_of(pool)
        try:
            rollout.max_unavailable(pool, len(members))
        except rollout.PoolError as exc:
            error = str(exc)
            level = logging.DEBUG if self._invalid.get(name) == error else logging.WARNING
            LOG.log(level, "%s: no node is moved until it is fixed", error)
            self._invalid[name] = error
            self.errors.append(error)
            return error
        self._invalid.pop(name, None)
        return None

    # -- render

    def _render(self, pool: Obj, configs: list[Obj], now: str) -> Obj:
        name = rollout.name_of(pool)
        selector = (pool.get("spec") or {}).get("machineConfigSelector")
        if not selector:
            LOG.warning(
                "pool %s: selecting all machineconfigs; a non-empty machineConfigSelector is required", name
            )
            return pool
        chosen = sorted(
            (c for c in configs if matches(selector, (c.get("metadata") or {}).get("labels") or {})),
            key=rollout.name_of,
        )
        error: str | None = None
        rendered: Obj | None = None
        if not chosen:
            error = f"no MachineConfigs found matching selector {selector_text(selector)}"
        else:
            try:
                rendered = render_pool(name, chosen, os_image_url=self.cluster.base_os_image or None)
            except RenderError as exc:
                error = str(exc)
            if rendered is not None and (error := self._unreconcilable(pool, rendered, chosen, configs)):
                rendered = None
        pool = dict(pool)
        status = dict(pool.get("status") or {})
        before = status.get("conditions") or []
        status["conditions"] = render_degraded(pool, error, now)
        pool["status"] = status
        if rendered is None:
            # said once, when it starts or its reason changes (a pass every few seconds repeats it)
            level = logging.DEBUG if status["conditions"] == before else logging.WARNING
            LOG.log(level, "pool %s: failed to render configuration: %s", name, error)
            return pool
        self._create_rendered(pool, rendered, configs)
        wanted = {"name": rollout.name_of(rendered), "source": source_refs(chosen)}
        current = (pool.get("spec") or {}).get("configuration") or {}
        if {"name": current.get("name"), "source": current.get("source")} != wanted:
            meta = {"resourceVersion": pool["metadata"]["resourceVersion"]}
            self.fence()
            updated = self.api.patch_machineconfigpool(
                name, {"metadata": meta, "spec": {"configuration": wanted}}
            )
            self.reads.wrote("machineconfigpools", updated)
            pool = {**updated, "status": status}
            if current.get("name") != wanted["name"]:
                self.events.normal(
                    "Updating", pool, f"Pool {name} now targeting MachineConfig {wanted['name']}"
                )
        return pool

    def _unreconcilable(self, pool: Obj, rendered: Obj, chosen: list[Obj], configs: list[Obj]) -> str | None:
        """Why the pool's nodes could not take `rendered` in place (upstream's render controller
        checks it against the pool's current config before targeting it); None when they can,
        when it is the current one, or when there is none to compare with."""
        current = rollout.pool_target(pool)
        new = rollout.name_of(rendered)
        if not current or current == new:
            return None
        pool_name = rollout.name_of(pool)
        known = self._verdicts.get(pool_name)
        if known is not None and known[0] == (current, new):
            return known[1]  # the same pair is asked every pass until something changes
        old = next((c for c in configs if rollout.name_of(c) == current), None)
        verdict = None if old is None else unreconcilable(old, rendered, chosen)
        self._verdicts[pool_name] = ((current, new), verdict)
        return verdict

    def _create_rendered(self, pool: Obj, rendered: Obj, configs: list[Obj]) -> None:
        name = rollout.name_of(rendered)
        if any(rollout.name_of(c) == name for c in configs):
            return
        meta = dict(rendered.get("metadata") or {})
        owner = {"apiVersion": MC_API_VERSION, "kind": "MachineConfigPool", "name": rollout.name_of(pool)}
        meta["ownerReferences"] = [
            {**owner, "uid": pool["metadata"].get("uid", ""), "controller": True, "blockOwnerDeletion": True}
        ]
        try:
            self.fence()
            created = self.api.create_machineconfig({**rendered, "metadata": meta})
        except ConflictError:
            return  # another pass (or replica) created it first: same name, same content
        configs.append(created)
        self.reads.wrote("machineconfigs", created)
        versions = (created.get("metadata") or {}).get("annotations") or {}
        release = versions.get("machineconfiguration.openshift.io/release-image-version", "")
        controller = versions.get("machineconfiguration.openshift.io/generated-by-controller-version", "")
        message = (
            f"{name} successfully generated (release version: {release}, controller version: {controller})"
        )
        self.events.normal("RenderedConfigGenerated", pool, message, RENDER_CONTROLLER)

    # -- nodes

    def _adopt_joining(self, pool: str, members: list[Obj]) -> list[Obj]:
        """Name each joining node's own config as its desired one (`rollout.joining`)."""
        out = []
        for node in members:
            config, name = rollout.joining(node), rollout.name_of(node)
            if not config:
                out.append(node)
                continue
            LOG.info("pool %s: node %s joins on its current config %s", pool, name, config)
            out.append(self._target(node, config))
        return out

    def _target(self, node: Obj, config: str, *, image: bool = False) -> Obj:
        """Write the node's desiredConfig (and drop desiredImage) if the node is still as this pass
        read it (its resourceVersion as a precondition): a node changed since, by its agent or by
        another replica that led meanwhile, is left for the next pass to judge again."""
        meta = node.get("metadata") or {}
        annotations: dict[str, str | None] = {ann.DESIRED_CONFIG: config}
        if image:
            annotations[ann.DESIRED_IMAGE] = None
        patch = {"metadata": {"resourceVersion": meta.get("resourceVersion"), "annotations": annotations}}
        self.fence()
        try:
            return self._patch_node(str(meta.get("name", "")), patch)
        except ConflictError:
            LOG.info("node %s changed since it was read: judged again on the next pass", meta.get("name"))
            return node

    def _patch_node(self, name: str, patch: Mapping[str, Any]) -> Obj:
        """The caller fenced; the answer goes into the cache at once."""
        node = self.api.patch_node(name, patch)
        self.reads.wrote("nodes", node)
        return node

    def _move_nodes(self, pool: Obj, members: list[Obj]) -> list[Obj]:
        name, target = rollout.name_of(pool), rollout.pool_target(pool)
        if not target:
            return members
        choice = rollout.choose(pool, members)
        if not choice.nodes:
            return members
        LOG.info(
            "pool %s: %d candidate nodes for update, capacity: %d", name, len(choice.nodes), choice.capacity
        )
        out = []
        for node in members:
            node_name = rollout.name_of(node)
            if node_name not in choice.nodes:
                out.append(node)
                continue
            out.append(self._target(node, target, image=True))
        if len(choice.nodes) == 1:
            message = f"Targeted node {choice.nodes[0]} to MachineConfig: {target}"
        else:
            message = f"Set target for {len(choice.nodes)} nodes to MachineConfig: {target}"
        self.events.normal("SetDesiredConfig", pool, message)
        return out

    # -- status

    def _write_status(
        self, pool: Obj, old: Mapping[str, Any], members: Sequence[Obj], now: str, invalid: str | None = None
    ) -> None:
        """`old`: the status as the server has it (the render step's condition is only in `pool`).
        A pool with no target yet gets only the render step's condition, as upstream's node
        controller leaves an unconfigured pool to the renderer."""
        if rollout.pool_target(pool):
            status = pool_status(pool, members, now)
        else:
            status = {"conditions": (pool.get("status") or {}).get("conditions") or []}
        status["conditions"] = spec_invalid(status["conditions"], invalid, now)
        if {k: old.get(k) for k in status} == status:
            return  # fields written by others (certExpirys …) are left as they are
        patch = {"metadata": {"resourceVersion": pool["metadata"]["resourceVersion"]}, "status": status}
        self.fence()
        self.reads.wrote(
            "machineconfigpools", self.api.patch_machineconfigpool(rollout.name_of(pool), patch, status=True)
        )
        old_name = (old.get("configuration") or {}).get("name")
        new_name = (status.get("configuration") or {}).get("name")
        if new_name and new_name != old_name:
            name = rollout.name_of(pool)
            self.events.normal(
                "Completed", pool, f"Pool {name} has completed update to MachineConfig {new_name}"
            )
