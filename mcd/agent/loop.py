"""The cluster agent's loop (`mcd start` without --once-from).

Level-triggered, as upstream: the node watch, the periodic resync and retries only wake one
loop, which re-reads and syncs (`mcd.agent.sync`). A failed sync is classified once
(`mcd.agent.errors.classify`): Unreconcilable or Degraded is written on the node, API trouble leaves
the state alone, and the sync is retried with upstream's backoff (1 s doubling to 60 s). The
watch resumes from the last resourceVersion it saw when the stream breaks and lists again on
410 Gone, so no change of the node is missed.
"""

from __future__ import annotations

import ctypes
import gc
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from types import FrameType

from mcd.agent import sdnotify
from mcd.agent.drain import BuiltinDrainer, Drainer, HandshakeDrainer
from mcd.agent.errors import ApiError, Backoff, GoneError, StoppingError, classify
from mcd.agent.kube.annotations import NodeState
from mcd.agent.kube.client import KubeClient
from mcd.agent.kubelet import KubeletHealth
from mcd.agent.node_apply import NodeApplier
from mcd.agent.report.events import EventRecorder
from mcd.agent.report.metrics import Metrics, MetricsServer, host_os
from mcd.agent.report.node import NodeWriter
from mcd.agent.settings import AgentSettings
from mcd.agent.state import AgentMachine, AgentState
from mcd.agent.sync import Result, Syncer
from mcd.agent.watch.wiring import watchers_for
from mcd.agent.workqueue import WorkQueue

LOG = logging.getLogger(__name__)

# a watch that keeps failing is retried at least this often: the node's changes are the work
WATCH_RETRY_MAX = 5.0
WATCH_MIN_SECONDS = 1.0


