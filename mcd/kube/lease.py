"""Leader election through a coordination.k8s.io/v1 Lease, as client-go's leaderelection does.

A replica leads while the Lease names it and it renewed it within `renew_deadline`. Another
replica takes the Lease over only once it has seen the same Lease record unchanged for
`leaseDurationSeconds` on its own clock (never by comparing the holder's timestamps with its
clock, which may disagree), and every write carries the resourceVersion it read, so of two
replicas racing for it one gets a conflict and stays a follower. Releasing (on SIGTERM) empties
the holder and shortens the duration to one second, so a successor starts at once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from mcd.kube.client import KubeClient
from mcd.kube.errors import ApiError, ConflictError

LOG = logging.getLogger(__name__)

Obj = dict[str, Any]


def micro_time(ts: float) -> str:
    """metav1.MicroTime's wire form."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class NotLeading(Exception):
    """A write was about to be made by a replica that no longer knows itself the leader."""


@dataclass(frozen=True)
class LeaseSettings:
    namespace: str
    name: str
    identity: str
    duration: float = 15.0  # client-go's usual LeaseDuration / RenewDeadline / RetryPeriod
    renew_deadline: float = 10.0
    retry_period: float = 2.0


class LeaderElector:
    """`tick()` acquires or renews and says whether this replica leads now."""

    def __init__(
        self,
        api: KubeClient,
        settings: LeaseSettings,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.api, self.s, self.clock, self.wall = api, settings, clock, wall
        self._seen_version = ""  # the Lease record last seen, and when (on our clock)
        self._seen_at = 0.0
        self._renewed_at: float | None = None  # our last successful write of the Lease
        self.holder = ""
        self.last_error = ""  # why the last tick could not read or write the Lease

    @property
    def leading(self) -> bool:
        return self._renewed_at is not None and self.clock() - self._renewed_at < self.s.renew_deadline

    def fence(self) -> None:
        """Raise NotLeading unless this replica renewed the Lease within the renew deadline: called
        before every write, so a replica that was frozen or cut off (and may have been replaced,
        which takes the whole lease duration, longer than the deadline) writes nothing more."""
        if not self.leading:
            raise NotLeading(f"not the leader of the lease {self.s.namespace}/{self.s.name} (any more)")

    def tick(self) -> bool:
        was = self.leading
        self.last_error = ""
        try:
            self._try()
        except ApiError as exc:
            self.last_error = str(exc)
            LOG.warning("lease %s/%s: %s", self.s.namespace, self.s.name, exc)
        now = self.leading
        if now and not was:
            LOG.info(
                "became the leader (lease %s/%s, identity %s)", self.s.namespace, self.s.name, self.s.identity
            )
        elif was and not now:
            LOG.warning("lost the lease %s/%s to %s", self.s.namespace, self.s.name, self.holder or "nobody")
        return now

    def _record(self, holder: str, old: Obj | None, now: float) -> Obj:
        spec = (old or {}).get("spec") or {}
        transitions = int(spec.get("leaseTransitions") or 0)
        ours = spec.get("holderIdentity") == holder
        return {
            "holderIdentity": holder,
            "leaseDurationSeconds": max(1, int(self.s.duration)),
            "acquireTime": spec.get("acquireTime") if ours and spec.get("acquireTime") else micro_time(now),
            "renewTime": micro_time(now),
            "leaseTransitions": transitions if ours or old is None else transitions + 1,
        }

    def _try(self) -> None:
        lease = self.api.get_lease(self.s.namespace, self.s.name)
        now = self.wall()
        if lease is None:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.s.name, "namespace": self.s.namespace},
                "spec": self._record(self.s.identity, None, now),
            }
            try:
                created = self.api.create_lease(self.s.namespace, body)
            except ConflictError:
                return  # another replica created it first
            self._took(created)
            return
        spec = lease.get("spec") or {}
        version = str(lease["metadata"].get("resourceVersion", ""))
        if version != self._seen_version:
            self._seen_version, self._seen_at = version, self.clock()
        self.holder = str(spec.get("holderIdentity") or "")
        duration = float(spec.get("leaseDurationSeconds") or self.s.duration)
        if self.holder and self.holder != self.s.identity and self.clock() < self._seen_at + duration:
            self._renewed_at = None  # someone else leads and renews
            return
        body = {**lease, "spec": {**spec, **self._record(self.s.identity, lease, now)}}
        try:
            updated = self.api.update_lease(self.s.namespace, body)
        except ConflictError:
            return  # another replica wrote it between our read and write: read again next tick
        self._took(updated)

    def _took(self, lease: Obj) -> None:
        self._seen_version = str(lease["metadata"].get("resourceVersion", ""))
        self._seen_at = self._renewed_at = self.clock()
        self.holder = self.s.identity

    def release(self) -> None:
        """Give the Lease up if this replica holds it (a successor need not wait for it to expire)."""
        if self._renewed_at is None:
            return
        self._renewed_at = None
        try:
            lease = self.api.get_lease(self.s.namespace, self.s.name)
            if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.s.identity:
                return
            now = micro_time(self.wall())
            spec = {
                **lease["spec"],
                "holderIdentity": "",
                "leaseDurationSeconds": 1,
                "renewTime": now,
                "acquireTime": now,
            }
            self.api.update_lease(self.s.namespace, {**lease, "spec": spec})
            LOG.info("released the lease %s/%s", self.s.namespace, self.s.name)
        except ApiError as exc:
            LOG.warning("could not release the lease %s/%s: %s", self.s.namespace, self.s.name, exc)
