"""What the pool controller reads, from informers instead of a list per pass.

`Caches` holds an informer (`mcd.kube.informer`) of the pools, MachineConfigs, Nodes,
MachineConfigNodes and the ControllerConfig, and, for each node being drained, one of the pods
bound to it (`spec.nodeName`, started when its drain is first looked at, stopped when the drain
is over). Each change is told to `changed(resource, key, obj)`, which queues work; the syncs read
the caches through `Reads` and never list. A write's answer goes into the cache at once
(`wrote`): the next sync must not count a node it just pointed at a config as still available
because the watch has not brought that change yet. `Live` reads the API server instead (`--once`
and the syncs used alone in tests).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

from mcd.kube.client import KubeClient
from mcd.kube.errors import ApiError
from mcd.kube.informer import Informer, key_of

Obj = dict[str, Any]
Changed = Callable[[str, str, Obj | None], None]

WATCHED = ("machineconfigpools", "machineconfigs", "nodes", "machineconfignodes", "controllerconfigs")
# a collection a cluster may not serve (no MachineConfigNode CRD, no operator): looked for again after
ABSENT_RETRY_SECONDS = 60.0
# a draining node's pods are watched for this long at a time: a watch that outlived its drain
# ends within it (its connection is then given back)
POD_WATCH_SECONDS = 30
# how long a sync waits for the first list of a draining node's pods
POD_LIST_WAIT = 10.0


class Reads(Protocol):
    def list_all(self, resource: str) -> list[Obj]: ...

    def list_pods_on_node(self, node: str) -> list[Obj]: ...

    def wrote(self, resource: str, obj: Obj) -> None: ...


class Live:
    """`Reads` from the API server: a list each time."""

    def __init__(self, api: KubeClient) -> None:
        self.api = api

    def list_all(self, resource: str) -> list[Obj]:
        return self.api.list_all(resource)

    def list_pods_on_node(self, node: str) -> list[Obj]:
        return self.api.list_pods_on_node(node)

    def wrote(self, resource: str, obj: Obj) -> None:
        pass


def _newer_or_unknown(new: Obj, old: Obj | None) -> bool:
    """False only when both resourceVersions are numbers and `new`'s is smaller: kube-apiserver's
    (etcd's) and the stand-in's are, though clients may not rely on it in general, so anything
    else is taken as newer."""
    if old is None:
        return True
    a = str((new.get("metadata") or {}).get("resourceVersion", ""))
    b = str((old.get("metadata") or {}).get("resourceVersion", ""))
    return not (a.isdigit() and b.isdigit() and int(a) < int(b))


class WriteThroughInformer(Informer):
    """An informer whose store also takes the objects the controller wrote, and keeps a newer
    one against an older event still on its way."""

    def put(self, obj: Obj) -> None:
        key = key_of(obj)
        with self._lock:
            if _newer_or_unknown(obj, self._store.get(key)):
                self._store[key] = obj

    def _event(self, etype: str, obj: Obj, text: bytes | None) -> None:
        if etype == "MODIFIED" and not _newer_or_unknown(obj, self.get(key_of(obj))):
            return  # older than what this controller wrote since
        super()._event(etype, obj, text)


class Caches:
    """The informers; `Reads` over them once `start`ed (before that, `prime` fills them by one
    list each, for a pass without watches)."""

    def __init__(self, api: KubeClient, changed: Changed) -> None:
        self.api, self.changed = api, changed
        self.informers = {r: self._informer(r) for r in WATCHED}
        self._pods: dict[str, Informer] = {}
        self._lock = threading.Lock()
        self.watching = False

    def _informer(self, resource: str) -> WriteThroughInformer:
        absent = (
            (lambda: ABSENT_RETRY_SECONDS)
            if resource in ("machineconfignodes", "controllerconfigs")
            else None
        )

        def changed(key: str, obj: Obj | None) -> None:
            self.changed(resource, key, obj)

        return WriteThroughInformer(self.api, resource, changed=changed, absent=absent)

    def start(self) -> None:
        self.watching = True
        for informer in self.informers.values():
            informer.start()

    def synced(self) -> bool:
        return all(i.synced.is_set() for i in self.informers.values())

    def stop(self) -> None:
        for informer in [*self.informers.values(), *self._pods.values()]:
            informer.stop()

    def prime(self) -> None:
        """One list of each collection into the caches (a collection not served is empty)."""
        for resource, informer in self.informers.items():
            try:
                informer.list_now()
            except ApiError as exc:
                if exc.status != 404 or resource not in ("machineconfignodes", "controllerconfigs"):
                    raise

    def names(self, resource: str) -> list[str]:
        return [key_of(o) for o in self.informers[resource].items()]

    def get(self, resource: str, key: str) -> Obj | None:
        return self.informers[resource].get(key)

    # -- Reads

    def list_all(self, resource: str) -> list[Obj]:
        return self.informers[resource].items()

    def list_pods_on_node(self, node: str) -> list[Obj]:
        """The node's pods from its own informer (started on first use); a live list when not
        watching."""
        if not self.watching:
            return self.api.list_pods_on_node(node)
        with self._lock:
            informer = self._pods.get(node)
            if informer is None:
                informer = Informer(
                    self.api,
                    "pods",
                    field_selector=f"spec.nodeName={node}",
                    changed=lambda _k, _o: self.changed("pods", node, None),
                    watch_seconds=POD_WATCH_SECONDS,
                )
                self._pods[node] = informer
                informer.start()
        if not informer.synced.wait(POD_LIST_WAIT):
            raise ApiError(0, f"the pods of node {node} are not listed yet")
        return informer.items()

    def drop_pods(self, node: str) -> None:
        """The node's drain is over: its pods are no longer watched."""
        with self._lock:
            informer = self._pods.pop(node, None)
        if informer is not None:
            informer.stop()

    def wrote(self, resource: str, obj: Obj) -> None:
        informer = self.informers.get(resource)
        if informer is not None:
            informer.put(obj)
