"""Which Node watch events are work for the agent's queue (`mcd.agent.workqueue`).

A sync reads a few fields of its Node to decide (`acted_on`); an event that changes none of them
(the agent's reason, the cordon, another controller's annotations) queues nothing. A change by
others (desiredConfig, the drain's answer …) queues the sync at once. A change of a field the
agent writes itself (its state, currentConfig …) seen outside a sync (the drift report's
Degraded, an admin's edit) queues it rate-limited, as upstream rate-limits every node event, so
the agent's own writes can never cut a failure's backoff short. Events during a sync (its own
writes coming back, the drain's answer it waits for) queue nothing: once it ends, a change of
what others ask for that it did not act on queues it again.
"""

from __future__ import annotations

import threading

from mcd.agent.workqueue import WorkQueue
from mcd.node import annotations as ann
from mcd.node.annotations import NodeView


def acted_on(node: NodeView) -> tuple[object, ...]:
    """The fields of the Node a sync reads to decide; the first five are written by others."""
    a = node.annotations
    return (
        a.get(ann.DESIRED_CONFIG),
        a.get(ann.DESIRED_IMAGE),
        node.deleting,
        a.get(ann.CONTROL_PLANE_TOPOLOGY),
        a.get(ann.LAST_APPLIED_DRAIN),
        node.state,
        a.get(ann.CURRENT_CONFIG),
        a.get(ann.CURRENT_IMAGE),
        a.get(ann.DESIRED_DRAIN),
        a.get(ann.POST_CONFIG_ACTION),
    )


def external(fields: tuple[object, ...]) -> tuple[object, ...]:
    """The part of `acted_on` that others write (the controller, an admin), never the agent."""
    return fields[:5]


class NodeChanges:
    """Puts `key` into `queue` for the Node changes that are work (any thread)."""

    def __init__(self, queue: WorkQueue, key: str) -> None:
        self.queue, self.key = queue, key
        self._lock = threading.Lock()
        self._seen: tuple[object, ...] | None = None  # as last queued or synced
        self._synced_from: tuple[object, ...] | None = None  # as the sync in progress started

    def sync_started(self, node: NodeView | None) -> None:
        with self._lock:
            self._synced_from = acted_on(node) if node is not None else None

    def sync_ended(self, node: NodeView | None) -> None:
        """A change of what others ask for (desiredConfig, desiredImage, deletion, topology) seen
        during the sync, by the watch or its own reads, was not acted on by it: sync again. The
        drain's answer is not among them: the sync waits for it itself."""
        now = acted_on(node) if node is not None else None
        with self._lock:
            before, self._synced_from, self._seen = self._synced_from, None, now
        if before is not None and now is not None and external(before)[:4] != external(now)[:4]:
            self.queue.add(self.key)

    def seen(self, node: NodeView | None) -> None:
        """The Node as the watch delivered it (None: deleted)."""
        fields = acted_on(node) if node is not None else None
        with self._lock:
            if self._synced_from is not None:
                return  # during a sync: `sync_ended` looks at what came meanwhile
            if fields is not None and fields == self._seen:
                return
            before, self._seen = self._seen, fields
        if before is None or fields is None or external(before) != external(fields):
            self.queue.add(self.key)
        else:
            self.queue.add_rate_limited(self.key)
