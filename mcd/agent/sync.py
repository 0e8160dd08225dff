"""One sync of the node: read everything, decide, act, report. Idempotent, so the loop may call it
any number of times (level-triggered, as upstream's `syncNode`).

The first sync after the process starts takes upstream's boot path (`checkStateOnFirstRun`):
the first boot's leftovers, the bootstrap annotations and the previous boot's finalization
failure (`mcd.agent.boot`), the on-disk config winning over the annotation, the on-disk check,
then Done or the pending update. Later syncs wait for a drain in progress, decide with
`prepUpdateFromCluster`'s rules, check the disk (preflight) and update. Errors are raised to
the loop, which reports them through `mcd.agent.errors.classify`.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable, Collection, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Protocol

from mcd import policy
from mcd.agent.applied import Applied, ApplyError, parse_machineconfig
from mcd.agent.boot import BootChecks
from mcd.agent.drain import Drainer
from mcd.agent.errors import StoppingError, UnreconcilableError
from mcd.agent.mccache import Ahead
from mcd.agent.node_apply import NodeApplier
from mcd.agent.osevents import OS_UPDATE_STAGED, os_events_after, os_events_before, os_update_staged
from mcd.agent.report.events import EventRecorder, SigtermProtection
from mcd.agent.report.mcn import MachineConfigNodeReporter
from mcd.agent.report.metrics import Metrics, update_label
from mcd.agent.report.node import NodeWriter
from mcd.config.machineconfig import (
    OCL_IMAGE_ANNOTATION,
    ORIGINAL_OS_IMAGE_ANNOTATION,
    MachineConfig,
    empty_machineconfig,
)
from mcd.kube.errors import NotFoundError
from mcd.node import annotations as ann
from mcd.node import machineconfignode as mcn
from mcd.node.annotations import NodeState, NodeView, decide_update
from mcd.node.errors import McdError

LOG = logging.getLogger(__name__)


class ConfigApi(Protocol):
    def get_machineconfig_json(self, name: str) -> tuple[dict[str, Any], bytes | None]:
        """The MachineConfig `name`, and the JSON text it was decoded from when there is one."""

    def get_machineconfiguration(self, name: str = "cluster") -> dict[str, Any] | None: ...


class DiskWatch(Protocol):
    """The drift monitor as the sync uses it (`mcd.agent.watch.driftreport.DriftReporter`)."""

    def arm(self, mc: MachineConfig) -> bool: ...

    def unverified(self, mc: MachineConfig) -> Collection[str] | None: ...

    def verified(self, mc: MachineConfig) -> None: ...


class Result(enum.Enum):
    IDLE = "idle"  # nothing more to do until the node changes
    WAITING = "waiting"  # waiting for the controller (a drain in progress)
    REBOOTING = "rebooting"  # a real reboot was requested: no more syncs in this boot
    SIMULATED_REBOOT = "simulated-reboot"  # restart the process and take the boot path


class Syncer:
    def __init__(
        self,
        *,
        api: ConfigApi,
        writer: NodeWriter,
        events: EventRecorder,
        metrics: Metrics,
        applier: NodeApplier,
        drainer: Drainer,
        before_update: Callable[[], None] | None = None,
        watch: DiskWatch | None = None,
        mcn_reporter: MachineConfigNodeReporter | None = None,
        ahead: Callable[[str], Ahead | None] | None = None,
        adopt: bool = False,
    ) -> None:
        self.api, self.writer, self.events, self.metrics = api, writer, events, metrics
        self.mcn = mcn_reporter or MachineConfigNodeReporter(None, writer)
        self.applier, self.drainer = applier, drainer
        # upstream's triggerUpdate stops the drift monitor: the update's own writes are not drift
        self._before_update = before_update
        # the drift monitor: armed before Done, trusted by the on-disk checks for what it saw
        self._watch = watch
        # the desired config as a watch parsed it ahead (`mcd.agent.mccache`), taken by name
        self._ahead = ahead
        # a node without mcd state: adopt it as it is (True) or write desiredConfig as its first
        self._adopt = adopt
        # parsed MachineConfigs by name and resourceVersion (rendered configs are large and immutable)
        self._mcs: dict[str, tuple[str, MachineConfig]] = {}
        self._mcs_lock = threading.Lock()
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="prefetch")
        # the boot path's recovery and `rpm-ostree cleanup -r` are done (for this process)
        self._recovered = False
        self.protection = SigtermProtection(events)
        self.boot = BootChecks(applier, writer, events)

    @property
    def name(self) -> str:
        return self.writer.name

    # -- entry point

    def sync(self, *, boot: bool) -> Result:
        """One sync; `boot`: the first of this process (until one succeeds), upstream's boot path."""
        node = self.writer.node()
        if node.deleting:
            LOG.info("node %s is being deleted: nothing to do", self.name)
            return Result.IDLE
        if node.annotations.get(ann.POST_CONFIG_ACTION) == ann.REBOOTING:
            LOG.info("node %s has rebooted", self.name)
            self.mcn.report(mcn.rebooted())
            node = self.writer.set_annotations({ann.POST_CONFIG_ACTION: ""})
        if boot:
            try:
                return self._first_run(node)
            finally:
                self.applier.settle()
        if node.drain_pending:
            LOG.info("a previously requested drain has not yet completed: waiting for the controller")
            return Result.WAITING
        disk = self.applier.disk_config()
        decision = decide_update(node, disk.name if disk else None, self.applier.disk_image())
        if not decision.update:
            self.mcn.report(mcn.updated(self.name))
            return Result.IDLE
        self.mcn.report(mcn.needs_update(self.name))
        images = Images(decision.current_image, decision.desired_image)
        # the desired config is read and parsed while the disk is checked: both take a while
        # on a large config, and one waits on the API server and the other on the disk
        new = self._pool.submit(self._machineconfig, decision.desired_config, disk, stage=True)
        try:
            checked = None
            if not self.applier.forcefile_present():
                with self._phase("check"):
                    checked = self._check_disk(
                        decision.current_config, images.current, "PreflightConfigDriftCheckFailed"
                    )
            current, desired = decision.current_config, decision.desired_config
            return self._update(current, desired, images, new, checked=checked)
        finally:
            self.applier.settle(after=new)  # the prefetch may still stage: it is waited for

    # -- boot path

    def _first_run(self, node: NodeView) -> Result:
        self.boot.retire_leftovers()
        if not self._recovered:
            # once per process: a failing boot check is retried without finishing (or cleaning
            # up) again what the first try already finished
            self.applier.recover()
        node = self.boot.load_annotations(node)
        if ann.DESIRED_CONFIG not in node.annotations:
            raise McdError(f"{ann.DESIRED_CONFIG} annotation not found on node '{self.name}'")
        self.boot.sync_finalize_failure()
        if not self._recovered:
            self.applier.cleanup_rollback()
            self._recovered = True
        if self.applier.disk_config() is None:
            return self._first_config(node)
        # armed before the check: what changes from now on is seen, what the check reads is known
        self._arm()
        if self.applier.bootstrap_annotations() is not None:
            self.applier.retire_bootstrap_annotations()
        current = node.current_config
        disk = self.applier.disk_config()
        if disk is not None and disk.name != current:
            LOG.info(
                'Disk currentConfig "%s" overrides node\'s currentConfig annotation "%s"', disk.name, current
            )
            current = disk.name
        desired = node.desired_config
        # the image recorded on disk wins too (as the config), when there is a config on disk
        disk_image = self.applier.disk_image() if disk is not None else None
        images = Images(node.current_image if disk_image is None else disk_image, node.desired_image)
        if self.applier.forcefile_present():
            LOG.info("forcefile present: skipping the on-disk check and re-applying %s", desired)
            return self._update(current, desired, images)
        checked = self._check_disk(current, images.current, "OnDiskStateValidationFailed")
        if current == desired and images.current == images.desired:
            if self.applier.reboot_pending():
                # as upstream: the config on disk passed the check, so the node is in it, even
                # though the reboot it asked for has not happened in this boot (it stays owed
                # to the next update; the OS image check above catches an OS change not booted)
                LOG.warning(
                    "node %s: the reboot into %s has not happened yet; its config is on disk",
                    self.name,
                    current,
                )
            self._done(current)
            return Result.IDLE
        self.events.normal(
            "BootResync", f"Booting node {self.name}, currentConfig {current}, desiredConfig {desired}"
        )
        return self._update(current, desired, images, checked=checked)

    def _first_config(self, node: NodeView) -> Result:
        """No currentconfig: desiredConfig becomes the first config, or is adopted (`mcd.agent.boot`)."""
        desired = node.desired_config
        new = self._machineconfig(desired)
        if self._adopt:
            self.boot.adopt(new)
            self._done(desired)
            return Result.IDLE
        old = empty_machineconfig()
        policies, overrides = self._policies()
        p = self.applier.plan(old, new, self.applier.facts(old, new, node.topology), policies, overrides)
        message = self.boot.announce_first_config(node, desired, p)
        if p.reconcilable:
            self.writer.set_state(NodeState.WORKING, message)
        return self._update("", desired, Images("", node.desired_image))

    def _arm(self) -> bool:
        """Arm the drift monitor against the config on disk; True when a path drifted from it."""
        on_disk = self.applier.disk_config()
        if self._watch is None or on_disk is None or on_disk.config is None:
            return False
        return self._watch.arm(on_disk)

    def _check_disk(self, config: str, image: str, event_reason: str) -> MachineConfig:
        """The config `config` (running the layered `image`, if any), verified on disk (the probe
        need not read its files again)."""
        mc = with_image(self._disk_or_cluster(config), image)
        # the monitor watching this very config vouches for what it saw no change to
        only = self._watch.unverified(mc) if self._watch is not None else None
        error = self.applier.check(mc, only=only)
        if error is not None:  # what `unverified` gave stays unverified (so does it if check raised)
            # upstream names the on-cluster-layering image the node should run, when there is one
            reason = f"unexpected on-disk state validating against {mc.ocl_image or config}: {error}"
            reason = self.boot.with_root_cause(reason)
            self.events.warning(event_reason, reason)
            raise McdError(reason)
        if self._watch is not None:
            self._watch.verified(mc)
        return mc

    # -- update

    def _machineconfig(
        self, name: str, like: MachineConfig | None = None, *, stage: bool = False
    ) -> MachineConfig:
        """The MachineConfig `name` as the watch parsed it ahead, else from the API server, parsed;
        what it declares as `like` does (the config on disk, mostly) is taken over from that one.
        `stage`: the config to update to, whose update record is written meanwhile
        (`NodeApplier.stage`)."""
        ahead = self._ahead(name) if self._ahead is not None else None
        if ahead is not None:  # kept for a retry, which reads the server for a newer version
            if stage and (text := ahead.config.source_text) is not None:
                self.applier.stage(text)
            with self._mcs_lock:
                self._mcs = {name: (ahead.resource_version, ahead.config)}
            return ahead.config
        try:
            obj, text = self.api.get_machineconfig_json(name)
        except NotFoundError:
            raise McdError(f'machineconfig.machineconfiguration.openshift.io "{name}" not found') from None
        if stage and text is not None:
            self.applier.stage(text)
        rv = str((obj.get("metadata") or {}).get("resourceVersion", ""))
        with self._mcs_lock:
            cached = self._mcs.get(name)
        if cached is not None and rv and cached[0] == rv:
            return cached[1]
        mc = parse_machineconfig(obj, f"MachineConfig {name}", text=text, like=like)
        with self._mcs_lock:
            # one entry: the desired config (a rendered config parsed is tens of megabytes)
            self._mcs = {name: (rv, mc)}
        return mc

    def _disk_or_cluster(self, name: str) -> MachineConfig:
        """The config `name`: the copy on disk when it is that one (no API read; survives its deletion)."""
        disk = self.applier.disk_config()
        if disk is not None and disk.name == name:
            return disk
        return self._machineconfig(name, disk)

    def _policies(self) -> tuple[policy.ClusterPolicies, tuple[str, ...]]:
        """The node disruption policy and the storage overrides of MachineConfiguration/cluster."""
        try:
            return policy.settings_from_machineconfiguration(self.api.get_machineconfiguration("cluster"))
        except policy.PolicyError as exc:
            raise McdError(str(exc)) from None

    def _drain(self, desired: str, then: mcn.Report) -> None:
        self.mcn.flush()  # the controller's drain reports come after the update's own
        with self._phase("drain"):
            self.drainer.drain(desired)
        self.mcn.report(then)

    @contextmanager
    def _phase(self, name: str) -> Iterator[None]:
        start = time.monotonic()
        try:
            yield
        finally:
            self.metrics.phase_seconds.labels(phase=name).observe(time.monotonic() - start)

    def _update(
        self,
        current: str,
        desired: str,
        images: Images,
        prefetched: Future[MachineConfig] | None = None,
        *,
        checked: MachineConfig | None = None,
    ) -> Result:
        if not desired:
            raise McdError(f"node {self.name} has no desiredConfig annotation")
        if self._before_update is not None:
            self._before_update()
        with self._phase("prepare"):
            old = self._disk_or_cluster(current) if current else empty_machineconfig()
            old = with_image(old, images.current)
            if prefetched is not None:
                new = prefetched.result()
            else:
                new = self._machineconfig(desired, old, stage=True)
            # upstream's triggerUpdate: the layered images ride in copies of the configs, so the
            # update rebases to the desired one (and reboots) like any OS change
            new = with_image(new, images.desired)
            policies, overrides = self._policies()
            node = self.writer.node()
            facts = self.applier.facts(old, new, node.topology, checked=checked)
            p = self.applier.plan(old, new, facts, policies, overrides)
        # Working, and SIGTERM protection to the update's end, come before the reconcile check
        # as in upstream's update(); a Degraded/Unreconcilable node keeps its state and reason
        if node.state is not NodeState.WORKING and ann.transition(node.state, NodeState.WORKING) is (
            NodeState.WORKING
        ):
            # a node Working already keeps its reason (what a retried drain waits for)
            self.writer.set_state(NodeState.WORKING)
        with self.protection:
            if not p.reconcilable:
                self.mcn.report(mcn.not_prepared(old.name, new.name, p.reason))
                # upstream's text: the wrapped error, the same words as the node's reason
                self.events.warning("FailedToReconcile", p.reason)
                raise UnreconcilableError(p.reason)
            LOG.info("updating node %s from %s to %s", self.name, old.name, new.name)
            self.mcn.report(mcn.prepared(p.actions, p.drain))
            # upstream's pivot error gauge: counts failed OS changes, back to 0 after one succeeds
            os_change = p.diff.os_update or p.diff.kernel_type or p.diff.extensions
            applying = mcn.applying(os_change, p.diff.passwd)
            drain: Callable[[], None] | None = None
            if p.drain and not node.single_replica:
                # run by the executor at the plan's drain step, before anything on the node changes
                drain = partial(self._drain, desired, applying)
            else:
                if node.single_replica:
                    self.events.normal("Drain", "Drain not required, skipping")
                self.mcn.report(mcn.drain_not_required())
                self.mcn.report(applying)
            if self.applier.coreos:
                for reason, message in os_events_before(p, new):
                    self.events.normal(reason, message)
            self.applier.defer_cleanup()  # done once the sync is over (`settle`), after Done
            with self._phase("apply"):
                try:
                    applied = self.applier.apply(
                        old, new, facts, policies, drain=drain, storage_overrides=overrides, planned=p
                    )
                except McdError as exc:
                    if isinstance(exc, ApplyError) and exc.event is not None:
                        self.events.warning(*exc.event)  # a post-config action failed
                    if os_change:
                        self.metrics.pivot_errors.inc()
                    if self.mcn.last is applying:  # the drain (if any) went through: the apply failed
                        self.mcn.report(mcn.apply_failed(str(exc)))
                    raise
            with self._mcs_lock:
                self._mcs = {}  # applied: the config on disk now (`disk_config`), kept there once
            if applied.elsewhere and self.applier.reboot_pending():  # another mcd's reboot: not twice
                return Result.IDLE
            self.mcn.report(mcn.applied(os_change, p.diff.passwd))
            if os_change:
                self.metrics.pivot_errors.set(0)
            if self.applier.coreos:
                for reason, message in os_events_after(p, old, new):
                    self.events.normal(reason, message)
                if os_update_staged(p, new):
                    self.events.post_now(OS_UPDATE_STAGED, "Changes to OS staged")
            if applied.reboot:
                self.mcn.report(mcn.reboot_required())
                return self._reboot(new.name)
            self._report_actions(applied)
            self.metrics.reboots_avoided.inc()
            with self._phase("complete"):
                self._done(new.name)
            return Result.IDLE

    def _report_actions(self, applied: Applied) -> None:
        """Upstream's events for a rebootless update; on a root that is not a running system the
        service actions were not run, and the events say so."""
        if not applied.actions:
            self.mcn.report(mcn.post_action_none())
            self.events.normal("SkipReboot", "Config changes do not require reboot.")
            return
        done = [(a.verb, "" if a.verb == "daemon-reload" else a.service) for a in applied.actions]
        self.mcn.report(mcn.post_action_done(done))
        for action in applied.actions:
            note = " (skipped: not the live root)" if action.skipped else ""
            # daemon-reload is worded as a service reloaded, as upstream's
            past, reason = (
                ("restarted", "ServiceRestart") if action.verb == "restart" else ("reloaded", "ServiceReload")
            )
            text = f"Service {action.service} was {past}."
            self.events.normal(reason, f"Config changes do not require reboot. {text}{note}")
            if not action.skipped:
                LOG.info("%s service %s successfully!", action.service, past)

    def _reboot(self, config: str) -> Result:
        reason = f"Node will reboot into config {config}"
        self.protection.remove()  # the update is over: only the reboot is left
        self.events.normal("Reboot", reason)
        LOG.info("initiating reboot: %s", reason)
        self.writer.set_annotations({ann.POST_CONFIG_ACTION: ann.REBOOTING})
        try:
            if self.applier.reboot(reason):
                LOG.info("reboot successful")
                return Result.REBOOTING
        except McdError:
            self.metrics.reboots_failed.inc()
            raise McdError("reboot command failed, something is seriously wrong") from None
        LOG.info(
            "reboot simulated: %s is not a running system; restarting the daemon as after a boot",
            self.applier.root.prefix,
        )
        self.applier.simulated_boot()
        return Result.SIMULATED_REBOOT

    def _done(self, config: str) -> None:
        """Upstream's updateConfigAndState for a node in its desired config: uncordon, NodeDone, Done.

        The drift monitor is armed against the config on disk first: a path changed while the
        update ran is reported (Degraded) instead of Done.
        """
        node = self.writer.node()
        image = self.applier.disk_image() or ""
        if node.desired_image and image != node.desired_image:
            # never Done outside the desired image: that would be asked to update again at once
            raise McdError(
                f"node {self.name} is in config {config} but runs image {image or '(none)'}, "
                f"not its desiredImage {node.desired_image}"
            )
        self.boot.verify_extensions(self._disk_or_cluster(config))
        if self._arm():
            LOG.warning("node %s drifted from %s while it was updated: not Done", self.name, config)
            return
        self.mcn.report(mcn.resumed(config))
        self.mcn.flush()
        try:
            self.drainer.uncordon(config)
        except StoppingError:
            raise
        except McdError as exc:
            self.metrics.set_update("", str(exc))  # upstream's only failure it records there
            raise
        self.events.normal("NodeDone", f"Setting node {self.name}, currentConfig {config} to Done")
        extra: dict[str, str | None] = {ann.CURRENT_CONFIG: config, ann.CURRENT_IMAGE: image or None}
        extra |= {} if node.desired_image else {ann.DESIRED_IMAGE: None}
        self.writer.set_state(NodeState.DONE, "", extra)
        self.mcn.report(mcn.updated(self.name))  # at rest in its desired config, as the next sync says
        self.metrics.set_update(update_label(config, image))
        LOG.info("node %s is in config %s: Done", self.name, config)


@dataclass(frozen=True)
class Images:
    """The on-cluster-layering images of an update: the node's now, and the desired one ("" none)."""

    current: str
    desired: str


def with_image(mc: MachineConfig, image: str) -> MachineConfig:
    """`mc` running the layered `image`, as upstream's daemon embeds it in a copy of the config
    (`osImageURL` replaced, the original kept in an annotation); `mc` itself without one.

    Only the value changes: `raw`, which the update records as currentconfig, stays as read
    (upstream strips the image from the record too; it goes to currentimage).
    """
    if not image or mc.ocl_image == image:
        return mc
    annotations = dict(mc.annotations)
    annotations[ORIGINAL_OS_IMAGE_ANNOTATION] = mc.os_image_url
    annotations[OCL_IMAGE_ANNOTATION] = image
    return replace(mc, os_image_url=image, annotations=tuple(annotations.items()))
