"""The cluster agent's loop (`mcd start` without --once-from).

Level-triggered, as upstream: the node watch, the periodic resync and retries only wake one
loop, which re-reads and syncs (`mcd.agent.sync`). A failed sync is classified once
(`mcd.agent.errors.classify`): Unreconcilable or Degraded is written on the node, API trouble leaves
the state alone, and the sync is retried with upstream's backoff (1 s doubling to 60 s). The
watch resumes from the last resourceVersion it saw when the stream breaks and lists again on
410 Gone, so no change of the node is missed. Its parts are built by the composition root
(`mcd.agent.compose`); nothing below calls back into the loop.

Nothing ends the process but SIGTERM or a reboot (`mcd.runtime.guard`): every thread runs under
the guard, and what the watchers do on this loop's thread (drift, login and config-dir
reports) is retried with the same backoff when it fails. The signal handler only sets a flag;
the loop, woken by the guard's signal thread, does the rest. `healthy()` (for `/healthz` and
the systemd watchdog) fails when the loop stopped waking or when a sync has run past its
deadline (`mcd.agent.health.SyncClock`); `ready()` (`/readyz`) also when the API server has
not answered for `--api-unreachable-limit` seconds.
"""

from __future__ import annotations

import gc
import logging
import threading
import time

from mcd.agent import memory, sdnotify
from mcd.agent.compose import AFTER_SYNC, NODE, RELEASE, RELEASE_IDLE_SECONDS, SETTLE, compose
from mcd.agent.errors import StoppingError, WaitingError, classify
from mcd.agent.health import api_unreached
from mcd.agent.kubelet import KubeletHealth
from mcd.agent.node_apply import NodeApplier
from mcd.agent.phases import Result
from mcd.agent.report.metrics import MetricsServer, host_os
from mcd.agent.report.scrape import secure_endpoint
from mcd.agent.settings import AgentSettings
from mcd.agent.state import AgentState
from mcd.host.runner import longest_timeout
from mcd.kube.client import KubeClient
from mcd.kube.errors import ApiError
from mcd.kube.watch import follow
from mcd.node import annotations as ann
from mcd.node.annotations import NodeState
from mcd.runtime import guard

LOG = logging.getLogger(__name__)

# a sync may run this long beyond its longest command (the API requests and the disk around it)
SYNC_MARGIN = 300.0


