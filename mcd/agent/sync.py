"""One sync of the node: read everything, decide, hand the update to its run. Idempotent, so the
loop may call it any number of times (level-triggered, as upstream's `syncNode`).

The first sync after the process starts takes upstream's boot path (`checkStateOnFirstRun`):
the first boot's leftovers, the bootstrap annotations and the previous boot's finalization
failure (`mcd.agent.boot`), the on-disk config winning over the annotation, the on-disk check,
then Done or the pending update. Later syncs wait for a drain in progress, decide with
`prepUpdateFromCluster`'s rules and check the disk (preflight). The update itself is a run of
phases (`mcd.agent.phases`); what the sync and the run do is reported by one observer
(`mcd.agent.observer`). Errors are raised to the loop, which reports them through
`mcd.agent.errors.classify`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from mcd.agent.boot import BootChecks
from mcd.agent.configs import ConfigApi, ConfigReader, Images, with_image
from mcd.agent.drain import Drainer
from mcd.agent.mccache import Ahead
from mcd.agent.node_apply import NodeApplier
from mcd.agent.observer import Observer
from mcd.agent.phases import DiskWatch, Result, Run, UpdateRun, arm
from mcd.agent.report.events import EventRecorder, SigtermProtection
from mcd.agent.report.mcn import MachineConfigNodeReporter
from mcd.agent.report.metrics import Metrics
from mcd.agent.report.node import NodeWriter
from mcd.config.machineconfig import MachineConfig, empty_machineconfig
from mcd.node import annotations as ann
from mcd.node.annotations import NodeView, decide_update
from mcd.node.errors import McdError

__all__ = ["Result", "Syncer"]

LOG = logging.getLogger(__name__)


class Syncer:
    """The decision: what the node's annotations and disk ask for, and which run answers it."""

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
        observer: Observer | None = None,
    ) -> None:
        """`observer`: the agent's (`mcd.agent.compose`); without one, an observer of its own,
        which calls `before_update` when an update starts (the drift monitor's suspension)."""
        self.api, self.writer, self.events, self.metrics = api, writer, events, metrics
        self.applier = applier
        self.observer = observer or Observer(
            writer, events, metrics, mcn_reporter, applier=applier, suspend=before_update
        )
        # the drift monitor: armed before Done, trusted by the on-disk checks for what it saw
        self._watch = watch
        self.configs = ConfigReader(api, applier, ahead)
        # a node without mcd state: adopt it as it is (True) or write desiredConfig as its first
        self._adopt = adopt
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="prefetch")
        # the boot path's recovery and `rpm-ostree cleanup -r` are done (for this process)
        self._recovered = False
        self.boot = BootChecks(applier, writer, events)
        self.phases = UpdateRun(
            configs=self.configs,
            applier=applier,
            drainer=drainer,
            writer=writer,
            extensions=self.boot.verify_extensions,
            observer=self.observer,
            watch=watch,
        )

    @property
    def name(self) -> str:
        return self.writer.name

    @property
    def drainer(self) -> Drainer | None:
        return self.phases.drainer

    @drainer.setter
    def drainer(self, drainer: Drainer) -> None:
        self.phases.drainer = drainer  # a test's stand-in, for the run's DRAIN and UNCORDON

    @property
    def mcn(self) -> MachineConfigNodeReporter:
        return self.observer.mcn

    @property
    def protection(self) -> SigtermProtection:
        return self.observer.protection

    # -- entry point

    def sync(self, *, boot: bool) -> Result:
        """One sync; `boot`: the first of this process (until one succeeds), upstream's boot path."""
        node = self.writer.node()
        if node.deleting:
            LOG.info("node %s is being deleted: nothing to do", self.name)
            return Result.IDLE
        if node.annotations.get(ann.POST_CONFIG_ACTION) == ann.REBOOTING:
            node = self.observer.rebooted()
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
            self.observer.up_to_date()
            return Result.IDLE
        self.observer.needs_update()
        images = Images(decision.current_image, decision.desired_image)
        # the desired config is read and parsed while the disk is checked: both take a while
        # on a large config, and one waits on the API server and the other on the disk
        new = self._pool.submit(self.configs.machineconfig, decision.desired_config, disk, stage=True)
        policies = self._pool.submit(self.configs.policies)
        try:
            checked = None
            if not self.applier.forcefile_present():
                with self.observer.timed("check"):
                    checked = self._check_disk(
                        decision.current_config, images.current, "PreflightConfigDriftCheckFailed"
                    )
            current, desired = decision.current_config, decision.desired_config
            return self.phases.run(Run(current, desired, images, new, checked, policies))
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
        arm(self._watch, self.applier)
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
            return self.phases.finish(current)
        self.observer.boot_resync(current, desired)
        return self._update(current, desired, images, checked=checked)

    def _first_config(self, node: NodeView) -> Result:
        """No currentconfig: desiredConfig becomes the first config, or is adopted (`mcd.agent.boot`)."""
        desired = node.desired_config
        new = self.configs.machineconfig(desired)
        if self._adopt:
            self.boot.adopt(new)
            return self.phases.finish(desired)
        old = empty_machineconfig()
        policies, overrides = self.configs.policies()
        p = self.applier.plan(old, new, self.applier.facts(old, new, node.topology), policies, overrides)
        message = self.boot.announce_first_config(node, desired, p)
        if p.reconcilable:
            self.observer.first_config(message)
        return self._update("", desired, Images("", node.desired_image))

    def _check_disk(self, config: str, image: str, event_reason: str) -> MachineConfig:
        """The config `config` (running the layered `image`, if any), verified on disk (the probe
        need not read its files again)."""
        mc = with_image(self.configs.disk_or_cluster(config), image)
        # the monitor watching this very config vouches for what it saw no change to
        only = self._watch.unverified(mc) if self._watch is not None else None
        error = self.applier.check(mc, only=only)
        if error is not None:  # what `unverified` gave stays unverified (so does it if check raised)
            # upstream names the on-cluster-layering image the node should run, when there is one
            reason = f"unexpected on-disk state validating against {mc.ocl_image or config}: {error}"
            reason = self.boot.with_root_cause(reason)
            self.observer.check_failed(event_reason, reason)
            raise McdError(reason)
        if self._watch is not None:
            self._watch.verified(mc)
        return mc

    def _update(
        self,
        current: str,
        desired: str,
        images: Images,
        prefetched: Future[MachineConfig] | None = None,
        *,
        checked: MachineConfig | None = None,
    ) -> Result:
        return self.phases.run(Run(current, desired, images, prefetched, checked))
