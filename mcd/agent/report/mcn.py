"""The writer of the node's MachineConfigNode: the update's phases as conditions, best effort.

Upstream's daemon reports each phase of an update on the MachineConfigNode named after the node
(`pkg/upgrademonitor`); a report it cannot write is logged and the update goes on. Here reports
are queued and written in order by a background thread (the reports queued while a write is in
flight folded into the next write), so an update never waits on them and never fails for them:
a write the API server refuses for now (unreachable, throttled, 5xx) is retried with backoff, the
reports after it waiting their turn; a write it refuses for good (no such resource on this
cluster, forbidden) is logged and its reports dropped, and the next report tries again. Each
write is computed from the object last read (`mcd.node.machineconfignode.merge`) and carries its
resourceVersion, so a concurrent writer (the drain controller) costs a re-read, never a lost
condition. The status goes through the `status` subresource; the spec (node, pool, desired
config) is written on creation and when an update is known to be compatible.
"""

from __future__ import annotations

import collections
import itertools
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from mcd.agent.report.node import NodeWriter
from mcd.kube.backoff import Backoff
from mcd.kube.errors import ApiError, ConflictError, NotFoundError
from mcd.node import machineconfignode as mcn
from mcd.node.annotations import NodeState, NodeView
from mcd.runtime import guard

LOG = logging.getLogger(__name__)

QUEUE_SIZE = 100
CONFLICT_RETRIES = 5
RETRY_CAP = 30.0
FLUSH_SECONDS = 3.0

Obj = dict[str, Any]


class MachineConfigNodeApi(Protocol):
    def get_machineconfignode(self, name: str) -> Obj: ...

    def create_machineconfignode(self, obj: Mapping[str, Any]) -> Obj: ...

    def update_machineconfignode(self, name: str, obj: Mapping[str, Any], *, status: bool = False) -> Obj: ...


@dataclass(frozen=True)
class _Item:
    report: mcn.Report
    current_config: str
    desired_config: str


def _types(report: mcn.Report) -> set[str]:
    return {report.parent.type} | ({report.child.type} if report.child is not None else set())


