"""Events on a MachineConfigPool, with upstream's controllers' reasons and components.

As upstream's namespaced recorder does for these cluster-scoped objects, the Events go to the
controller's namespace and name it as the object's (`involvedObject.namespace`): kube-apiserver
refuses an Event whose involved object's namespace differs from its own (422), and an empty one is
accepted only in `default`. Best effort: one that cannot be posted is logged and dropped (the pool's
status carries the same facts), and each is a log line too.
"""

from __future__ import annotations

import datetime
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from mcd.kube.client import KubeClient
from mcd.kube.errors import ApiError

LOG = logging.getLogger(__name__)

NODE_CONTROLLER = "machineconfigcontroller-nodecontroller"
DRAIN_CONTROLLER = "machineconfigcontroller-draincontroller"
POOL = ("MachineConfigPool", "machineconfiguration.openshift.io/v1")
RENDER_CONTROLLER = "machineconfigcontroller-rendercontroller"
DEFAULT_NAMESPACE = "openshift-machine-config-operator"


def pool_event(
    pool: Mapping[str, Any],
    reason: str,
    message: str,
    component: str,
    namespace: str,
    *,
    kind: str = "Normal",
    involved: tuple[str, str] = POOL,
) -> dict[str, Any]:
    """The core/v1 Event upstream's recorder posts about `pool` (or, with `involved` (kind,
    apiVersion), another cluster-scoped object: a Node). Pure but for the clock."""
    meta = pool.get("metadata") or {}
    name = str(meta.get("name", ""))
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.{time.time_ns():x}", "namespace": namespace},
        "involvedObject": {
            "kind": involved[0],
            "name": name,
            "namespace": namespace,
            "uid": str(meta.get("uid", "")),
            "apiVersion": involved[1],
        },
        "reason": reason,
        "message": message,
        "type": kind,
        "source": {"component": component},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
        "reportingComponent": component,
    }


class PoolEvents:
    def __init__(
        self, api: KubeClient, namespace: str = DEFAULT_NAMESPACE, *, fence: Callable[[], None] = lambda: None
    ) -> None:
        self.api, self.namespace, self.fence = api, namespace, fence

    def normal(
        self, reason: str, pool: Mapping[str, Any], message: str, component: str = NODE_CONTROLLER
    ) -> None:
        LOG.info("pool %s: %s: %s", (pool.get("metadata") or {}).get("name", ""), reason, message)
        self._post(pool, reason, message, component, "Normal")

    def warning(
        self, reason: str, pool: Mapping[str, Any], message: str, component: str = NODE_CONTROLLER
    ) -> None:
        LOG.warning("pool %s: %s: %s", (pool.get("metadata") or {}).get("name", ""), reason, message)
        self._post(pool, reason, message, component, "Warning")

    def node_warning(self, reason: str, node: Mapping[str, Any], message: str) -> None:
        """A Warning Event about a Node, as upstream's drain controller posts them."""
        LOG.warning("node %s: %s: %s", (node.get("metadata") or {}).get("name", ""), reason, message)
        self._post(node, reason, message, DRAIN_CONTROLLER, "Warning", involved=("Node", "v1"))

    def _post(
        self,
        obj: Mapping[str, Any],
        reason: str,
        message: str,
        component: str,
        kind: str,
        *,
        involved: tuple[str, str] = POOL,
    ) -> None:
        self.fence()  # not best effort: a replica that no longer leads says nothing either
        try:
            event = pool_event(obj, reason, message, component, self.namespace, kind=kind, involved=involved)
            self.api.create_event(self.namespace, event)
        except ApiError as exc:
            LOG.warning("event %s not posted: %s", reason, exc)
