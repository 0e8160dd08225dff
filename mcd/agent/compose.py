"""The cluster agent's composition root: every part of the agent built from its settings, once.

What used to be wired by callbacks into the loop is wired here instead: the node writer tells
the observer every state it writes, the observer moves the agent's state and suspends the
watchers when an update starts, the watchers and the MachineConfig watch put their keys in the
queue. The loop (`mcd.agent.loop.Daemon`) then only takes keys and runs their one handler.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from functools import partial

from mcd.agent.certs import CertificateWriter
from mcd.agent.drain import BuiltinDrainer, Drainer, HandshakeDrainer
from mcd.agent.health import SyncClock
from mcd.agent.mccache import MachineConfigCache
from mcd.agent.node_apply import NodeApplier
from mcd.agent.nodechanges import NodeChanges
from mcd.agent.observer import Observer
from mcd.agent.report.events import EventRecorder
from mcd.agent.report.mcn import MachineConfigNodeReporter
from mcd.agent.report.metrics import Metrics
from mcd.agent.report.node import NodeWriter
from mcd.agent.settings import AgentSettings
from mcd.agent.state import AgentMachine, AgentState
from mcd.agent.sync import Syncer
from mcd.agent.watch.wiring import Watchers, watchers_for
from mcd.agent.workqueue import RateLimiter, WorkQueue
from mcd.host.certs import restart_kubelet_with_ca
from mcd.host.systemd import make_manager
from mcd.kube.client import KubeClient

LOG = logging.getLogger(__name__)

# the work queue's keys besides the watchers' (`drift`, `login`, `config`): the node's sync,
# starting the watchers after a sync, handing a sync's memory back, a config snapshot settled
NODE = "node"
AFTER_SYNC = "after-sync"
RELEASE = "release"
SETTLE = "config-settled"
# the memory of a sync's configs is handed back once the loop has been idle this long: a full
# collection takes tens of milliseconds, which an update coming right after must not wait for;
# the same once the MachineConfig watch decoded a config
RELEASE_IDLE_SECONDS = 1.0


@dataclass(frozen=True)
class Parts:
    """The agent, built: what the loop runs and what its threads serve."""

    settings: AgentSettings
    client: KubeClient
    applier: NodeApplier
    stop: threading.Event
    queue: WorkQueue
    machine: AgentMachine
    metrics: Metrics
    writer: NodeWriter
    events: EventRecorder
    mcn: MachineConfigNodeReporter
    observer: Observer
    sync_clock: SyncClock
    watchers: Watchers
    mcs: MachineConfigCache | None
    syncer: Syncer
    certs: CertificateWriter
    changes: NodeChanges


class _ClockedDrainer:
    """A drainer whose waits move the sync's deadline on by their own timeouts: a drain that
    waits an hour for the controller is not a stuck loop."""

    def __init__(self, inner: Drainer, clock: SyncClock, drain: float, uncordon: float) -> None:
        self.inner, self.clock, self.drain_seconds, self.uncordon_seconds = inner, clock, drain, uncordon

    def drain(self, config: str) -> None:
        self.clock.extend(self.drain_seconds)
        self.inner.drain(config)

    def uncordon(self, config: str) -> None:
        self.clock.extend(self.uncordon_seconds)
        self.inner.uncordon(config)


def compose(settings: AgentSettings, client: KubeClient, applier: NodeApplier) -> Parts:
    """The cluster agent of `settings` on `client` and `applier`, every part wired."""
    stop, queue = threading.Event(), WorkQueue(RateLimiter(start=settings.retry_start_seconds))
    machine = AgentMachine(on_change=_log_agent_state)
    metrics = Metrics()
    writer = NodeWriter(client, settings.node_name)
    events = EventRecorder(client, settings.node_name)
    mcns = MachineConfigNodeReporter(client, writer)
    sync_clock = SyncClock()
    drainer = _drainer(settings, client=client, writer=writer, events=events, mcns=mcns, stop=stop)
    drainer = _ClockedDrainer(
        drainer, sync_clock, settings.drain_timeout_seconds, settings.uncordon_timeout_seconds
    )
    watchers = watchers_for(
        settings, client, applier, writer=writer, events=events, metrics=metrics, enqueue=queue.add
    )
    observer = Observer(writer, events, metrics, mcns, applier=applier, machine=machine, listener=watchers)
    writer.on_state = observer.state_changed  # every state written, whoever wrote it
    # the desired rendered config from a watch, as upstream's informer (not from a directory)
    mcs = None
    if not watchers.config_api:
        release = partial(queue.add_after, RELEASE, RELEASE_IDLE_SECONDS)
        mcs = MachineConfigCache(
            client, applier.disk_config, stop, settings.watch_timeout_seconds, release=release
        )
    syncer = Syncer(
        api=watchers.config_api or client,
        writer=writer,
        events=events,
        metrics=metrics,
        applier=applier,
        drainer=drainer,
        watch=watchers.drift,
        mcn_reporter=mcns,
        ahead=mcs.take if mcs is not None else None,
        adopt=settings.adopt,
        observer=observer,
    )
    # upstream's ControllerConfig worker, beside the node sync (a thread of its own)
    certs = CertificateWriter(
        client,
        writer,
        events,
        applier.root,
        stop,
        watch_timeout_seconds=settings.watch_timeout_seconds,
        restart_kubelet=lambda ca: _restart_kubelet(applier, ca),
    )
    return Parts(
        settings,
        client,
        applier,
        stop,
        queue,
        machine,
        metrics,
        writer,
        events,
        mcns,
        observer,
        sync_clock,
        watchers,
        mcs,
        syncer,
        certs,
        NodeChanges(queue, NODE),
    )


def _drainer(
    settings: AgentSettings,
    *,
    client: KubeClient,
    writer: NodeWriter,
    events: EventRecorder,
    mcns: MachineConfigNodeReporter,
    stop: threading.Event,
) -> Drainer:
    """The built-in drainer (--builtin-drainer) or upstream's handshake with the controller."""
    own_pod = (os.environ.get("POD_NAMESPACE", ""), os.environ.get("POD_NAME", ""))
    pod = own_pod if all(own_pod) else None
    if settings.builtin_drainer:
        return BuiltinDrainer(
            writer,
            events,
            client,
            stop,
            own_pod=pod,
            timeout=settings.drain_timeout_seconds,
            retry_seconds=settings.eviction_retry_seconds,
            mcn=mcns,
        )
    return HandshakeDrainer(
        writer,
        events,
        client,
        stop,
        own_pod=pod,
        drain_timeout=settings.drain_timeout_seconds,
        uncordon_timeout=settings.uncordon_timeout_seconds,
        name_after=settings.eviction_retry_seconds,
    )


def _restart_kubelet(applier: NodeApplier, ca: bytes) -> None:
    """For a CA rotation, on the certificate writer's thread: a systemd connection of its own."""
    restart_kubelet_with_ca(applier.root, make_manager(applier.root, applier.runner), ca)


def _log_agent_state(old: AgentState, new: AgentState) -> None:
    LOG.debug("agent state %s -> %s", old.value, new.value)
