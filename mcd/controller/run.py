"""`mcd pool-controller`: lead through the Lease, then follow the cluster by watches until stopped.

Once this replica leads, informers (`mcd.controller.caches`) list the pools, MachineConfigs,
Nodes, MachineConfigNodes and the ControllerConfig once and then watch them; each change queues
a key (`mcd.controller.work`) and one worker thread handles the keys one at a time, reading the
caches: an idle cluster costs the API server the Lease's renewals and nothing else. Every
`interval` seconds every pool (and every node with a drain request) is looked at again from the
caches, and every `resync` seconds the MachineConfigNodes: a resync, as an informer's, for what
time alone changes. A follower only tries the Lease every retry period (on the Lease thread,
which also renews it). A replica that takes over mid-rollout lists everything afresh and
continues: nothing a decision needs is kept only in memory.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from mcd.controller.caches import Caches
from mcd.controller.drain import EVICT_RETRY_SECONDS, DrainSync, DrainTiming
from mcd.controller.events import PoolEvents
from mcd.controller.mcns import MachineConfigNodeSync
from mcd.controller.metrics import ControllerMetrics, MetricsEndpoint
from mcd.controller.pools import PoolSync
from mcd.controller.work import POOL, Work
from mcd.kube.client import CONTROLLER_USER_AGENT, KubeClient
from mcd.kube.errors import ApiError
from mcd.kube.lease import LeaderElector, LeaseSettings, NotLeading
from mcd.kube.workqueue import WorkQueue
from mcd.runtime.guard import SignalFlag, spawn

LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class ControllerOptions:
    lease: LeaseSettings
    interval: float = 2.0  # seconds between two looks at every pool from the caches
    once: bool = False
    eviction_retry: float = EVICT_RETRY_SECONDS
    drain_timing: DrainTiming = field(default_factory=DrainTiming)
    metrics_url: str = ""  # host:port for /metrics ("" for none)
    resync: float = 30.0  # seconds between two looks at the MachineConfigNodes


class PoolController:
    """The drain, pool and MachineConfigNode work behind a leader elector: the Lease is renewed
    by a thread of its own (a handler may take longer than the lease), every write is fenced by
    `LeaderElector.fence`, and once this replica has led, losing the lease ends the process (as
    upstream's controller exits when leader election stops), so it never acts on what it read
    while it led."""

    def __init__(self, api: KubeClient, options: ControllerOptions) -> None:
        self.api = api
        self.options = options
        self.elector = LeaderElector(api, options.lease)
        fence = self.elector.fence
        events = PoolEvents(api, options.lease.namespace, fence=fence)
        self.metrics = ControllerMetrics()
        timing = replace(options.drain_timing, retry=options.eviction_retry)
        # a pool's key (a freed slot refilled, a status written) is not left behind the drains'
        # retries: at 200 nodes twenty drains retrying evictions each second kept a freed slot
        # waiting a median 1.9 s for the next target
        self.queue = WorkQueue(prefer=lambda key: key.startswith(POOL))
        self.work = Work(*self._syncs(events, timing), self.queue)
        self.caches = Caches(api, self.work.changed)
        self.work.caches = self.caches
        # a burst of MachineConfig changes is rendered once, `interval` after the last of it
        self.work.render_delay = 0.0 if options.once else options.interval
        for part in (self.drains, self.pools, self.mcns):
            part.reads = self.caches
        self.pools.resync = options.resync
        self.lost = threading.Event()  # set by the Lease thread when leadership ended
        self._led = False  # kept across a restart of that thread by the guard

    def _syncs(
        self, events: PoolEvents, timing: DrainTiming
    ) -> tuple[PoolSync, DrainSync, MachineConfigNodeSync]:
        fence = self.elector.fence
        self.drains = DrainSync(self.api, timing=timing, fence=fence, events=events, metrics=self.metrics)
        self.pools = PoolSync(self.api, events=events, fence=fence, stuck=lambda: self.drains.stuck)
        self.mcns = MachineConfigNodeSync(self.api, fence=fence, every=self.options.resync)
        return self.pools, self.drains, self.mcns

    def one_pass(self) -> bool:
        """Everything at once, from one list of each collection (`--once`; without watches):
        drains first (they unblock nodes), then pools. False when something could not be done
        or when this replica stopped leading during the pass."""
        ok = True
        if not self.caches.watching:
            try:
                self.caches.prime()
            except ApiError as exc:
                LOG.warning("pass: %s", exc)
                return False
        self.pools.render_after = 0.0  # a pass renders what it sees: nothing comes after it
        for part in (self.drains.sync, self.pools.sync, self.mcns.sync):
            try:
                part()
            except ApiError as exc:  # a list failed: the other part may still get through
                LOG.warning("pass: %s (retrying)", exc)
                ok = False
            except NotLeading as exc:
                LOG.warning("pass abandoned before a write: %s", exc)
                return False
        return ok and not self.pools.errors and not self.drains.errors and not self.mcns.errors

    def _keep_lease(self, stop: threading.Event) -> None:
        """The Lease thread: acquire, then renew every retry period, independently of the passes;
        once leadership is lost (another holder, or no renewal within the deadline), say so and
        end."""
        while not stop.is_set():
            if self.elector.tick():
                self._led = True
            elif self._led:
                self.lost.set()
                return
            stop.wait(self.options.lease.retry_period)

    def run(self, stop: threading.Event, clock: Callable[[], float] = time.monotonic) -> int:
        """Until `stop` (SIGTERM): 0; 1 when the lease was lost after leading (the process exits and
        is started again as a follower). With `once`, one pass as the leader (exit 1 if another
        leads)."""
        if self.options.once:
            try:
                return self._once()
            finally:
                self.elector.release()
        halt = threading.Event()
        url = self.options.metrics_url
        endpoint = MetricsEndpoint(self.metrics, url) if url else None
        renewer = spawn("lease", lambda: self._keep_lease(halt), halt)
        try:
            return self._work(stop, clock)
        finally:
            halt.set()
            self.queue.shut_down()
            self.caches.stop()
            renewer.join()
            if endpoint is not None:
                endpoint.close()
            self.elector.release()

    def _work(self, stop: threading.Event, clock: Callable[[], float]) -> int:
        """The worker: once leading, start the informers, then handle keys as they come, with a
        resync every `interval` (the MachineConfigNodes every `resync`)."""
        next_resync = next_mcns = 0.0
        while not stop.is_set():
            if self.lost.is_set():
                lease = f"{self.options.lease.namespace}/{self.options.lease.name}"
                LOG.error("leadership of %s lost: exiting", lease)
                return 1
            if not self.elector.leading:
                stop.wait(self.options.lease.retry_period)
                continue
            if not self.caches.watching:
                self.caches.start()  # each informer's list queues what it found
            now = clock()
            if now >= next_resync and self.caches.synced():
                self.work.resync(mcns=now >= next_mcns)
                next_resync = now + self.options.interval
                next_mcns = next_mcns if now < next_mcns else now + self.options.resync
            key = self.queue.get(timeout=min(self.options.lease.retry_period, self.options.interval))
            if key is None:
                continue
            try:
                self.work.handle(key)
            except NotLeading as exc:
                LOG.warning("%s abandoned before a write: %s", key, exc)
            finally:
                self.queue.done(key)
        return 0

    def _once(self) -> int:
        if self.elector.tick():
            return 0 if self.one_pass() else 1
        lease = f"{self.options.lease.namespace}/{self.options.lease.name}"
        if self.elector.last_error:
            LOG.error("cannot take the lease %s: %s", lease, self.elector.last_error)
        else:
            holder = self.elector.holder or "another replica"
            LOG.error("the lease %s is held by %s: not passing", lease, holder)
        return 1


def serve(api: KubeClient, options: ControllerOptions) -> int:
    """Run until SIGTERM or SIGINT (the handler only sets the stop flag), releasing the Lease."""
    stop = threading.Event()

    def on_signal(signum: int) -> None:
        LOG.info("got signal %d: stopping", signum)
        stop.set()

    signals = SignalFlag(on_signal)
    signals.install()
    try:
        return PoolController(api, options).run(stop)
    finally:
        signals.close()


def start(
    kubeconfig: str,
    namespace: str,
    lease_name: str,
    *,
    identity: str,
    lease_duration: float,
    interval: float,
    once: bool,
    eviction_retry: float = EVICT_RETRY_SECONDS,
    metrics_url: str = "",
) -> int:
    """`mcd pool-controller`: the client (the pod's account when `kubeconfig` is empty), then `serve`."""
    if lease_duration < 3 or interval <= 0 or eviction_retry <= 0:
        raise ValueError(
            "--lease-duration must be at least 3 seconds, --interval and --eviction-retry positive"
        )
    identity = identity or f"{socket.gethostname()}_{uuid.uuid4()}"
    # renew well within the duration, as client-go's defaults do (15 s: renew by 10, retry every 2)
    renew, retry = lease_duration * 2 / 3, min(2.0, lease_duration / 5)
    lease = LeaseSettings(namespace, lease_name, identity, lease_duration, renew, retry)
    api = KubeClient.from_kubeconfig(kubeconfig, CONTROLLER_USER_AGENT)
    try:
        return serve(api, ControllerOptions(lease, interval, once, eviction_retry, metrics_url=metrics_url))
    finally:
        api.close()
