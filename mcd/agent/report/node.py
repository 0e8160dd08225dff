"""The single writer of the daemon's Node: every annotation and cordon change goes through here.

Each change is a JSON merge patch carrying the resourceVersion the change was computed from, so
the API server refuses it (409) when the node moved meanwhile; the writer then reads the node
again and recomputes. A change that the node already shows sends nothing. The writer also keeps
the newest copy of the node (from the watch, patch answers and reads), which the sync reads
instead of asking the API server again: upstream's informer cache.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from mcd.agent.errors import TransientError
from mcd.kube.errors import ConflictError
from mcd.node.annotations import NodeState, NodeView, state_annotations

LOG = logging.getLogger(__name__)

CONFLICT_RETRIES = 5


class NodeApi(Protocol):
    def get_node(self, name: str) -> dict[str, Any]: ...

    def patch_node(self, name: str, patch: Mapping[str, Any], *, status: bool = False) -> dict[str, Any]: ...


def _newer(a: str, b: str) -> bool:
    """Whether resourceVersion `a` is newer than `b` (opaque strings; numeric ones are compared)."""
    if a.isdigit() and b.isdigit():
        return int(a) > int(b)
    return True


class NodeWriter:
    """Owns the daemon's view of its Node and every write to it."""

    def __init__(
        self, api: NodeApi, name: str, on_state: Callable[[NodeState, str], None] | None = None
    ) -> None:
        self.api = api
        self.name = name
        self._node: NodeView | None = None
        self._cond = threading.Condition()
        # told every state written (`mcd.agent.observer.Observer.state_changed`, wired by `mcd.agent.compose`)
        self.on_state = on_state

    # -- the cached node

    def observe(self, obj: Mapping[str, Any]) -> NodeView:
        """Take a node object seen on the watch or in an answer, unless an equal or newer one is
        known. One without a resourceVersion is never taken: it cannot be ordered against the
        copy held, and a patch computed from it would carry no precondition."""
        view = NodeView.from_object(obj)
        if not view.resource_version:
            LOG.warning("node %s: ignored a copy without a resourceVersion", view.name or self.name)
            with self._cond:
                return self._node if self._node is not None else view
        with self._cond:
            if self._node is None or _newer(view.resource_version, self._node.resource_version):
                self._node = view
                self._cond.notify_all()
            return self._node

    def forget(self) -> None:
        """Drop the cached node (it was deleted)."""
        with self._cond:
            self._node = None
            self._cond.notify_all()

    @property
    def cached(self) -> NodeView | None:
        with self._cond:
            return self._node

    def node(self) -> NodeView:
        """The newest copy of the node; read from the API server when none is known yet."""
        current = self.cached
        return current if current is not None else self.refresh()

    def refresh(self) -> NodeView:
        return self.observe(self.api.get_node(self.name))

    def wait_for(self, predicate: Callable[[NodeView], bool], timeout: float) -> NodeView | None:
        """The node once `predicate` holds for it (fed by the watch), or None after `timeout` seconds."""
        with self._cond:
            ok = self._cond.wait_for(lambda: self._node is not None and predicate(self._node), timeout)
            return self._node if ok else None

    # -- writes

    def set_annotations(
        self, changes: Mapping[str, str | None], *, unschedulable: bool | None = None
    ) -> NodeView:
        """Set (value) or delete (None) annotations and optionally the cordon, in one patch."""
        for _ in range(CONFLICT_RETRIES):
            node = self.node()
            delta: dict[str, str | None] = {}
            for key, value in changes.items():
                have = node.annotations.get(key)
                if value is None and key in node.annotations:
                    delta[key] = None
                elif value is not None and have != value:
                    delta[key] = value
            cordon = unschedulable is not None and node.unschedulable != unschedulable
            if not delta and not cordon:
                return node
            if not node.resource_version:  # never an unconditional patch
                raise TransientError(f"node {self.name}: no copy with a resourceVersion to patch from")
            patch: dict[str, Any] = {"metadata": {"resourceVersion": node.resource_version}}
            if delta:
                patch["metadata"]["annotations"] = delta
            if cordon:
                patch["spec"] = {"unschedulable": bool(unschedulable)}
            try:
                obj = self.api.patch_node(self.name, patch)
            except ConflictError:
                LOG.debug("node %s changed while patching it: reading it again", self.name)
                self.refresh()
                continue
            LOG.debug("patched node %s: %s", self.name, _describe(delta, unschedulable if cordon else None))
            return self.observe(obj)
        raise TransientError(f"node {self.name} kept changing while it was being patched")

    def set_state(
        self, state: NodeState, reason: str = "", extra: Mapping[str, str | None] | None = None
    ) -> NodeView:
        """Report `state` with `reason` (upstream's truncation), plus any other annotations given."""
        changes: dict[str, str | None] = dict(state_annotations(state, reason))
        if extra:
            changes.update(extra)
        view = self.set_annotations(changes)
        if self.on_state is not None:
            self.on_state(state, reason)
        return view


def _describe(delta: Mapping[str, str | None], unschedulable: bool | None) -> str:
    parts = [f"{k.rsplit('/', 1)[-1]}={'<deleted>' if v is None else repr(v[:80])}" for k, v in delta.items()]
    if unschedulable is not None:
        parts.append(f"unschedulable={unschedulable}")
    return ", ".join(parts)
