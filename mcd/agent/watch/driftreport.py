"""What the daemon's loop does with the drift monitor: keep it armed against the config on disk,
hold its reports while an update writes, and turn the paths it reports into a log line, an
Event, the metric and a node state, following `--drift-policy`.

Upstream (`pkg/daemon/daemon.go` `onConfigDrift`): on drift it sets `mcd_config_drift` to now,
records the Warning event `ConfigDriftDetected` and marks the node Degraded with the bare
validation message. Upstream stops the monitor before every update and starts it again after
Done; here it stays armed: an update only suspends the reports, and before Done is written the
paths touched meanwhile are checked against the config the update left (`arm`), so an edit
made while the update ran is reported, and the update's own writes are not. When the path is
put back mcd asks for a sync at once, which re-applies the current config without a reboot and
reports Done. The preflight check reads only the paths the monitor saw change (`unverified`).
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable, Collection
from typing import Protocol

from mcd.agent.report.events import EventRecorder
from mcd.agent.report.metrics import Metrics
from mcd.agent.report.node import NodeWriter
from mcd.agent.watch.drift import DriftMonitor
from mcd.agent.watch.heal import Healer
from mcd.agent.watch.managed import Taken
from mcd.config.ignition import IgnitionConfig
from mcd.config.machineconfig import MachineConfig
from mcd.host import status
from mcd.host.root import HostRoot
from mcd.node.annotations import NodeState

LOG = logging.getLogger(__name__)

# the reasons upstream counts as drift when it (re)starts the monitor on a Degraded node
_DRIFT_WORDS = ("content mismatch", "mode mismatch")


class DriftPolicy(enum.Enum):
    DEGRADE = "degrade"  # upstream: Degraded until the path is put back
    OBSERVE = "observe"  # log, Event and metric only; the node state is left alone
    HEAL = "heal"  # rewrite the path and run its policy's action; Degraded if it drifts again soon


class Applier(Protocol):
    """The part of `mcd.agent.node_apply.NodeApplier` the monitor needs."""

    root: HostRoot

    def disk_config(self) -> MachineConfig | None: ...

    def host(self) -> object: ...


class StateReporter(Protocol):
    """Where node states go: the Node writer, or the state files on a host without a cluster."""

    def report_drift(self, reason: str) -> None: ...

    def current(self) -> tuple[NodeState, str]: ...


class DriftReporter:
    """Owns the one drift monitor of the daemon; every method runs on the daemon's loop thread."""

    def __init__(
        self,
        applier: Applier,
        reporter: StateReporter,
        events: EventRecorder,
        metrics: Metrics,
        enqueue: Callable[[], None],
        *,
        policy: DriftPolicy = DriftPolicy.DEGRADE,
        healer: Healer | None = None,
    ) -> None:
        self.applier = applier
        self.reporter = reporter
        self.events = events
        self.metrics = metrics
        self._enqueue = enqueue
        self.policy = policy
        self.healer = healer
        self.monitor: DriftMonitor | None = None
        self.config_name = ""
        self._suspended = False
        self._drifted: dict[str, str] = {}
        # what the on-disk check is reading (`unverified`), committed by `verified`
        self._checking: tuple[DriftMonitor, IgnitionConfig, Taken] | None = None
        # a drift put back whose sync request was lost to a failure later in the same round
        self._owed_sync = False

    @property
    def drifted(self) -> dict[str, str]:
        """Paths drifted now (as last checked) and their messages."""
        return dict(self._drifted)

    # -- lifecycle

    def ensure(self) -> bool:
        """Watch the config recorded on disk (started, or its expectations swapped, as needed);
        True when a path drifted from it (see `arm`)."""
        mc = self.applier.disk_config()
        if mc is None or mc.config is None:
            self.stop()
            return False
        return self.arm(mc)

    def arm(self, mc: MachineConfig) -> bool:
        """Watch `mc` (the config now on disk) and report from now on; True when a path touched
        meanwhile (during an update, say) drifted from it: reported, so not Done.

        The monitor keeps running across syncs: a new config swaps its expectations in place,
        with no moment unwatched, and the update's own writes are only looked at now, against
        the config they were writing.
        """
        assert mc.config is not None
        monitor = self.monitor
        if monitor is None or monitor.config is not mc.config:
            first = monitor is None
            if monitor is None:
                host = self.applier.host()
                systemd = getattr(host, "systemd", None)
                files = getattr(host, "files", None)
                monitor = DriftMonitor(
                    self.applier.root,
                    mc.config,
                    self._enqueue,
                    is_enabled=getattr(systemd, "is_enabled", None),
                    owners=getattr(files, "owner_of", None),
                )
                monitor.start()
                self.monitor = monitor
            else:
                monitor.retarget(mc.config)
            self._drifted = {p: r for p, r in self._drifted.items() if p in monitor.managed}
            if self.healer is not None:
                self.healer.reset()
            self._suspended = False
            self.handle()
            self._started(mc.name, first=first)
        else:
            self._suspended = False
            self.handle()
        return self.policy is not DriftPolicy.OBSERVE and bool(self._drifted)

    def _started(self, name: str, *, first: bool) -> None:
        self.config_name = name
        if first:
            # upstream's start on a node Degraded by drift keeps the gauge up
            node_state, reason = self.reporter.current()
            drifting = node_state is NodeState.DEGRADED and any(w in reason for w in _DRIFT_WORDS)
        else:
            # a new config was applied (the node becomes Done): drifting only if still seen
            drifting = bool(self._drifted)
        self.metrics.config_drift.set(time.time() if drifting else 0)
        message = f"Config Drift Monitor started, watching against {name}"
        self.events.normal("ConfigDriftMonitorStarted", message)

    def suspend(self) -> None:
        """An update starts writing: events are kept, not reported, until `arm` (or `ensure`)
        looks at them against the config it left on disk."""
        self._suspended = True

    def unverified(self, mc: MachineConfig) -> Collection[str] | None:
        """The paths of `mc` the check must read (None: all): when the monitor watches `mc`
        itself, only those it saw change since the last check that passed (or all, after an
        overflow). With their declarations, so the check finds them without a pass over the
        config, unless a path is declared twice (a file and a dropin, say): the index has one
        of them. They stay unverified until `verified(mc)`: a check that fails or raises
        leaves them to the next one."""
        self._checking = None
        monitor = self.monitor
        if monitor is None or mc.config is None or monitor.config is not mc.config:
            return None
        taken = monitor.take_unverified()
        self._checking = (monitor, mc.config, taken)
        if taken.everything:
            return None
        if not monitor.expected.distinct:
            return frozenset(taken.marks)
        return {p: monitor.managed[p] for p in taken.marks if p in monitor.managed}

    def verified(self, mc: MachineConfig) -> None:
        """The check of what `unverified(mc)` gave passed: those paths match (until an event
        touches them again), so the next check need not read them."""
        checking, self._checking = self._checking, None
        if checking is None:
            return
        monitor, config, taken = checking
        if monitor is self.monitor and config is mc.config and monitor.config is config:
            monitor.verified(taken)

    def stop(self) -> None:
        """Stop watching (at shutdown, or when there is no config on disk to watch)."""
        if self.monitor is None:
            return
        self.monitor.stop()
        self.monitor = None
        self._suspended = False
        self.events.normal("ConfigDriftMonitorStopped", "Config Drift Monitor stopped")

    # -- the `drift` key

    def handle(self) -> bool:
        """Check the paths the monitor reported; True when drift was put back and a sync should run.

        Take only on success: a path leaves the monitor's pending set once its check and the
        report that follows succeeded. A path whose check raises stays pending (the others are
        reported) and the error is raised for the loop to retry; a report that fails leaves
        every path pending and the reporter's state as it was."""
        monitor = self.monitor
        if monitor is None or self._suspended:
            return False
        taken = monitor.take()
        found: dict[str, str | None] = {}
        failure: Exception | None = None
        for path in monitor.ordered(taken):
            try:
                found[path] = monitor.check(path)
            except Exception as exc:  # this path stays pending; the others are still reported
                LOG.warning("checking %s for config drift failed: %s", path, exc)
                failure = failure or exc
        drifted = dict(self._drifted)
        cleared = False
        new: list[str] = []
        for path, err in found.items():
            if err is None:
                if drifted.pop(path, None) is not None:
                    LOG.info("config drift of %s is gone", path)
                    cleared = True
            elif drifted.get(path) != err:
                drifted[path] = err
                new.append(path)
        healed = self._heal(monitor, new, drifted)
        if self.policy is not DriftPolicy.OBSERVE and drifted.keys() - healed and (new or cleared):
            # the node first (the latency that matters), then the log, Event and records; when
            # it fails nothing is committed: the loop retries and finds these paths new again
            first = min(drifted.keys() - healed, key=lambda p: monitor.managed[p].order)
            self.reporter.report_drift(drifted[first])
        self._drifted = drifted
        monitor.commit(taken, found)
        for path in new:
            self._note(path, drifted[path], healed=path in healed)
        for path in healed:
            self._drifted.pop(path, None)
        sync = (cleared or self._owed_sync) and not self._drifted
        if failure is not None:
            self._owed_sync = sync
            raise failure
        self._owed_sync = False
        return sync

    def _heal(self, monitor: DriftMonitor, new: list[str], drifted: dict[str, str]) -> set[str]:
        """The paths of `new` put back under `--drift-policy heal` (their rewrite shows as
        events that check clean)."""
        healed: set[str] = set()
        if self.policy is DriftPolicy.HEAL and self.healer is not None:
            for path in new:
                if self.healer.heal(monitor.managed[path], drifted[path]):
                    healed.add(path)
        return healed

    def _note(self, path: str, reason: str, *, healed: bool) -> None:
        now = time.time()
        LOG.error("config drift detected on %s: %s", path, reason)
        self.events.warning("ConfigDriftDetected", reason)
        if healed:
            self.events.normal("ConfigDriftHealed", f"{path} was put back as {self.config_name} declares it")
        self.metrics.config_drift.set(now)
        try:
            status.record_drift(self.applier.root, path, reason, self.config_name, now)
        except OSError as exc:
            LOG.warning("could not record the drift for mcd status: %s", exc)


class NodeReporter:
    """`StateReporter` on the daemon's Node writer."""

    def __init__(self, writer: NodeWriter) -> None:
        self.writer = writer

    def report_drift(self, reason: str) -> None:
        self.writer.set_state(NodeState.DEGRADED, reason)

    def current(self) -> tuple[NodeState, str]:
        node = self.writer.cached
        if node is None:
            return NodeState.DONE, ""
        return node.state, node.reason
