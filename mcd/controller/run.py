"""`mcd pool-controller`: lead through the Lease, then pass over the drains and pools until stopped.

A pass is level-triggered: it reads the pools, configs, nodes (and, for a drain, the pods)
afresh and does the next step of everything, so passes every `interval` seconds need no watch,
and a replica that takes over mid-rollout simply continues. Only the leader passes; a follower
only tries the Lease every retry period (on the Lease thread, which also renews it).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from mcd.controller.drain import EVICT_RETRY_SECONDS, DrainSync, DrainTiming
from mcd.controller.events import PoolEvents
from mcd.controller.mcns import MachineConfigNodeSync
from mcd.controller.metrics import ControllerMetrics, MetricsEndpoint
from mcd.controller.pools import PoolSync
from mcd.kube.client import CONTROLLER_USER_AGENT, KubeClient
from mcd.kube.errors import ApiError
from mcd.kube.lease import LeaderElector, LeaseSettings, NotLeading
from mcd.runtime.guard import SignalFlag, spawn

LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class ControllerOptions:
    lease: LeaseSettings
    interval: float = 2.0
    once: bool = False
    eviction_retry: float = EVICT_RETRY_SECONDS
    drain_timing: DrainTiming = field(default_factory=DrainTiming)
    metrics_url: str = ""  # host:port for /metrics ("" for none)
    resync: float = 30.0  # seconds between two looks at the MachineConfigNodes and the ControllerConfig


class PoolController:
    """The drain and pool passes behind a leader elector: the Lease is renewed by a thread of its
    own (a pass may take longer than the lease), every write of a pass is fenced by
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
        self.drains = DrainSync(api, timing=timing, fence=fence, events=events, metrics=self.metrics)
        self.pools = PoolSync(api, events=events, fence=fence, stuck=lambda: self.drains.stuck)
        self.mcns = MachineConfigNodeSync(api, fence=fence, every=options.resync)
        self.pools.resync = options.resync
        self.lost = threading.Event()  # set by the Lease thread when leadership ended
        self._led = False  # kept across a restart of that thread by the guard

    def one_pass(self) -> bool:
        """Drains first (they unblock nodes), then pools. False when something could not be done
        (the next pass retries it) or when this replica stopped leading during the pass."""
        ok = True
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
        leads). A pass is made every `interval`, or sooner when a refused eviction may be tried
        again."""
        if self.options.once:
            try:
                return self._once()
            finally:
                self.elector.release()
        halt = threading.Event()
        url = self.options.metrics_url
        endpoint = MetricsEndpoint(self.metrics, url) if url else None
        renewer = spawn("lease", lambda: self._keep_lease(halt), halt)
        next_pass = 0.0
        try:
            while not stop.is_set():
                if self.lost.is_set():
                    lease = f"{self.options.lease.namespace}/{self.options.lease.name}"
                    LOG.error("leadership of %s lost: exiting", lease)
                    return 1
                wait = self.options.lease.retry_period
                if self.elector.leading:
                    retry = self.drains.next_retry()
                    if clock() >= next_pass or (retry is not None and retry <= 0):
                        self.one_pass()
                        next_pass = clock() + self.options.interval
                    retry = self.drains.next_retry()
                    wait = min(wait, max(0.0, next_pass - clock()), wait if retry is None else retry)
                stop.wait(wait)
            return 0
        finally:
            halt.set()
            renewer.join()
            if endpoint is not None:
                endpoint.close()
            self.elector.release()

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
    kubeconfig: str, namespace: str, lease_name: str, *,
    identity: str, lease_duration: float, interval: float, once: bool,
    eviction_retry: float = EVICT_RETRY_SECONDS, metrics_url: str = "",
) -> int:  # fmt: skip
    """`mcd pool-controller`: the client (the pod's account when `kubeconfig` is empty), then `serve`."""
    if lease_duration < 3 or interval <= 0 or eviction_retry <= 0:
        raise ValueError(
            "--lease-duration must be at least 3 seconds, --interval and --eviction-retry positive"
        )
    identity = identity or f"{socket.gethostname()}_{uuid.uuid4()}"
    # renew well within the duration, as client-go's defaults do (15 s: renew by 10, retry every 2)
    lease = LeaseSettings(namespace, lease_name, identity, lease_duration, lease_duration * 2 / 3,
                          min(2.0, lease_duration / 5))  # fmt: skip
    api = KubeClient.from_kubeconfig(kubeconfig, CONTROLLER_USER_AGENT)
    try:
        return serve(api, ControllerOptions(lease, interval, once, eviction_retry, metrics_url=metrics_url))
    finally:
        api.close()
