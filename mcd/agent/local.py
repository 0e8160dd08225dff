"""`mcd start --config-dir DIR` without a cluster: the node's configs come from a mounted directory and
its state goes to the records `mcd status` reads.

The same shape as the cluster agent (`mcd.agent.loop`): watchers (the directory, the drift monitor)
put a key into one queue and this loop does the work. A snapshot of the directory is applied
once it has been stable for the grace period (`mcd.agent.watch.configdir`); the update, the reboot
decision and the drift handling are the cluster agent's (`NodeApplier`, `DriftReporter`). With
no controller there is no drain: nothing else runs pods here.
"""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path
from types import FrameType

from mcd.agent.errors import McdError
from mcd.agent.kube.annotations import NodeState
from mcd.agent.node_apply import NodeApplier
from mcd.agent.report.events import EventRecorder
from mcd.agent.report.metrics import Metrics
from mcd.agent.state import AgentMachine, AgentState
from mcd.agent.sync import Result
from mcd.agent.watch.configdir import ConfigDirError, ConfigDirSource, Snapshot
from mcd.agent.watch.driftreport import DriftPolicy, DriftReporter
from mcd.agent.watch.heal import Healer
from mcd.agent.workqueue import WorkQueue
from mcd.config.findings import Finding, InputError
from mcd.config.machineconfig import empty_machineconfig
from mcd.config.text import shown
from mcd.host import status
from mcd.host.root import HostRoot
from mcd.host.rootlock import DEFAULT_TIMEOUT as DEFAULT_LOCK_TIMEOUT
from mcd.host.runner import SubprocessRunner

LOG = logging.getLogger(__name__)


class LocalReporter:
    """`StateReporter` on the root's status record (no Node to annotate)."""

    def __init__(self, applier: NodeApplier) -> None:
        self.applier = applier
        self.state, self.reason, self.desired = NodeState.DONE, "", ""

    def set(self, state: NodeState, reason: str = "", desired: str | None = None) -> None:
        self.state, self.reason = state, reason
        if desired is not None:
            self.desired = desired
        (LOG.info if state in (NodeState.DONE, NodeState.WORKING) else LOG.error)(
            "node state %s%s", state.value, f": {reason}" if reason else ""
        )
        try:
            status.record_state(self.applier.root, state.value, reason, self.desired)
        except OSError as exc:
            LOG.warning("could not record the node state for mcd status: %s", exc)

    def report_drift(self, reason: str) -> None:
        self.set(NodeState.DEGRADED, reason)

    def current(self) -> tuple[NodeState, str]:
        return self.state, self.reason


class LocalAgent:
    def __init__(
        self,
        applier: NodeApplier,
        directory: Path,
        *,
        grace: float = 5.0,
        drift_policy: DriftPolicy = DriftPolicy.DEGRADE,
    ) -> None:
        self.applier = applier
        self.stop = threading.Event()
        self.queue = WorkQueue()
        self.machine = AgentMachine()
        self.events = EventRecorder(None, "localhost")
        self.metrics = Metrics()
        self.reporter = LocalReporter(applier)
        healer = Healer(applier.host) if drift_policy is DriftPolicy.HEAL else None
        self.drift = DriftReporter(
            applier,
            self.reporter,
            self.events,
            self.metrics,
            lambda: self.queue.put("drift"),
            policy=drift_policy,
            healer=healer,
        )
        self.source = ConfigDirSource(directory, lambda: self.queue.put("config"), grace=grace)
        self.applied: list[str] = []  # checksums of the snapshots applied, oldest first
        self.reboots = 0
        self._last: Snapshot | None = None

    def run(self) -> Result:
        """Apply the directory's configs until stopped or a real reboot is on its way (a sandbox
        root's simulated reboot is taken in place: the agent goes on as after a boot)."""
        self.applier.recover()
        self.source.start()
        self.queue.put("config")  # what is there at start
        self.machine.to(AgentState.IDLE)
        try:
            while not self.stop.is_set():
                self.queue.wait(self.source.due_in())
                keys = self.queue.take()
                if self.stop.is_set():
                    break
                if "config" in keys:
                    self._read()
                if "drift" in keys and self.drift.handle() and self._last is not None:
                    self._apply(self._last)  # put back: re-apply the current config, report Done
                snap = self.source.take()
                if snap is not None:
                    self._last = snap
                    result = self._apply(snap)
                    if result is not Result.IDLE:
                        return result
        finally:
            self.source.stop()
            self.drift.stop()
        return Result.IDLE

    def _read(self) -> None:
        try:
            self.source.changed()
        except (OSError, ConfigDirError) as exc:
            self.reporter.set(NodeState.DEGRADED, f"reading {self.source.directory}: {exc}")

    def _apply(self, snap: Snapshot) -> Result:
        self.machine.begin_sync()
        try:
            parsed = snap.parse()
        except ConfigDirError as exc:
            self.reporter.set(NodeState.DEGRADED, str(exc))
            return Result.IDLE
        new = parsed.machineconfigs[parsed.desired]
        disk = self.applier.disk_config()
        old = disk if disk is not None else empty_machineconfig()
        try:
            facts = self.applier.facts(old, new, "HighlyAvailable")
            p = self.applier.plan(old, new, facts, parsed.policies)
            if not p.reconcilable:
                self.reporter.set(NodeState.UNRECONCILABLE, p.reason, parsed.desired)
                self.machine.to(AgentState.DEGRADED)
                return Result.IDLE
            self.machine.to(AgentState.UPDATING)
            self.drift.suspend()  # the update's own writes are not drift
            self.reporter.set(NodeState.WORKING, "", parsed.desired)
            LOG.info("updating the node from %s to %s (%s)", old.name, new.name, snap.checksum[:12])
            applied = self.applier.apply(old, new, facts, parsed.policies)
            self.applied.append(snap.checksum)
            if applied.reboot:
                return self._reboot(new.name)
        except McdError as exc:
            self.reporter.set(NodeState.DEGRADED, str(exc), parsed.desired)
            self.machine.failed()
            self.drift.ensure()
            return Result.IDLE
        self.machine.to(AgentState.IDLE)
        if not self.drift.ensure():  # armed before Done: a path edited meanwhile is Degraded
            self.reporter.set(NodeState.DONE, "", parsed.desired)
        return Result.IDLE

    def _reboot(self, config: str) -> Result:
        reason = f"Node will reboot into config {config}"
        self.reboots += 1
        if self.applier.reboot(reason):
            self.machine.to(AgentState.REBOOTING)
            return Result.REBOOTING
        LOG.info("reboot simulated: %s is not a running system", self.applier.root.prefix)
        self.applier.simulated_boot()
        self.reporter.set(NodeState.DONE, "")
        self.machine.to(AgentState.IDLE)
        self.drift.ensure()
        return Result.IDLE


def run_local(
    root_mount: str,
    config_dir: str,
    grace: float,
    drift_policy: str,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
) -> int:
    """`mcd start --config-dir DIR` without --node-name, until stopped or the node reboots."""

    for flag, path in (("--root-mount", root_mount), ("--config-dir", config_dir)):
        if not Path(path).is_dir():
            raise InputError("mcd", [Finding((), f"{flag} {shown(path)} is not a directory")])
    applier = NodeApplier(HostRoot(Path(root_mount)), SubprocessRunner(), lock_timeout=lock_timeout)
    agent = LocalAgent(applier, Path(config_dir), grace=grace, drift_policy=DriftPolicy(drift_policy))

    def stop(_signum: int, _frame: FrameType | None) -> None:
        agent.stop.set()
        agent.queue.put("stop")

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    agent.run()
    return 0