class Daemon:
    def __init__(self, settings: AgentSettings, client: KubeClient, applier: NodeApplier) -> None:
        parts = compose(settings, client, applier)  # the composition root builds every part
        self.settings, self.client, self.applier = settings, client, applier
        self.stop, self.queue, self.machine = parts.stop, parts.queue, parts.machine
        self.metrics, self.writer, self.events, self.mcn = (
            parts.metrics,
            parts.writer,
            parts.events,
            parts.mcn,
        )
        self.sync_clock, self.watchers, self.mcs = parts.sync_clock, parts.watchers, parts.mcs
        self.syncer, self.certs, self.changes = parts.syncer, parts.certs, parts.changes
        self.protection = parts.observer.protection
        self._in_sync = False
        self._last_loop = time.monotonic()
        self._busy_until = time.monotonic()
        self._server: MetricsServer | None = None
        self.signals = guard.SignalFlag(self._on_signal)

    def healthy(self) -> bool:
        """Alive: the loop syncing within its deadline or woken within the last two resync
        periods. An API server that does not answer is not the agent's fault and a restart
        would not bring it back: that is readiness (`ready`), never liveness."""
        return not self.unhealthy()

    def unhealthy(self) -> str:
        """Why the agent is stuck ("" when it is not): liveness, /healthz and the watchdog."""
        if self.stop.is_set():
            return "stopping"
        overdue = self.sync_clock.overdue()
        if overdue > 0:
            return f"the sync in progress is {overdue:.0f}s past its deadline"
        idle = time.monotonic() - self._last_loop
        if not self._in_sync and idle >= 2 * self.settings.resync_seconds + 60:
            return f"the loop has not woken for {idle:.0f}s"
        return ""

    def ready(self) -> bool:
        """/readyz: alive, and the API server answering within `api_unreachable_seconds`."""
        limit = self.settings.api_unreachable_seconds
        return not self.unhealthy() and not api_unreached(self.client.reach, limit)

    # -- threads

    def wake(self) -> None:
        self.queue.add(NODE)

    def enqueue(self, key: str) -> None:
        """Put `key` in the work queue (any thread); keys already queued are merged."""
        self.queue.add(key)

    def _watch(self) -> None:
        """Feed the writer's copy of the node from a watch; wake the loop on every change."""
        name = self.settings.node_name
        follow(
            f"node {name}",
            lambda: self.client.list_named("nodes", name),
            lambda rv: self.client.watch("nodes", rv, self.settings.watch_timeout_seconds, name=name),
            self._seen,
            self.stop,
        )

    def _seen(self, obj: dict[str, object] | None) -> None:
        if obj is None:
            LOG.warning("node %s not found", self.settings.node_name)
            self.writer.forget()
            self.changes.seen(None)
        else:
            self._observe(obj)

    def _observe(self, obj: dict[str, object]) -> None:
        view = self.writer.observe(obj)
        meta = obj.get("metadata")
        if isinstance(meta, dict) and meta.get("uid"):
            self.events.uid = str(meta["uid"])
        LOG.debug("node %s at resourceVersion %s", view.name, view.resource_version)
        self.changes.seen(view)

    def _watchdog(self, interval: float) -> None:
        reported = ""
        while not self.stop.wait(interval):
            why = self.unhealthy()
            if why != reported:
                if why:
                    LOG.error("unhealthy, no WATCHDOG=1 to systemd and /healthz 503: %s", why)
                else:
                    LOG.warning("healthy again")
                reported = why
            if not why:
                sdnotify.notify("WATCHDOG=1")

    # -- the loop

    def _on_signal(self, signum: int) -> None:
        """SIGTERM or SIGINT, on the guard's signal thread (never in signal context)."""
        if self.protection.on:
            # upstream's words; the update goes on to its end (or to a wait it may abandon)
            LOG.info("Got SIGTERM, but actively updating")
            self.events.warning("GotSigtermDuringUpdate", "Got SIGTERM but actively updating")
        else:
            LOG.info("got signal %d: stopping", signum)
        self.stop.set()
        self.wake()

    def install_signal_handlers(self) -> None:
        """SIGTERM and SIGINT stop the agent; the handler only writes to a pipe (main thread)."""
        self.signals.install()

    def start_threads(self) -> None:
        self.events.start()
        self.mcn.start()
        if self.settings.metrics_url:
            secure = secure_endpoint(self.settings, self.client, self.metrics.render)
            url = self.settings.metrics_url
            self._server = MetricsServer(self.metrics, url, self.healthy, self.ready, secure)
            self._server.start()
        self._set_host_metrics()
        guard.spawn("watch", self._watch, self.stop)
        guard.spawn("certs", self.certs.run, self.stop)
        if self.mcs is not None:
            guard.spawn("mc-watch", self.mcs.run, self.stop)
        if self.settings.kubelet_healthz_enabled:
            poll = KubeletHealth(
                self.settings.kubelet_healthz_endpoint,
                self.settings.kubelet_poll_seconds,
                self.metrics.kubelet_state,
                self.stop,
            )
            guard.spawn("kubelet-health", poll.run, self.stop)
        interval = sdnotify.watchdog_interval()
        if interval is not None:
            guard.spawn("watchdog", lambda: self._watchdog(interval), self.stop)

    def _set_host_metrics(self) -> None:
        text = ""
        for path in ("/etc/os-release", "/usr/lib/os-release"):
            try:
                text = self.applier.root.join(path).read_text()
                break
            except (OSError, ValueError):
                continue
        self.metrics.set_host_os(*host_os(text))
        # upstream counts them once, when the daemon starts; a metric never stops the agent
        try:
            count = self.applier.unsupported_packages()
        except Exception as exc:
            LOG.warning("could not count the unsupported packages: %s", exc)
            count = None
        if count is not None:
            self.metrics.unsupported_packages.labels(node=self.settings.node_name).set(count)

    def run(self) -> Result:
        """Sync until stopped; SIMULATED_REBOOT when the caller must restart the process."""
        if threading.current_thread() is threading.main_thread():
            self.install_signal_handlers()
        memory.limit_malloc_arenas()
        self.start_threads()
        # what is loaded by now (modules, the API client, the threads) lives as long as the
        # process: kept out of every later collection, which then looks at a sync's objects only
        # (a full collection went from about 15 ms to under 1)
        gc.freeze()
        sdnotify.notify("READY=1")
        self.queue.add(NODE)
        try:
            while not self.stop.is_set():
                # woken at least once a resync period, so the watchdog sees the loop alive
                key = self.queue.get(timeout=self.settings.resync_seconds)
                self._last_loop = time.monotonic()
                if key is None:
                    continue
                try:
                    if self.stop.is_set():
                        break
                    result = self._process(key)
                finally:
                    self.queue.done(key)
                if result is Result.SIMULATED_REBOOT:
                    return result
        finally:
            self.shutdown()
        return Result.IDLE

    def _process(self, key: str) -> Result | None:
        """The one handler of `key`; the loop's only dispatch."""
        if key == RELEASE:
            self._release()
        elif key == AFTER_SYNC:
            self._after_sync()
        elif key == NODE:
            return self._sync_key()
        else:
            self._handle(key)
        return None

    def _release(self) -> None:
        """Hand a sync's memory back once the loop has been idle long enough."""
        idle = time.monotonic() - self._busy_until
        if idle < RELEASE_IDLE_SECONDS:
            self.queue.add_after(RELEASE, RELEASE_IDLE_SECONDS - idle)
            return
        memory.release()

    def _sync_key(self) -> Result | None:
        if not self.machine.syncs():
            return None  # a reboot is on its way: nothing more to do in this boot
        if self.writer.cached is None:
            return None  # no node yet: the watch queues the key when it has one
        self.changes.sync_started(self.writer.cached)
        result = self._sync_once()
        self._busy_until = time.monotonic()
        self.queue.add_after(RELEASE, RELEASE_IDLE_SECONDS)
        self.changes.sync_ended(self.writer.cached)
        if result is None:
            return None
        self.queue.forget(NODE)
        if result is not Result.REBOOTING:
            self.queue.add(AFTER_SYNC)
        # upstream's informer resync: the node is looked at again even when nothing changed
        self.queue.add_after(NODE, self.settings.resync_seconds)
        return result

    # -- the watchers' work on this thread: a failure is retried, never raised

    def _retry_later(self, key: str, what: str, exc: Exception) -> float:
        """Put `key` back after its backoff; the delay."""
        retry_after = exc.retry_after if isinstance(exc, ApiError) else None
        delay = self.queue.add_rate_limited(key, retry_after)
        LOG.warning("%s failed (retry in %.0fs): %s", what, delay, exc)
        if not isinstance(exc, ApiError):
            LOG.debug("%s failure details", what, exc_info=exc)
        return delay

    def _handle(self, key: str) -> None:
        """A watcher's key: its report; a sync queued when it asks for one."""
        source = self.watchers.source
        taken = source.taken if source is not None else 0
        try:
            sync = self.watchers.handle({key})
        except Exception as exc:
            delay = self._retry_later(key, f"reporting {key}", exc)
            if source is not None and source.taken != taken:
                source.redeliver(delay)  # the snapshot taken was not reported: hand it out again
            return
        self.queue.forget(key)
        if sync:
            self.queue.add(NODE)  # drift put back, or a new desiredConfig: sync now
        due = self.watchers.due_in()
        if due is not None:
            # a config directory's snapshot settles after its grace period
            self.queue.add_after(SETTLE, due)

    def _after_sync(self) -> None:
        try:
            self.watchers.after_sync()
        except Exception as exc:
            self._retry_later(AFTER_SYNC, "starting the watchers", exc)
            return
        self.queue.forget(AFTER_SYNC)
        due = self.watchers.due_in()
        if due is not None:
            self.queue.add_after(SETTLE, due)

    def _sync_once(self) -> Result | None:
        """One sync; None when it failed (the key is queued again after its backoff)."""
        self._in_sync = True
        self.sync_clock.begin(longest_timeout() + SYNC_MARGIN)
        boot = self.machine.begin_sync()
        try:
            result = self.syncer.sync(boot=boot)
            self.machine.to(_AFTER[result])
            return result
        except StoppingError:
            LOG.info("sync of node %s interrupted: the daemon is stopping", self.settings.node_name)
            self.machine.failed()
            return None
        except Exception as exc:  # every error is reported on the node, never fatal
            self.machine.failed()
            self._sync_failed(exc)
            return None
        finally:
            self._in_sync = False
            self.sync_clock.end()

    def _sync_failed(self, exc: Exception) -> None:
        verdict = classify(exc)
        if isinstance(exc, WaitingError):
            # a budget allowing no disruption now is tried again at the eviction pace (upstream's
            # controller retries a refused eviction every 5 s), not after a doubling backoff that
            # reaches a minute: a node that holds a rollout slot would sit idle in it
            self.queue.forget(NODE)
            delay = self.settings.eviction_retry_seconds
            self.queue.add_after(NODE, delay)
        else:
            delay = self.queue.add_rate_limited(NODE, verdict.retry_after)
        name = self.settings.node_name
        if verdict.state is None:
            LOG.warning("sync of node %s failed (retry in %.0fs): %s", name, delay, exc)
            return
        if verdict.internal:
            # a bug: its traceback in the log, a sentence for the operator on the node
            LOG.error(
                "sync of node %s failed with an internal error, marking it %s (retry in %.0fs)",
                name,
                verdict.state.value,
                delay,
                exc_info=exc,
            )
        elif verdict.state is NodeState.WORKING:
            # said at WARNING once per reason, not every few seconds for as long as it waits
            waiting = self.writer.cached is not None and self.writer.cached.reason == verdict.reason
            level = logging.DEBUG if waiting else logging.WARNING
            LOG.log(level, "sync of node %s is waiting (retry in %.0fs): %s", name, delay, exc)
            node = self.writer.cached
            if node is not None and ann.transition(node.state, NodeState.WORKING) is not NodeState.WORKING:
                return  # a Degraded node keeps its state and reason until Done, as upstream's
        else:
            LOG.error(
                "sync of node %s failed, marking it %s (retry in %.0fs): %s",
                name,
                verdict.state.value,
                delay,
                exc,
            )
        self._report(verdict.state, verdict.reason)

    def _report(self, state: NodeState, reason: str) -> None:
        try:
            self.writer.set_state(state, reason)
        except Exception as exc:  # the API may be what failed; the retry reports again
            LOG.warning("could not report state %s on node %s: %s", state.value, self.settings.node_name, exc)

    def shutdown(self) -> None:
        self.stop.set()
        self.signals.close()
        guard.call_guarded("stopping the watchers", self.watchers.stop)
        self.events.stop()
        self.mcn.stop()
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
