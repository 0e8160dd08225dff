"""`mcd start --config-dir DIR` without a cluster: the node's configs come from a mounted directory and
its state goes to the records `mcd status` reads.

The same shape as the cluster agent (`mcd.agent.loop`): watchers (the directory, the drift monitor)
put a key into one queue and this loop does the work. A snapshot of the directory is applied
once it has been stable for the grace period (`mcd.agent.watch.configdir`); the update is the
cluster agent's run of phases (`mcd.agent.phases.UpdateRun`) with the snapshot as its configs,
a node of no annotations and an observer of its own (`LocalObserver`: the status record, not a
Node); the drift handling is the cluster agent's (`DriftReporter`). With no controller there is
no drain: nothing else runs pods here.

As the cluster agent, it never dies of an error (`mcd.runtime.guard`): a failed round is logged,
reported Degraded and tried again with backoff, and SIGTERM only sets a flag.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from mcd import policy
from mcd.agent.configs import Images
from mcd.agent.errors import UnreconcilableError
from mcd.agent.node_apply import NodeApplier
from mcd.agent.phases import Phase, Result, Run, UpdateRun
from mcd.agent.report.events import EventRecorder
from mcd.agent.report.metrics import Metrics
from mcd.agent.state import AgentMachine, AgentState
from mcd.agent.watch.configdir import ConfigDirError, ConfigDirSource, ParsedSnapshot, Snapshot
from mcd.agent.watch.driftreport import DriftPolicy, DriftReporter
from mcd.agent.watch.heal import Healer
from mcd.agent.workqueue import WorkQueue
from mcd.config.findings import Finding, InputError
from mcd.config.machineconfig import MachineConfig
from mcd.config.text import shown
from mcd.host import status
from mcd.host.root import HostRoot
from mcd.host.rootlock import DEFAULT_TIMEOUT as DEFAULT_LOCK_TIMEOUT
from mcd.host.runner import SubprocessRunner
from mcd.node.annotations import NodeState, NodeView
from mcd.node.errors import McdError
from mcd.runtime import guard

LOG = logging.getLogger(__name__)

# the queue's keys: the directory, the drift monitor, a failed round again, a snapshot settled
CONFIG, DRIFT, RETRY, CONFIG_SETTLED = "config", "drift", "retry", "config-settled"


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
            lambda: self.queue.add("drift"),
            policy=drift_policy,
            healer=healer,
        )
        self.source = ConfigDirSource(directory, lambda: self.queue.add("config"), grace=grace)
        self._last: Snapshot | None = None
        self._started = False

    def request_stop(self, _signum: int = 0) -> None:
        """Stop after the round in progress (any thread, never signal context)."""
        self.stop.set()
        self.queue.shut_down()

    def run(self) -> Result:
        """Apply the directory's configs until stopped or a real reboot is on its way (a sandbox
        root's simulated reboot is taken in place: the agent goes on as after a boot)."""
        self._started = False
        self.queue.add(CONFIG)  # what is there at start
        self.machine.to(AgentState.IDLE)
        try:
            while not self.stop.is_set():
                key = self.queue.get()
                if key is None or self.stop.is_set():
                    break
                try:
                    result = self._round(key)
                except Exception as exc:  # nothing ends the agent: report, back off, try again
                    self._failed(key, exc)
                    continue
                finally:
                    self.queue.done(key)
                self.queue.forget(key)
                self.queue.forget(RETRY)  # a round went through: the next failure backs off from 1 s
                if result is not Result.IDLE:
                    return result
        finally:
            guard.call_guarded("stopping the config directory watch", self.source.stop)
            guard.call_guarded("stopping the drift monitor", self.drift.stop)
        return Result.IDLE

    def _round(self, key: str) -> Result:
        """The one handler of `key`: `config` (the directory changed or its snapshot settled),
        `drift` (the monitor saw a change), `retry` (a failed round, again)."""
        if not self._started:
            self.applier.recover()
            self.source.start()
            self._started = True
        result = Result.IDLE
        if key == CONFIG:
            self._read()
        if key == DRIFT and self.drift.handle() and self._last is not None:
            self._apply(self._last)  # put back: re-apply the current config, report Done
        if key == RETRY and self._last is not None:
            result = self._apply(self._last)
        snap = self.source.take()
        if snap is not None:
            self._last = snap
            result = self._apply(snap)
        due = self.source.due_in()
        if due is not None:
            self.queue.add_after(CONFIG_SETTLED, due)  # the snapshot settles after its grace period
        return result

    def _failed(self, key: str, exc: Exception) -> None:
        delay = self.queue.add_rate_limited(RETRY)
        if key in (CONFIG, DRIFT):
            self.queue.add_after(key, delay)
        LOG.error("round of the local agent failed (retry in %.0fs): %s", delay, exc)
        LOG.debug("failure details", exc_info=exc)
        if self.machine.state is AgentState.UPDATING:
            self.machine.failed()
        self.reporter.set(NodeState.DEGRADED, str(exc) or type(exc).__name__)

    def _read(self) -> None:
        try:
            self.source.changed()
        except (OSError, ConfigDirError) as exc:
            self.reporter.set(NodeState.DEGRADED, f"reading {self.source.directory}: {exc}")

    def _apply(self, snap: Snapshot) -> Result:
        """The snapshot's desired config through the cluster agent's update run (`mcd.agent.phases`)."""
        self.machine.begin_sync()
        try:
            parsed = snap.parse()
        except ConfigDirError as exc:
            self.reporter.set(NodeState.DEGRADED, str(exc))
            return Result.IDLE
        disk = self.applier.disk_config()
        observer = LocalObserver(self.reporter, self.machine, self.drift, parsed.desired)
        run = UpdateRun(
            configs=SnapshotConfigs(self.applier, parsed),
            applier=self.applier,
            writer=LocalNode(),
            observer=observer,
            watch=self.drift,  # armed before Done: a path edited meanwhile is Degraded
        )
        LOG.info("applying %s (%s)", parsed.desired, snap.checksum[:12])
        try:
            result = run.run(Run(disk.name if disk is not None else "", parsed.desired, Images("", "")))
        except McdError:
            return Result.IDLE  # reported by the observer
        finally:
            self.applier.settle()
        if result is Result.REBOOTING:
            self.machine.to(AgentState.REBOOTING)
            return result
        if result is Result.SIMULATED_REBOOT:
            # taken in place: the agent goes on as after a boot
            self.reporter.set(NodeState.DONE, "")
            self.machine.to(AgentState.IDLE)
            self.drift.ensure()
        elif self.machine.state is AgentState.UPDATING:
            self.machine.to(AgentState.IDLE)  # drifted while it updated: Degraded, not Done
        return Result.IDLE


