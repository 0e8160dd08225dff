"""The update as an explicit run of phases: prepare, Working, drain, apply, then reboot, or verify,
uncordon and Done.

Each phase is one step that does the work and returns the next phase (or the run's `Result`);
the run tells one observer (`RunObserver`, implemented by `mcd.agent.observer.Observer`) when a
phase is entered, left or failed, and the observer alone turns that into annotations, Events,
MachineConfigNode conditions and metrics. No step reports anything and nothing calls back up
into the loop: the run's only outputs are its result, its exception and what the observer saw.

The boot path of a node already in its desired config runs only the last three phases
(`UpdateRun.finish`).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Collection
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Protocol

from mcd import policy
from mcd.agent.applied import Applied
from mcd.agent.configs import Images, with_image
from mcd.agent.drain import Drainer
from mcd.agent.errors import UnreconcilableError
from mcd.agent.node_apply import NodeApplier
from mcd.config.machineconfig import MachineConfig, empty_machineconfig
from mcd.node import machineconfignode as mcn
from mcd.node.annotations import NodeView
from mcd.node.errors import McdError
from mcd.planner.plan import Facts, Plan

LOG = logging.getLogger(__name__)


class Result(enum.Enum):
    """What a sync (or an update run) ended in, for the loop."""

    IDLE = "idle"  # nothing more to do until the node changes
    WAITING = "waiting"  # waiting for the controller (a drain in progress)
    REBOOTING = "rebooting"  # a real reboot was requested: no more syncs in this boot
    SIMULATED_REBOOT = "simulated-reboot"  # restart the process and take the boot path


class Phase(enum.Enum):
    PREPARE = "prepare"  # read both configs, probe the node, plan
    WORKING = "working"  # the node says Working; an unreconcilable plan stops here
    DRAIN = "drain"  # the plan drains and the node is not a single replica
    APPLY = "apply"  # the update transaction (rolled back on failure)
    REBOOT = "reboot"  # the plan reboots: the last phase of this boot
    VERIFY = "verify"  # the node runs the desired image and extensions; no drift meanwhile
    UNCORDON = "uncordon"
    DONE = "done"


class ConfigSource(Protocol):
    """Where a run reads its configs: the cluster's (`mcd.agent.configs.ConfigReader`) or a
    directory snapshot's (`mcd.agent.local`)."""

    def machineconfig(
        self, name: str, like: MachineConfig | None = None, *, stage: bool = False
    ) -> MachineConfig: ...

    def disk_or_cluster(self, name: str) -> MachineConfig: ...

    def applied(self) -> None: ...

    def policies(self) -> tuple[policy.ClusterPolicies, tuple[str, ...]]: ...


class NodeSource(Protocol):
    """The node as a run reads it (`mcd.agent.report.node.NodeWriter`; a fixed one without a cluster)."""

    @property
    def name(self) -> str: ...

    def node(self) -> NodeView: ...


class DiskWatch(Protocol):
    """The drift monitor as the sync uses it (`mcd.agent.watch.driftreport.DriftReporter`)."""

    def arm(self, mc: MachineConfig) -> bool: ...

    def unverified(self, mc: MachineConfig) -> Collection[str] | None: ...

    def verified(self, mc: MachineConfig) -> None: ...