class MachineConfigNodeReporter:
    """Queues phase reports (`report` never blocks and never raises) and writes them in order."""

    def __init__(
        self,
        api: MachineConfigNodeApi | None,
        writer: NodeWriter,
        *,
        clock: Callable[[], float] = time.time,
        retry_cap: float = RETRY_CAP,
    ) -> None:
        self.api = api
        self.writer = writer
        self.clock = clock
        self.retry_cap = retry_cap
        self._queue: collections.deque[_Item] = collections.deque()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._deadline: float | None = None  # set by stop(): write what is queued until then
        self._stopped = threading.Event()
        self._obj: Obj | None = None  # the object as last read or written
        self.last: mcn.Report | None = None  # the latest report (the sync asks which phase it reached)

    @property
    def name(self) -> str:
        return self.writer.name

    # -- the agent's side

    def report(self, report: mcn.Report) -> None:
        c = report.parent
        LOG.debug("machineconfignode %s: %s=%s (%s)", self.name, c.type, c.status, c.reason)
        self.last = report
        if self.api is None:
            return
        node = self.writer.cached or NodeView(self.name, {})
        item = _Item(report, node.current_config, node.desired_config)
        with self._cond:
            if len(self._queue) >= QUEUE_SIZE:
                dropped = self._queue.popleft()
                LOG.warning("machineconfignode queue full: dropped the %s report", dropped.report.parent.type)
            self._queue.append(item)
            self._cond.notify_all()

    def state_changed(self, state: NodeState, reason: str) -> None:
        """The node's state annotation was written: Degraded or Unreconcilable is NodeDegraded,
        Done is its end."""
        if state in (NodeState.DEGRADED, NodeState.UNRECONCILABLE):
            self.report(mcn.degraded(self.name, reason))
        elif state is NodeState.DONE:
            self.report(mcn.not_degraded(self.name))

    def flush(self, timeout: float = FLUSH_SECONDS) -> None:
        """Wait (up to `timeout` seconds) until what is queued is written: before handing the node
        to the controller (drain, uncordon), whose own reports must come after ours."""
        if self._thread is None:
            return
        with self._cond:
            if not self._cond.wait_for(lambda: not self._queue, timeout):
                LOG.info("machineconfignode %s: reports still queued; going on", self.name)

    def start(self) -> None:
        if self.api is not None and self._thread is None:
            self._deadline = None
            self._stopped = threading.Event()
            # guarded: a bug or an unexpected answer restarts the writer after a backoff, with
            # the report it was writing still first in the queue, instead of ending it for good
            self._thread = guard.spawn("machineconfignode", self._run, self._stopped)

    def stop(self, timeout: float = 5.0) -> None:
        """Write what is queued (up to `timeout` seconds), then stop the thread."""
        if self._thread is None:
            return
        with self._cond:
            self._deadline = time.monotonic() + timeout
            self._cond.notify_all()
        self._thread.join(timeout + 1.0)
        self._stopped.set()  # a writer waiting to be restarted is not
        self._thread = None

    # -- the writer thread

    def _stopping_and_late(self) -> bool:
        return self._deadline is not None and time.monotonic() >= self._deadline

    def _run(self) -> None:
        backoff = Backoff(cap=self.retry_cap)
        while True:
            with self._cond:
                self._cond.wait_for(lambda: bool(self._queue) or self._deadline is not None)
                if not self._queue or self._stopping_and_late():
                    if self._queue:
                        LOG.warning(
                            "machineconfignode %s: %d reports not written", self.name, len(self._queue)
                        )
                    return
                batch = self._batch()
            item = batch[0]
            try:
                self._write(batch)
            except ApiError as exc:
                self._obj = None
                if exc.transient:
                    delay = backoff.next_delay(exc.retry_after)
                    LOG.warning(
                        "failed to report %s on machineconfignode %s (retry in %.0fs): %s",
                        item.report.parent.type,
                        self.name,
                        delay,
                        exc,
                    )
                    with self._cond:
                        self._cond.wait_for(self._stopping_and_late, delay)
                    continue
                LOG.warning(
                    "failed to report %s on machineconfignode %s: %s", item.report.parent.type, self.name, exc
                )
            backoff.reset()
            with self._cond:
                for written in batch:  # the queue may have dropped some meanwhile (full)
                    if self._queue and self._queue[0] is written:
                        self._queue.popleft()
                self._cond.notify_all()

    def _batch(self) -> list[_Item]:
        """The reports at the head of the queue that one write carries (called with the lock
        held). Upstream writes each phase as it is reached; here the reports queued while a write
        was in flight are folded into the next one, up to the first that names a condition the
        batch already sets (or changes the spec): every condition still goes through each value
        it was given, in order, and a burst of phases costs one write, not one each."""
        batch = [self._queue[0]]
        seen = _types(batch[0].report)
        for item in itertools.islice(self._queue, 1, None):
            types = _types(item.report)
            if item.report.spec or types & seen:
                break
            batch.append(item)
            seen |= types
        return batch

    def _read(self) -> Obj | None:
        assert self.api is not None
        try:
            return self.api.get_machineconfignode(self.name)
        except NotFoundError:
            return None

    def _write(self, batch: list[_Item]) -> None:
        assert self.api is not None
        item = batch[0]
        pool = mcn.pool_of(item.desired_config)
        for _ in range(CONFLICT_RETRIES):
            obj = self._obj if self._obj is not None else self._read()
            try:
                if obj is None:
                    obj = self.api.create_machineconfignode(
                        mcn.new_object(self.name, pool, item.desired_config)
                    )
                    LOG.info("created machineconfignode %s", self.name)
                if item.report.spec:
                    changed = mcn.spec_change(obj, pool, item.desired_config)
                    if changed is not None:
                        obj = self.api.update_machineconfignode(self.name, changed)
                status = self._merged(obj, batch)
                if status is None:
                    self._obj = obj
                    return
                meta = obj.get("metadata") or {}
                body = {
                    "apiVersion": mcn.API_VERSION,
                    "kind": mcn.KIND,
                    "metadata": {"name": self.name, "resourceVersion": meta.get("resourceVersion", "")},
                    "status": status,
                }
                self._obj = self.api.update_machineconfignode(self.name, body, status=True)
                return
            except ConflictError:
                LOG.debug("machineconfignode %s changed meanwhile: reading it again", self.name)
                self._obj = None
        raise ApiError(409, f"machineconfignode {self.name} kept changing while it was being written")

    def _merged(self, obj: Obj, batch: list[_Item]) -> Obj | None:
        """The status after every report of `batch`, in order; None when none changes it."""
        spec_desired = str(((obj.get("spec") or {}).get("configVersion") or {}).get("desired", ""))
        status: Obj | None = None
        now = self.clock()
        for item in batch:
            merged = mcn.merge(
                status if status is not None else obj.get("status"),
                item.report,
                spec_desired=spec_desired,
                current_config=item.current_config,
                desired_config=item.desired_config,
                now=now,
            )
            status = merged if merged is not None else status
        return status