class Daemon:
    def __init__(self, settings: AgentSettings, client: KubeClient, applier: NodeApplier) -> None:
        self.settings = settings
        self.client = client
        self.applier = applier
        self.stop = threading.Event()
        self.queue = WorkQueue()
        self.machine = AgentMachine(on_change=self._agent_state_changed)
        self.metrics = Metrics()
        self.writer = NodeWriter(client, settings.node_name, on_state=self._state_changed)
        self.events = EventRecorder(client, settings.node_name)
        own_pod = (os.environ.get("POD_NAMESPACE", ""), os.environ.get("POD_NAME", ""))
        drainer: Drainer
        if settings.builtin_drainer:
            drainer = BuiltinDrainer(
                self.writer,
                self.events,
                client,
                self.stop,
                own_pod=own_pod if all(own_pod) else None,
                timeout=settings.drain_timeout_seconds,
                retry_seconds=settings.eviction_retry_seconds,
            )
        else:
            drainer = HandshakeDrainer(
                self.writer,
                self.events,
                client,
                self.stop,
                own_pod=own_pod if all(own_pod) else None,
                drain_timeout=settings.drain_timeout_seconds,
                uncordon_timeout=settings.uncordon_timeout_seconds,
            )
        self.watchers = watchers_for(
            settings, client, applier, writer=self.writer, events=self.events, metrics=self.metrics,
            enqueue=self.enqueue,
        )
        self.syncer = Syncer(
            api=self.watchers.config_api or client,
            writer=self.writer,
            events=self.events,
            metrics=self.metrics,
            applier=applier,
            drainer=drainer,
            before_update=self._before_update,
            watch=self.watchers.drift,
        )
        self._in_sync = False
        self._retry_delay = 0.0
        self._last_loop = time.monotonic()
        self._server: MetricsServer | None = None

    # -- state hooks

    def _agent_state_changed(self, old: AgentState, new: AgentState) -> None:
        LOG.debug("agent state %s -> %s", old.value, new.value)

    def _before_update(self) -> None:
        self.machine.to(AgentState.UPDATING)
        self.watchers.before_update()


    def _state_changed(self, state: NodeState, reason: str) -> None:
        self.metrics.set_state(state.value, reason)
        self.watchers.state_changed(state, reason)

    def healthy(self) -> bool:
        """The loop is alive: syncing now, or idle and woken within the last two resync periods."""
        if self.stop.is_set():
            return False
        return self._in_sync or time.monotonic() - self._last_loop < 2 * self.settings.resync_seconds + 60

    # -- threads

    def wake(self) -> None:
        self.enqueue("node")

    def enqueue(self, key: str) -> None:
        """Put `key` in the work queue (any thread); keys already queued are merged."""
        self.queue.put(key)

    def _watch(self) -> None:
        """Feed the writer's copy of the node from a watch; wake the loop on every change."""
        name = self.settings.node_name
        rv = ""
        backoff = Backoff(cap=WATCH_RETRY_MAX)
        while not self.stop.is_set():
            try:
                if not rv:
                    obj, rv = self.client.list_node(name)
                    if obj is None:
                        LOG.warning("node %s not found", name)
                        self.writer.forget()
                    else:
                        self._observe(obj)
                started = time.monotonic()
                for etype, obj in self.client.watch_node(name, rv, self.settings.watch_timeout_seconds):
                    rv = str((obj.get("metadata") or {}).get("resourceVersion", rv))
                    if etype == "BOOKMARK":
                        continue
                    if etype == "DELETED":
                        self.writer.forget()
                    else:
                        self._observe(obj)
                    backoff.reset()
                    if self.stop.is_set():
                        return
                if time.monotonic() - started < WATCH_MIN_SECONDS:
                    # a server (or proxy) that ends watches at once must not make this loop
                    # spin, nor keep changes from us: back off, then list (a list always answers)
                    self.stop.wait(backoff.next_delay())
                    rv = ""
            except GoneError:
                LOG.info("watch of node %s expired: listing it again", name)
                rv = ""
            except ApiError as exc:
                delay = backoff.next_delay()
                LOG.info("watch of node %s interrupted (%s): resuming in %.0fs", name, exc, delay)
                self.stop.wait(delay)

    def _observe(self, obj: dict[str, object]) -> None:
        view = self.writer.observe(obj)
        meta = obj.get("metadata")
        if isinstance(meta, dict) and meta.get("uid"):
            self.events.uid = str(meta["uid"])
        LOG.debug("node %s at resourceVersion %s", view.name, view.resource_version)
        self.wake()

    def _watchdog(self, interval: float) -> None:
        while not self.stop.wait(interval):
            if self.healthy():
                sdnotify.notify("WATCHDOG=1")

    # -- the loop

    def _on_sigterm(self, _signum: int, _frame: FrameType | None) -> None:
        if self._in_sync:
            LOG.warning("got SIGTERM during a sync: stopping once it is finished")
            self.events.warning("GotSigtermDuringUpdate", "Got SIGTERM, but actively updating")
        self.stop.set()
        self.wake()

    def start_threads(self) -> None:
        self.events.start()
        if self.settings.metrics_url:
            self._server = MetricsServer(self.metrics, self.settings.metrics_url, self.healthy)
            self._server.start()
        self._set_host_os()
        threading.Thread(target=self._watch, name="watch", daemon=True).start()
        if self.settings.kubelet_healthz_enabled:
            poll = KubeletHealth(
                self.settings.kubelet_healthz_endpoint,
                self.settings.kubelet_poll_seconds,
                self.metrics.kubelet_state,
                self.stop,
            )
            threading.Thread(target=poll.run, name="kubelet-health", daemon=True).start()
        interval = sdnotify.watchdog_interval()
        if interval is not None:
            threading.Thread(target=self._watchdog, args=(interval,), name="watchdog", daemon=True).start()

    def _set_host_os(self) -> None:
        text = ""
        for path in ("/etc/os-release", "/usr/lib/os-release"):
            try:
                text = self.applier.root.join(path).read_text()
                break
            except (OSError, ValueError):
                continue
        self.metrics.set_host_os(*host_os(text))

    def run(self) -> Result:
        """Sync until stopped; SIMULATED_REBOOT when the caller must restart the process."""
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._on_sigterm)
            signal.signal(signal.SIGINT, self._on_sigterm)
        self.start_threads()
        sdnotify.notify("READY=1")
        backoff = Backoff()
        next_sync = time.monotonic()
        try:
            while not self.stop.is_set():
                timeout = max(0.0, next_sync - time.monotonic())
                due = self.watchers.due_in()
                if due is not None:
                    timeout = min(timeout, due)
                self.queue.wait(timeout)
                self._last_loop = time.monotonic()
                if self.stop.is_set():
                    break
                keys = self.queue.take()
                if not self.machine.syncs():
                    next_sync = time.monotonic() + self.settings.resync_seconds
                    continue
                if self.watchers.handle(keys):
                    keys.add("node")  # drift put back: sync now, not at the next retry
                if "node" not in keys and time.monotonic() < next_sync:
                    continue
                if self.writer.cached is None:
                    # no node yet: the watch wakes the loop when it has one
                    next_sync = time.monotonic() + self.settings.resync_seconds
                    continue
                result = self._sync_once(backoff)
                _release_memory()
                if result is Result.SIMULATED_REBOOT:
                    return result
                if result is not Result.REBOOTING:
                    self.watchers.after_sync()
                if result is None:
                    next_sync = time.monotonic() + self._retry_delay
                else:
                    next_sync = time.monotonic() + self.settings.resync_seconds
        finally:
            self.shutdown()
        return Result.IDLE

    def _sync_once(self, backoff: Backoff) -> Result | None:
        """One sync; None when it failed (the retry delay is set)."""
        self._in_sync = True
        boot = self.machine.begin_sync()
        try:
            result = self.syncer.sync(boot=boot)
            backoff.reset()
            self.machine.to(_AFTER[result])
            return result
        except StoppingError:
            LOG.info("sync of node %s interrupted: the daemon is stopping", self.settings.node_name)
            self.machine.failed()
            return None
        except Exception as exc:  # every error is reported on the node, never fatal
            self.machine.failed()
            verdict = classify(exc)
            self._retry_delay = backoff.next_delay(verdict.retry_after)
            if verdict.state is None:
                LOG.warning(
                    "sync of node %s failed (retry in %.0fs): %s",
                    self.settings.node_name,
                    self._retry_delay,
                    exc,
                )
            else:
                LOG.error(
                    "sync of node %s failed, marking it %s (retry in %.0fs): %s",
                    self.settings.node_name, verdict.state.value, self._retry_delay, exc,
                )  # fmt: skip
                if not isinstance(exc, (ApiError,)) and not str(exc):
                    LOG.debug("failure details", exc_info=exc)
                self._report(verdict.state, verdict.reason)
            return None
        finally:
            self._in_sync = False

    def _report(self, state: NodeState, reason: str) -> None:
        try:
            self.writer.set_state(state, reason)
            self.metrics.set_update(self.writer.node().desired_config, reason)
        except Exception as exc:  # the API may be what failed; the retry reports again
            LOG.warning("could not report state %s on node %s: %s", state.value, self.settings.node_name, exc)

    def shutdown(self) -> None:
        self.stop.set()
        self.watchers.stop()
        self.events.stop()
        if self._server is not None:
            self._server.stop()
            self._server = None


# the agent's state once a sync returned
_AFTER = {
    Result.IDLE: AgentState.IDLE,
    Result.WAITING: AgentState.WAITING_FOR_DRAIN,
    Result.REBOOTING: AgentState.REBOOTING,
    Result.SIMULATED_REBOOT: AgentState.REBOOTING,
}


def _libc_trim() -> Callable[[int], int] | None:
    try:
        trim: Callable[[int], int] = ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None  # not glibc: nothing to hand back explicitly
    return trim


_TRIM = _libc_trim()


def _release_memory() -> None:
    """Hand the memory of a sync's configs back to the system.

    A rendered config parsed is tens of megabytes of small objects; once a sync is over the
    agent keeps one of them, and glibc would otherwise keep the freed arenas for the process.
    """
    gc.collect()
    if _TRIM is not None:
        _TRIM(0)
