"""The one observer of the agent's syncs and update runs: what they do becomes node annotations,
Events, MachineConfigNode conditions and metrics here, and nowhere else.

The update run (`mcd.agent.phases`) tells it each phase entered, left or failed; the sync
(`mcd.agent.sync`) tells it the moments around the run (rebooted, up to date, a failed disk
check); the node writer tells it every state written, whoever wrote it (`state_changed`). It
moves the agent's own state to UPDATING when an update starts and tells the watchers
(`UpdateListener`), so nothing below the loop calls back into it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol

from mcd.agent.applied import Applied, ApplyError
from mcd.agent.errors import StoppingError, UnreconcilableError
from mcd.agent.node_apply import NodeApplier
from mcd.agent.osevents import OS_UPDATE_STAGED, os_events_after, os_events_before, os_update_staged
from mcd.agent.phases import Phase, Result, Run, reboot_reason
from mcd.agent.report.events import EventRecorder, SigtermProtection
from mcd.agent.report.mcn import MachineConfigNodeReporter
from mcd.agent.report.metrics import Metrics, update_label
from mcd.agent.report.node import NodeWriter
from mcd.agent.state import AgentMachine, AgentState
from mcd.node import annotations as ann
from mcd.node import machineconfignode as mcn
from mcd.node.annotations import NodeState, NodeView
from mcd.node.errors import McdError

LOG = logging.getLogger(__name__)

# the phases timed by mcd_update_phase_seconds, by label; "complete" spans verify to Done of a
# rebootless update, "check" is the sync's pre-update disk check
_TIMED = {Phase.PREPARE: "prepare", Phase.DRAIN: "drain", Phase.APPLY: "apply"}


class UpdateListener(Protocol):
    """The watchers as the observer tells them (`mcd.agent.watch.wiring.Watchers`)."""

    def before_update(self) -> None: ...

    def state_changed(self, state: NodeState, reason: str) -> None: ...


class Observer:
    def __init__(
        self,
        writer: NodeWriter,
        events: EventRecorder,
        metrics: Metrics,
        mcns: MachineConfigNodeReporter | None = None,
        *,
        applier: NodeApplier | None = None,
        machine: AgentMachine | None = None,
        listener: UpdateListener | None = None,
        suspend: Callable[[], None] | None = None,
    ) -> None:
        self.writer, self.events, self.metrics = writer, events, metrics
        self.mcn = mcns or MachineConfigNodeReporter(None, writer)
        # read for `coreos` only: the OS Events are upstream's on CoreOS
        self._applier = applier
        self._machine, self._listener = machine, listener
        # upstream's triggerUpdate stops the drift monitor: the update's own writes are not drift
        self._suspend = suspend
        self.protection = SigtermProtection(events)
        self._started: dict[str, float] = {}

    @property
    def name(self) -> str:
        return self.writer.name

    # -- every state written on the node (`NodeWriter.on_state`)

    def state_changed(self, state: NodeState, reason: str) -> None:
        self.metrics.set_state(state.value, reason)
        self.mcn.state_changed(state, reason)
        if self._listener is not None:
            self._listener.state_changed(state, reason)

    # -- the sync's moments around a run

    def rebooted(self) -> NodeView:
        LOG.info("node %s has rebooted", self.name)
        self.mcn.report(mcn.rebooted())
        return self.writer.set_annotations({ann.POST_CONFIG_ACTION: ""})

    def up_to_date(self) -> None:
        self.mcn.report(mcn.updated(self.name))

    def needs_update(self) -> None:
        self.mcn.report(mcn.needs_update(self.name))

    def check_failed(self, event_reason: str, reason: str) -> None:
        self.events.warning(event_reason, reason)

    def boot_resync(self, current: str, desired: str) -> None:
        text = f"Booting node {self.name}, currentConfig {current}, desiredConfig {desired}"
        self.events.normal("BootResync", text)

    def first_config(self, message: str) -> None:
        self.writer.set_state(NodeState.WORKING, message)

    @contextmanager
    def timed(self, label: str) -> Iterator[None]:
        self._start(label)
        try:
            yield
        finally:
            self._stop(label)

    def _start(self, label: str) -> None:
        self._started[label] = time.monotonic()

    def _stop(self, label: str) -> None:
        start = self._started.pop(label, None)
        if start is not None:
            self.metrics.phase_seconds.labels(phase=label).observe(time.monotonic() - start)

    # -- the run (`mcd.agent.phases.RunObserver`)

    def entered(self, phase: Phase, run: Run) -> None:
        if phase in _TIMED:
            self._start(_TIMED[phase])
        if phase is Phase.PREPARE:
            if self._machine is not None:
                self._machine.to(AgentState.UPDATING)
            if self._listener is not None:
                self._listener.before_update()
            if self._suspend is not None:
                self._suspend()
        elif phase is Phase.WORKING:
            self._working(run)
        elif phase is Phase.DRAIN:
            self.mcn.flush()  # the controller's drain reports come after the update's own
        elif phase is Phase.REBOOT:
            self._rebooting(run.config)
        elif phase is Phase.VERIFY and run.applied is not None:
            self._report_actions(run.applied)
            self.metrics.reboots_avoided.inc()
            self._start("complete")
        elif phase is Phase.UNCORDON:
            self.mcn.report(mcn.resumed(run.config))
            self.mcn.flush()
        elif phase is Phase.DONE:
            self._done(run)

    def left(self, phase: Phase, run: Run, after: Phase | Result) -> None:
        if phase in _TIMED:
            self._stop(_TIMED[phase])
        if phase is Phase.WORKING:
            self._prepared(run)
        elif phase is Phase.DRAIN and run.applying is not None:
            self.mcn.report(run.applying)
        elif phase is Phase.APPLY and isinstance(after, Phase):
            self._applied(run)

    def failed(self, phase: Phase, run: Run, exc: BaseException) -> None:
        if phase in _TIMED:
            self._stop(_TIMED[phase])
        if not isinstance(exc, McdError):
            return
        if phase is Phase.WORKING and isinstance(exc, UnreconcilableError):
            assert run.plan is not None and run.new is not None
            self.mcn.report(mcn.not_prepared(run.old.name, run.new.name, run.plan.reason))
            # upstream's text: the wrapped error, the same words as the node's reason
            self.events.warning("FailedToReconcile", run.plan.reason)
        elif phase in (Phase.DRAIN, Phase.APPLY):
            if isinstance(exc, ApplyError) and exc.event is not None:
                self.events.warning(*exc.event)  # a post-config action failed
            # upstream's pivot error gauge: counts failed OS changes, back to 0 after one succeeds
            if run.os_change:
                self.metrics.pivot_errors.inc()
            if phase is Phase.APPLY and run.applying is not None and self.mcn.last is run.applying:
                self.mcn.report(mcn.apply_failed(str(exc)))
        elif phase is Phase.REBOOT:
            self.metrics.reboots_failed.inc()
        elif phase is Phase.UNCORDON and not isinstance(exc, StoppingError):
            self.metrics.set_update("", str(exc))  # upstream's only failure it records there

    def ended(self, run: Run) -> None:
        for label in list(self._started):
            self._stop(label)
        self.protection.remove()  # the update is over (no-op when it never started)

    # -- what each phase says

    def _working(self, run: Run) -> None:
        # Working, and SIGTERM protection to the update's end, come before the reconcile check
        # as in upstream's update(); a Degraded/Unreconcilable node keeps its state and reason,
        # and a node Working already keeps its reason (what a retried drain waits for)
        node = run.node
        working = NodeState.WORKING
        if node is not None and node.state is not working and ann.transition(node.state, working) is working:
            self.writer.set_state(working)
        self.protection.add()

    def _prepared(self, run: Run) -> None:
        assert run.plan is not None and run.new is not None and run.node is not None
        self.mcn.report(mcn.prepared(run.plan.actions, run.plan.drain))
        if not run.drains:
            if run.node.single_replica:
                self.events.normal("Drain", "Drain not required, skipping")
            self.mcn.report(mcn.drain_not_required())
            if run.applying is not None:
                self.mcn.report(run.applying)
        if self._coreos():
            for reason, message in os_events_before(run.plan, run.new):
                self.events.normal(reason, message)

    def _applied(self, run: Run) -> None:
        assert run.plan is not None and run.new is not None
        self.mcn.report(mcn.applied(run.os_change, run.plan.diff.passwd))
        if run.os_change:
            self.metrics.pivot_errors.set(0)
        if self._coreos():
            for reason, message in os_events_after(run.plan, run.old, run.new):
                self.events.normal(reason, message)
            if os_update_staged(run.plan, run.new):
                self.events.post_now(OS_UPDATE_STAGED, "Changes to OS staged")

    def _rebooting(self, config: str) -> None:
        self.mcn.report(mcn.reboot_required())
        reason = reboot_reason(config)
        self.protection.remove()  # the update is over: only the reboot is left
        self.events.normal("Reboot", reason)
        LOG.info("initiating reboot: %s", reason)
        self.writer.set_annotations({ann.POST_CONFIG_ACTION: ann.REBOOTING})

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
            restart = action.verb == "restart"
            past, reason = ("restarted", "ServiceRestart") if restart else ("reloaded", "ServiceReload")
            text = f"Service {action.service} was {past}."
            self.events.normal(reason, f"Config changes do not require reboot. {text}{note}")
            if not action.skipped:
                LOG.info("%s service %s successfully!", action.service, past)

    def _done(self, run: Run) -> None:
        config, node = run.config, run.node
        self.events.normal("NodeDone", f"Setting node {self.name}, currentConfig {config} to Done")
        extra: dict[str, str | None] = {ann.CURRENT_CONFIG: config, ann.CURRENT_IMAGE: run.image or None}
        extra |= {} if node is not None and node.desired_image else {ann.DESIRED_IMAGE: None}
        self.writer.set_state(NodeState.DONE, "", extra)
        self.mcn.report(mcn.updated(self.name))  # at rest in its desired config, as the next sync says
        self.metrics.set_update(update_label(config, run.image))
        LOG.info("node %s is in config %s: Done", self.name, config)

    def _coreos(self) -> bool:
        return self._applier is not None and self._applier.coreos