@dataclass
class Run:
    """One update's state, filled in as its phases go: what the observer reports from."""

    current: str
    desired: str
    images: Images
    prefetched: Future[MachineConfig] | None = None
    checked: MachineConfig | None = None
    # the cluster's disruption policies, read meanwhile too (a round trip off the update's path)
    policies_read: Future[tuple[policy.ClusterPolicies, tuple[str, ...]]] | None = None
    old: MachineConfig = field(default_factory=empty_machineconfig)
    new: MachineConfig | None = None
    node: NodeView | None = None
    facts: Facts | None = None
    policies: policy.ClusterPolicies | None = None
    overrides: tuple[str, ...] = ()
    plan: Plan | None = None
    # the MachineConfigNode report of the apply, kept by identity: reported once the drain is over
    applying: mcn.Report | None = None
    applied: Applied | None = None
    # set by WORKING: a drain phase runs (the plan drains, a drainer, not a single replica)
    drains: bool = False
    # set by VERIFY for DONE: the image the node runs ("" none)
    image: str = ""

    @property
    def config(self) -> str:
        """The config the node ends in: the one applied, or the desired one on the boot path."""
        return self.new.name if self.new is not None else self.desired

    @property
    def os_change(self) -> bool:
        """An OS change (upstream's pivot): counted by the pivot error gauge."""
        d = self.plan.diff if self.plan is not None else None
        return d is not None and bool(d.os_update or d.kernel_type or d.extensions)


class RunObserver(Protocol):
    """Who is told of each phase; the only place a run's progress becomes visible."""

    def entered(self, phase: Phase, run: Run) -> None: ...

    def left(self, phase: Phase, run: Run, after: Phase | Result) -> None: ...

    def failed(self, phase: Phase, run: Run, exc: BaseException) -> None: ...

    def ended(self, run: Run) -> None: ...


def arm(watch: DiskWatch | None, applier: NodeApplier) -> bool:
    """Arm the drift monitor against the config on disk; True when a path drifted from it."""
    on_disk = applier.disk_config()
    if watch is None or on_disk is None or on_disk.config is None:
        return False
    return watch.arm(on_disk)


def _drained() -> None:
    """The executor's drain step once the run's DRAIN phase drained."""