class SnapshotConfigs:
    """`ConfigSource` of a directory snapshot: its configs and policies, the disk's copy first."""

    def __init__(self, applier: NodeApplier, parsed: ParsedSnapshot) -> None:
        self.applier, self.parsed = applier, parsed

    def machineconfig(
        self, name: str, like: MachineConfig | None = None, *, stage: bool = False
    ) -> MachineConfig:
        return self.parsed.machineconfigs[name]

    def disk_or_cluster(self, name: str) -> MachineConfig:
        disk = self.applier.disk_config()
        return disk if disk is not None and disk.name == name else self.parsed.machineconfigs[name]

    def applied(self) -> None:
        """Nothing kept between runs: the snapshot is parsed again when it changes."""

    def policies(self) -> tuple[policy.ClusterPolicies, tuple[str, ...]]:
        return self.parsed.policies, tuple(self.parsed.storage_overrides)


class LocalNode:
    """`NodeSource` without a cluster: a node with no annotations, highly available (no drain)."""

    name = "localhost"

    def node(self) -> NodeView:
        return _LOCAL_NODE


_LOCAL_NODE = NodeView.from_object({"metadata": {"name": "localhost"}})


class LocalObserver:
    """`RunObserver` on the root's status record and the agent's state (no Events, no Node)."""

    def __init__(
        self, reporter: LocalReporter, machine: AgentMachine, drift: DriftReporter, desired: str
    ) -> None:
        self.reporter, self.machine, self.drift, self.desired = reporter, machine, drift, desired

    def entered(self, phase: Phase, run: Run) -> None:
        if phase is Phase.DONE:
            self.machine.to(AgentState.IDLE)
            self.reporter.set(NodeState.DONE, "", self.desired)

    def left(self, phase: Phase, run: Run, after: Phase | Result) -> None:
        if phase is Phase.WORKING:
            self.machine.to(AgentState.UPDATING)
            self.drift.suspend()  # the update's own writes are not drift
            self.reporter.set(NodeState.WORKING, "", self.desired)

    def failed(self, phase: Phase, run: Run, exc: BaseException) -> None:
        if isinstance(exc, UnreconcilableError):
            self.reporter.set(NodeState.UNRECONCILABLE, str(exc), self.desired)
            self.machine.to(AgentState.DEGRADED)
        elif isinstance(exc, McdError):
            self.reporter.set(NodeState.DEGRADED, str(exc), self.desired)
            self.machine.failed()
            self.drift.ensure()

    def ended(self, run: Run) -> None:
        pass


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

    signals = guard.SignalFlag(agent.request_stop)
    signals.install()
    try:
        agent.run()
    finally:
        signals.close()
    return 0
