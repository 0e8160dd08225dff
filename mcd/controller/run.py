"""`mcd pool-controller`: lead through the Lease, then pass over the drains and pools until stopped.

A pass is level-triggered: it reads the pools, configs, nodes (and, for a drain, the pods)
afresh and does the next step of everything, so passes every `interval` seconds need no watch,
and a replica that takes over mid-rollout simply continues. Only the leader passes; a follower
only tries the Lease every retry period.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from mcd.controller.drain import EVICT_RETRY_SECONDS, DrainSync
from mcd.controller.events import PoolEvents
from mcd.controller.pools import PoolSync
from mcd.kube.client import CONTROLLER_USER_AGENT, KubeClient
from mcd.kube.errors import ApiError
from mcd.kube.lease import LeaderElector, LeaseSettings
from mcd.runtime.guard import SignalFlag

LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class ControllerOptions:
    lease: LeaseSettings
    interval: float = 2.0
    once: bool = False
    eviction_retry: float = EVICT_RETRY_SECONDS


class PoolController:
    """The drain and pool passes behind a leader elector."""

    def __init__(self, api: KubeClient, options: ControllerOptions) -> None:
        self.api = api
        self.options = options
        self.elector = LeaderElector(api, options.lease)
        self.drains = DrainSync(api, retry_seconds=options.eviction_retry)
        self.pools = PoolSync(api, events=PoolEvents(api, options.lease.namespace))

    def one_pass(self) -> bool:
        """Drains first (they unblock nodes), then pools. False when something could not be done
        (the next pass retries it)."""
        ok = True
        for part in (self.drains.sync, self.pools.sync):
            try:
                part()
            except ApiError as exc:  # a list failed: the other part may still get through
                LOG.warning("pass: %s (retrying)", exc)
                ok = False
        return ok and not self.pools.errors and not self.drains.errors

    def run(self, stop: threading.Event, clock: Callable[[], float] = time.monotonic) -> int:
        """Until `stop` (SIGTERM); with `once`, one pass as the leader (exit 1 if another leads).
        The Lease is renewed every retry period; a pass is made every `interval`, or sooner
        when a refused eviction may be tried again."""
        next_pass = 0.0
        try:
            while not stop.is_set():
                wait = self.options.lease.retry_period
                if self.elector.tick():
                    retry = self.drains.next_retry()
                    if self.options.once or clock() >= next_pass or (retry is not None and retry <= 0):
                        ok = self.one_pass()
                        if self.options.once:
                            return 0 if ok else 1
                        next_pass = clock() + self.options.interval
                    retry = self.drains.next_retry()
                    wait = min(wait, max(0.0, next_pass - clock()), wait if retry is None else retry)
                elif self.options.once:
                    lease = f"{self.options.lease.namespace}/{self.options.lease.name}"
                    if self.elector.last_error:
                        LOG.error("cannot take the lease %s: %s", lease, self.elector.last_error)
                    else:
                        holder = self.elector.holder or "another replica"
                        LOG.error("the lease %s is held by %s: not passing", lease, holder)
                    return 1
                stop.wait(wait)
            return 0
        finally:
            self.elector.release()


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
    eviction_retry: float = EVICT_RETRY_SECONDS,
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
        return serve(api, ControllerOptions(lease, interval, once, eviction_retry))
    finally:
        api.close()