class UpdateRun:
    """The steps of an update, run in order by `run` (the cluster agent keeps one; the local agent
    makes one per directory snapshot)."""

    def __init__(
        self,
        *,
        configs: ConfigSource,
        applier: NodeApplier,
        writer: NodeSource,
        observer: RunObserver,
        drainer: Drainer | None = None,
        extensions: Callable[[MachineConfig], None] | None = None,
        watch: DiskWatch | None = None,
    ) -> None:
        """`drainer`: none without a cluster (no drain, no uncordon); `extensions`: the check
        that the node boots the config's extensions (`BootChecks.verify_extensions`)."""
        self.configs, self.applier, self.drainer, self.writer = configs, applier, drainer, writer
        self.observer, self.extensions, self.watch = observer, extensions, watch
        self._steps: dict[Phase, Callable[[Run], Phase | Result]] = {
            Phase.PREPARE: self._prepare,
            Phase.WORKING: self._working,
            Phase.DRAIN: self._drain,
            Phase.APPLY: self._apply,
            Phase.REBOOT: self._reboot,
            Phase.VERIFY: self._verify,
            Phase.UNCORDON: self._uncordon,
            Phase.DONE: self._done,
        }

    @property
    def name(self) -> str:
        return self.writer.name

    def run(self, run: Run, start: Phase = Phase.PREPARE) -> Result:
        """Step from `start` until a phase returns a result; the observer sees every move."""
        if start is Phase.PREPARE and not run.desired:
            raise McdError(f"node {self.name} has no desiredConfig annotation")
        step: Phase | Result = start
        try:
            while isinstance(step, Phase):
                phase = step
                self.observer.entered(phase, run)
                try:
                    step = self._steps[phase](run)
                except BaseException as exc:
                    self.observer.failed(phase, run, exc)
                    raise
                self.observer.left(phase, run, step)
            return step
        finally:
            self.observer.ended(run)

    def finish(self, config: str) -> Result:
        """A node found in its desired config `config`: verify, uncordon, Done."""
        return self.run(Run(config, config, Images("", "")), Phase.VERIFY)

    # -- the steps

    def _prepare(self, run: Run) -> Phase:
        old = self.configs.disk_or_cluster(run.current) if run.current else empty_machineconfig()
        run.old = old = with_image(old, run.images.current)
        if run.prefetched is not None:
            new = run.prefetched.result()
        else:
            new = self.configs.machineconfig(run.desired, old, stage=True)
        # upstream's triggerUpdate: the layered images ride in copies of the configs, so the
        # update rebases to the desired one (and reboots) like any OS change
        run.new = new = with_image(new, run.images.desired)
        read = run.policies_read
        run.policies, run.overrides = read.result() if read is not None else self.configs.policies()
        run.node = node = self.writer.node()
        run.facts = self.applier.facts(old, new, node.topology, checked=run.checked)
        run.plan = self.applier.plan(old, new, run.facts, run.policies, run.overrides)
        return Phase.WORKING

    def _working(self, run: Run) -> Phase:
        # the reconcile check comes after Working, as in upstream's update()
        assert run.plan is not None and run.new is not None
        if not run.plan.reconcilable:
            raise UnreconcilableError(run.plan.reason)
        LOG.info("updating node %s from %s to %s", self.name, run.old.name, run.new.name)
        run.applying = mcn.applying(run.os_change, run.plan.diff.passwd)
        single = run.node is not None and run.node.single_replica
        run.drains = self.drainer is not None and run.plan.drain and not single
        return Phase.DRAIN if run.drains else Phase.APPLY

    def _drain(self, run: Run) -> Phase:
        assert self.drainer is not None
        self.drainer.drain(run.desired)
        return Phase.APPLY

    def _apply(self, run: Run) -> Phase | Result:
        assert run.new is not None and run.facts is not None and run.policies is not None
        self.applier.defer_cleanup()  # done once the sync is over (`settle`), after Done
        run.applied = applied = self.applier.apply(
            run.old,
            run.new,
            run.facts,
            run.policies,
            # drained by DRAIN; none for a single replica (the executor says it skipped it)
            drain=_drained if run.drains else None,
            storage_overrides=run.overrides,
            planned=run.plan,
        )
        self.configs.applied()
        if applied.elsewhere and self.applier.reboot_pending():  # another mcd's reboot: not twice
            return Result.IDLE
        return Phase.REBOOT if applied.reboot else Phase.VERIFY

    def _reboot(self, run: Run) -> Result:
        reason = reboot_reason(run.config)
        try:
            if self.applier.reboot(reason):
                LOG.info("reboot successful")
                return Result.REBOOTING
        except McdError:
            raise McdError("reboot command failed, something is seriously wrong") from None
        LOG.info(
            "reboot simulated: %s is not a running system; restarting the daemon as after a boot",
            self.applier.root.prefix,
        )
        self.applier.simulated_boot()
        return Result.SIMULATED_REBOOT

    def _verify(self, run: Run) -> Phase | Result:
        """Upstream's updateConfigAndState for a node in its desired config, up to the uncordon.

        The drift monitor is armed against the config on disk first: a path changed while the
        update ran is reported (Degraded) instead of Done."""
        config = run.config
        node = self.writer.node()
        run.node = node
        run.image = self.applier.disk_image() or ""
        if node.desired_image and run.image != node.desired_image:
            # never Done outside the desired image: that would be asked to update again at once
            raise McdError(
                f"node {self.name} is in config {config} but runs image {run.image or '(none)'}, "
                f"not its desiredImage {node.desired_image}"
            )
        if self.extensions is not None:
            self.extensions(self.configs.disk_or_cluster(config))
        if arm(self.watch, self.applier):
            LOG.warning("node %s drifted from %s while it was updated: not Done", self.name, config)
            return Result.IDLE
        return Phase.UNCORDON

    def _uncordon(self, run: Run) -> Phase:
        if self.drainer is not None:
            self.drainer.uncordon(run.config)
        return Phase.DONE

    def _done(self, run: Run) -> Result:
        return Result.IDLE


def reboot_reason(config: str) -> str:
    return f"Node will reboot into config {config}"
