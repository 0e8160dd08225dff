"""The MachineConfigNodes' lifetime: each belongs to its Node, and goes with it.

Upstream's daemon writes the MachineConfigNode with an ownerReference to its Node (so the
garbage collector deletes it with the node), and its operator deletes the MachineConfigNodes of
nodes that no longer exist. mcd's agent creates the object; here, each pass, the controller
gives any MachineConfigNode without it that ownerReference (an update with the resourceVersion
it read: a concurrent write of the agent wins, and the next pass tries again) and deletes those
whose node is gone.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from mcd.controller.caches import Live, Reads
from mcd.kube.client import KubeClient
from mcd.kube.errors import ApiError, ConflictError, NotFoundError

LOG = logging.getLogger(__name__)

RESYNC_SECONDS = 30.0

Obj = dict[str, Any]


def owner_of(node: Mapping[str, Any]) -> Obj:
    meta = node.get("metadata") or {}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "name": str(meta.get("name", "")),
        "uid": str(meta.get("uid", "")),
    }


def owned_by(mcn: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    uid = (node.get("metadata") or {}).get("uid")
    refs = (mcn.get("metadata") or {}).get("ownerReferences") or []
    return any(r.get("kind") == "Node" and r.get("uid") == uid for r in refs)


class MachineConfigNodeSync:
    """`errors`: what the last pass could not do (each retried on the next)."""

    def __init__(
        self,
        api: KubeClient,
        *,
        fence: Callable[[], None] = lambda: None,
        every: float = RESYNC_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        reads: Reads | None = None,
    ) -> None:
        """`every`: seconds between two looks when passing (the list of every MachineConfigNode
        is not worth making every pass: a node is deleted, or its agent creates one, rarely);
        `reads`: the informers' caches (by default a list each)."""
        self.api = api
        self.reads = reads or Live(api)
        self.fence = fence
        self.every, self.clock = every, clock
        self._next = 0.0
        self.errors: list[str] = []

    def sync(self, *, now: bool = False) -> None:
        """A look, unless the last was less than `every` ago (`now`: whenever asked)."""
        if not now and self.clock() < self._next:
            return
        self._next = self.clock() + self.every
        self.errors = []
        # the MachineConfigNodes first, then the nodes: an agent creates its object after its node
        # exists, so a node missing from the later list is really gone (listed the other way
        # round, a node and its object both new in between would lose the object)
        mcns = self.reads.list_all("machineconfignodes")
        by_name = {str((n.get("metadata") or {}).get("name", "")): n for n in self.reads.list_all("nodes")}
        for mcn in mcns:
            meta = mcn.get("metadata") or {}
            name = str(meta.get("name", ""))
            node = by_name.get(name)
            try:
                if node is None and self._gone(name):
                    self.fence()
                    self.api.delete_machineconfignode(name)
                    LOG.info("node %s has been removed: deleted its machineconfignode", name)
                elif node is not None and not owned_by(mcn, node):
                    refs = [r for r in meta.get("ownerReferences") or [] if r.get("kind") != "Node"]
                    self.fence()
                    self.api.update_machineconfignode(
                        name, {**mcn, "metadata": {**meta, "ownerReferences": [*refs, owner_of(node)]}}
                    )
                    LOG.debug("machineconfignode %s: owned by its node", name)
            except NotFoundError:
                continue  # deleted meanwhile
            except ConflictError:
                continue  # written meanwhile (by the agent): the next pass looks again
            except ApiError as exc:
                LOG.warning("machineconfignode %s: %s (retrying)", name, exc)
                self.errors.append(f"machineconfignode {name}: {exc}")

    def _gone(self, name: str) -> bool:
        """Whether node `name` is really gone, asked of the API server: the caches' watches of
        the nodes and of the MachineConfigNodes are apart, so a new node's object may be seen
        before the node (a deletion is rare: one read each)."""
        try:
            self.api.get_node(name)
        except NotFoundError:
            return True
        return False
