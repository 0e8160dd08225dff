"""The pool controller's work, driven by changes: what each informer event queues, and each key's
handler.

Keys, one per thing to look at again (a burst of changes to it is merged into one look):
  pool/<name>    the pool's render, targets and status (`PoolSync.sync(only=…)`): queued by a
                 change of the pool; of any MachineConfig, Node or the ControllerConfig (a node
                 may change pools with its labels, and pools are few, so every pool is queued);
                 and when a drain's blocked state changes (told on the pool)
  drain/<node>   the node's drain or uncordon request (`DrainSync.sync_node`): queued by a change
                 of the node or of a pod bound to it, and again when a refused eviction may be
                 tried again
  mcns           the MachineConfigNodes' owners (`MachineConfigNodeSync`): queued by a change of
                 one of them, or a node added or deleted
A handler that fails is queued again after its key's backoff (`WorkQueue.add_rate_limited`: 1 s
doubling to 60 s); one that succeeds resets it. `resync` queues every pool and every node with a
request again (time alone changes some answers: a stalled node, a drain past its threshold).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from mcd.controller.caches import Caches
from mcd.controller.drain import DrainSync, pending_request
from mcd.controller.mcns import MachineConfigNodeSync
from mcd.controller.pools import PoolSync
from mcd.kube.errors import ApiError
from mcd.kube.lease import NotLeading
from mcd.kube.workqueue import WorkQueue

LOG = logging.getLogger(__name__)

Obj = dict[str, Any]
POOL, DRAIN, MCNS = "pool/", "drain/", "mcns"


class Work:
    """Routes changes to keys of `queue` and runs a key's handler (`handle`)."""

    def __init__(
        self, pools: PoolSync, drains: DrainSync, mcns: MachineConfigNodeSync, queue: WorkQueue
    ) -> None:
        self.pools, self.drains, self.mcns, self.queue = pools, drains, mcns, queue
        self.caches: Caches | None = None  # set by the controller once its caches exist
        self.handled = 0  # keys handled (a figure for tests and benchmarks)
        self.render_delay = 0.0  # seconds a MachineConfig change waits before it is rendered

    # -- from the informers' threads

    def changed(self, resource: str, key: str, obj: Obj | None) -> None:
        if resource == "machineconfigpools":
            self.queue.add(POOL + key)
        elif resource == "machineconfigs":
            # rendered once the changes stop for `render_delay` (upstream's render controller
            # waits 5 s): a directory applied at once becomes one rendered config, not one per
            # MachineConfig with nodes rolled through each
            self.pools.render_after = time.monotonic() + self.render_delay
            self.all_pools(after=self.render_delay)
        elif resource == "controllerconfigs":
            self.all_pools()
        elif resource == "nodes":
            self.all_pools()
            if obj is None or pending_request(obj) or self.drains.tracks(key):
                self.queue.add(DRAIN + key)
            if obj is None or self.caches is None or self.caches.get("machineconfignodes", key) is None:
                self.queue.add(MCNS)  # a node without its object yet, or gone
        elif resource == "machineconfignodes":
            self.queue.add(MCNS)
        elif resource == "pods":
            self.queue.add(DRAIN + key)  # `key` is the node the pods are bound to

    def all_pools(self, after: float = 0.0) -> None:
        if self.caches is not None:
            for name in self.caches.names("machineconfigpools"):
                if after > 0:
                    self.queue.add_after(POOL + name, after)
                else:
                    self.queue.add(POOL + name)

    def resync(self, *, mcns: bool) -> None:
        """Every pool, every node with a pending request (and the MachineConfigNodes with `mcns`)."""
        self.all_pools()
        if self.caches is not None:
            for node in self.caches.list_all("nodes"):
                if pending_request(node):
                    self.queue.add(DRAIN + str((node.get("metadata") or {}).get("name", "")))
        if mcns:
            self.queue.add(MCNS)

    # -- the worker

    def handle(self, key: str) -> None:
        """Run `key`'s handler; NotLeading goes to the caller (nothing more is written)."""
        self.handled += 1
        try:
            failed = self._run(key)
        except ApiError as exc:  # a read of a handler (a pod list, a fresh node) failed
            LOG.warning("%s: %s (retrying)", key, exc)
            failed = True
        except NotLeading:
            raise
        if failed:
            self.queue.add_rate_limited(key)
        else:
            self.queue.forget(key)

    def _run(self, key: str) -> bool:
        if key.startswith(POOL):
            self.pools.sync(only=key[len(POOL) :])
            return bool(self.pools.errors)
        if key.startswith(DRAIN):
            return self._drain(key[len(DRAIN) :])
        if key == MCNS:
            self.mcns.sync(now=True)
            return bool(self.mcns.errors)
        LOG.error("unknown work key %r", key)
        return False

    def _drain(self, name: str) -> bool:
        assert self.caches is not None
        node = self.caches.get("nodes", name)
        told = self.drains.stuck.get(name)
        self.drains.sync_node(name, node)
        if node is None or not pending_request(node).startswith("drain"):
            self.caches.drop_pods(name)
        retry = self.drains.next_retry_for(name)
        if retry is not None:
            self.queue.add_after(DRAIN + name, retry)
        if self.drains.stuck.get(name) != told:
            self.all_pools()  # the pool tells of it
        return bool(self.drains.errors)
