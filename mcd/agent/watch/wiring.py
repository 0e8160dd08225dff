"""The daemon's watchers in one place, so the loop (`mcd.agent.loop`) calls five methods and no more.

Each watcher only puts its key into the daemon's work queue from its own thread; the loop then
calls `handle(keys)` on its thread, which does the checking and reporting.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from prometheus_client import Counter

from mcd import policy
from mcd.agent.node_apply import NodeApplier
from mcd.agent.report.events import EventRecorder
from mcd.agent.report.metrics import Metrics
from mcd.agent.report.node import NodeWriter
from mcd.agent.settings import AgentSettings
from mcd.agent.watch.configdir import ConfigDirError, ConfigDirSource, DirConfigApi
from mcd.agent.watch.driftreport import DriftPolicy, DriftReporter, NodeReporter
from mcd.agent.watch.heal import Healer
from mcd.agent.watch.logins import SSH_ACCESSED, SSH_ANNOTATION, LoginMonitor, journal_dir
from mcd.host import status
from mcd.node import annotations as ann
from mcd.node.annotations import NodeState

LOG = logging.getLogger(__name__)


class Watchers:
    def __init__(
        self,
        applier: NodeApplier,
        writer: NodeWriter,
        drift: DriftReporter,
        logins: LoginMonitor | None = None,
        *,
        events: EventRecorder,
        metrics: Metrics,
        source: ConfigDirSource | None = None,
        config_api: DirConfigApi | None = None,
    ) -> None:
        self.source = source
        self.config_api = config_api
        self._source_started = False
        self.applier = applier
        self.writer = writer
        self.drift = drift
        self.logins = logins
        self.events = events
        self._logins_started = False
        self._ssh_unreported = False  # a login whose annotation could not be written yet
        # upstream's counter, removed with its login monitor in 4.14
        self.ssh_accesses = Counter(
            "ssh_accesses", "Total number of SSH access occurred.", registry=metrics.registry
        )
        # the record for `mcd status` is written (durably) off the thread that reported the
        # state: Working is on an update's path, and its fsyncs need not be; one writer keeps
        # the records in the order of the states
        self._records = ThreadPoolExecutor(1, thread_name_prefix="status-record")

    def handle(self, keys: set[str]) -> bool:
        """Handle the watcher keys taken from the queue; True when a sync should run now."""
        sync = False
        if "drift" in keys:
            sync = self.drift.handle() or sync
        if "login" in keys:
            self._logins()
        if self.source is not None:
            sync = self._config(read="config" in keys) or sync
        return sync

    def due_in(self) -> float | None:
        """Seconds until a watcher needs the loop without a key (a config directory's grace period)."""
        return self.source.due_in() if self.source is not None else None

    def _config(self, *, read: bool) -> bool:
        """`--config-dir` with a cluster: a settled snapshot becomes the node's desiredConfig."""
        assert self.source is not None and self.config_api is not None
        try:
            if read:
                self.source.changed()
            snap = self.source.take()
            if snap is None:
                return False
            parsed = snap.parse()
        except (OSError, ConfigDirError) as exc:
            self.writer.set_state(NodeState.DEGRADED, f"reading {self.source.directory}: {exc}")
            return False
        self.config_api.parsed = parsed
        LOG.info("%s asks for %s (checksum %s)", self.source.directory, parsed.desired, snap.checksum[:12])
        self.writer.set_annotations({ann.DESIRED_CONFIG: parsed.desired})
        return True

    def _logins(self) -> None:
        if self.logins is None:
            return
        n = self.logins.take()
        if not n and not self._ssh_unreported:
            return
        self.ssh_accesses.inc(n)
        self._ssh_unreported = False
        node = self.writer.cached
        if node is not None and node.annotations.get(SSH_ANNOTATION) == SSH_ACCESSED:
            return  # set once: the annotation says "someone logged in", not how often
        try:
            self.writer.set_annotations({SSH_ANNOTATION: SSH_ACCESSED})
        except Exception:  # the loop retries the `login` key with backoff
            self._ssh_unreported = True
            raise
        self.events.normal("SSHAccessed", f"Node {self.writer.name} was accessed over SSH in this boot")

    def before_update(self) -> None:
        self.drift.suspend()  # the update's writes are looked at once it is over, not reported

    def after_sync(self) -> None:
        if self.source is not None and not self._source_started:
            self.source.start()
            self._source_started = True  # only once started: a failed start is tried again
            self._config(read=True)
        if self.logins is not None and not self._logins_started:
            self._logins_started = True
            try:
                self.logins.start()
            except OSError as exc:
                LOG.error("could not open the journal to watch SSH logins: %s", exc)
        try:
            self.drift.ensure()
        except Exception as exc:  # a monitor that cannot start must not stop the daemon
            LOG.error("could not start the config drift monitor: %s", exc)

    def state_changed(self, state: NodeState, reason: str) -> None:
        node = self.writer.cached
        desired = node.desired_config if node is not None else ""
        try:
            self._records.submit(self._record, state, reason, desired)
        except RuntimeError:  # stopped (a state reported while the daemon shuts down): at once
            self._record(state, reason, desired)

    def _record(self, state: NodeState, reason: str, desired: str) -> None:
        # a record for `mcd status` never stops the daemon; a programming error keeps its traceback
        try:
            status.record_state(self.applier.root, state.value, reason, desired)
        except OSError as exc:
            LOG.warning("could not record the node state for mcd status: %s", exc)
        except Exception:
            LOG.exception("could not record the node state for mcd status")

    def stop(self) -> None:
        self._records.shutdown(wait=True)  # the last state is on disk when the daemon stops
        self.drift.stop()
        if self.source is not None:
            self.source.stop()
        if self.logins is not None:
            self.logins.stop()


def _cluster_policies(client: Any) -> Callable[[], policy.ClusterPolicies]:
    def read() -> policy.ClusterPolicies:
        return policy.settings_from_machineconfiguration(client.get_machineconfiguration("cluster")).policies

    return read


def watchers_for(
    settings: AgentSettings,
    client: Any,
    applier: NodeApplier,
    *,
    writer: NodeWriter,
    events: EventRecorder,
    metrics: Metrics,
    enqueue: Callable[[str], None],
) -> Watchers:
    drift_policy = DriftPolicy(settings.drift_policy)
    healer = Healer(applier.host, _cluster_policies(client)) if drift_policy is DriftPolicy.HEAL else None
    drift = DriftReporter(
        applier,
        NodeReporter(writer),
        events,
        metrics,
        lambda: enqueue("drift"),
        policy=drift_policy,
        healer=healer,
    )
    logins = None
    if settings.ssh_login_monitor:
        logins = LoginMonitor(lambda: enqueue("login"), path=journal_dir(applier.root))
    source = config_api = None
    if settings.config_dir:
        source = ConfigDirSource(
            Path(settings.config_dir), lambda: enqueue("config"), grace=settings.config_grace_seconds
        )
        config_api = DirConfigApi(client)
    return Watchers(
        applier, writer, drift, logins, events=events, metrics=metrics, source=source, config_api=config_api
    )
