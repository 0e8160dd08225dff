"""The object store: resourceVersions, preconditions, generation, status subresources, watch fan-out.

Every write takes one lock, bumps the global resourceVersion (the etcd revision), records a
watch event in a bounded history (older resourceVersions answer 410 Expired) and hands the
event to every open watch. Objects go in and out as deep copies, so no caller shares state
with the store.
"""

from __future__ import annotations

import copy
import queue
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from mcd_sim.apiserver import errors
from mcd_sim.apiserver.objectrules import (
    CR_GROUPS,
    Obj,
    merge_main,
    rfc3339,
    spec_part,
    termination_grace,
    validate_metadata,
)
from mcd_sim.apiserver.resources import RESOURCES, ResourceType, by_kind

ObjKey = tuple[str, str, str]  # (resource key, namespace or "", name)


@dataclass(frozen=True)
class WatchEvent:
    """One change: `obj` after it (before it, for DELETED), `old` before it (None for ADDED)."""

    type: str  # ADDED, MODIFIED, DELETED
    key: str
    rv: int
    obj: Obj
    old: Obj | None


@dataclass(eq=False)
class Watcher:
    """An open watch: events arrive in `events`; None means the store closed it."""

    key: str
    namespace: str | None
    events: queue.SimpleQueue[WatchEvent | None] = field(default_factory=queue.SimpleQueue)

    def wants(self, event: WatchEvent) -> bool:
        if self.key and event.key != self.key:
            return False  # key "" watches every resource
        return self.namespace is None or event.obj["metadata"].get("namespace") == self.namespace


class Store:
    """Thread-safe object store with kube-apiserver's write and watch semantics."""

    def __init__(self, history: int = 4096, clock: Callable[[], float] = time.time) -> None:
        self._lock = threading.RLock()
        self._objects: dict[ObjKey, Obj] = {}
        self._rv = 0
        self._history: deque[WatchEvent] = deque(maxlen=history)
        self._compacted = 0  # resourceVersions <= this are no longer in the history
        self._watchers: set[Watcher] = set()
        self._hooks: list[Callable[[WatchEvent], None]] = []
        self.clock = clock

    # --- reading -------------------------------------------------------------------------

    @property
    def lock(self) -> threading.RLock:
        """The store's lock, for a read-decide-write that must see no other write in between."""
        return self._lock

    @property
    def resource_version(self) -> int:
        with self._lock:
            return self._rv

    def get(self, rt: ResourceType, namespace: str, name: str) -> Obj:
        with self._lock:
            obj = self._objects.get(self._key(rt, namespace, name))
            if obj is None:
                raise errors.not_found(rt.plural, rt.group, name)
            return copy.deepcopy(obj)

    def peek(self, rt: ResourceType, namespace: str, name: str) -> Obj:
        """The stored object itself, not a copy: read-only for the caller. Safe because a write
        stores a new object and never changes the stored one; a GET of a rendered config is
        then one encoding, not a deep copy of thousands of files first."""
        with self._lock:
            obj = self._objects.get(self._key(rt, namespace, name))
            if obj is None:
                raise errors.not_found(rt.plural, rt.group, name)
            return obj

    def find(self, rt: ResourceType, namespace: str, name: str) -> Obj | None:
        try:
            return self.get(rt, namespace, name)
        except errors.ApiError:
            return None

    def select(
        self, rt: ResourceType, namespace: str | None, predicate: Callable[[Obj], bool] | None = None
    ) -> tuple[list[Obj], int]:
        """Matching objects (sorted by namespace and name, as etcd keys sort) and the list resourceVersion."""
        with self._lock:
            items = [
                copy.deepcopy(obj)
                for (key, ns, _), obj in sorted(self._objects.items())
                if key == rt.key
                and (namespace is None or ns == namespace)
                and (predicate is None or predicate(obj))
            ]
            return items, self._rv

    # --- writing -------------------------------------------------------------------------

    def create(self, rt: ResourceType, namespace: str, body: Obj) -> Obj:
        with self._lock:
            obj = copy.deepcopy(body)
            meta = obj.setdefault("metadata", {})
            if not isinstance(meta, dict):
                raise errors.bad_request("metadata must be an object")
            name = meta.get("name") or ""
            if not name and meta.get("generateName"):
                name = self._generate_name(rt, namespace, str(meta["generateName"]))
            if not name:
                raise errors.invalid(
                    rt.kind,
                    rt.group,
                    "",
                    [("metadata.name", "Required value: name or generateName is required")],
                )
            if rt.namespaced:
                if not namespace:
                    raise errors.bad_request(
                        "the namespace of the object does not match the namespace on the request"
                    )
                if self._objects.get(("/namespaces", "", namespace)) is None:
                    raise errors.not_found("namespaces", "", namespace)
            validate_metadata(rt, name, meta)
            key = self._key(rt, namespace, name)
            if key in self._objects:
                raise errors.already_exists(rt.plural, rt.group, name)
            meta["name"] = name
            if rt.namespaced:
                meta["namespace"] = namespace
            else:
                meta.pop("namespace", None)
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = rfc3339(self.clock())
            for transient in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
                meta.pop(transient, None)
            if rt.generation:
                meta["generation"] = 1
            obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind
            if rt.status and rt.group in CR_GROUPS:
                obj.pop("status", None)  # a custom resource's status is written through /status only
            if rt.kind == "Namespace":
                obj.setdefault("spec", {"finalizers": ["kubernetes"]})
                obj["status"] = {"phase": "Active"}
            self._commit("ADDED", key, obj, None)
            return copy.deepcopy(obj)

    def update(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        body: Obj,
        *,
        subresource: str = "",
    ) -> Obj:
        """PUT: replace the object (or only its status); a stale metadata.resourceVersion gives 409."""
        meta = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
        assert isinstance(meta, dict)
        if meta.get("name") not in (None, name):
            raise errors.bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})"
            )
        precondition = meta.get("resourceVersion") or None
        return self.mutate(
            rt,
            namespace,
            name,
            lambda _: copy.deepcopy(body),
            subresource=subresource,
            precondition=precondition,
        )

    def mutate(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        change: Callable[[Obj], Obj],
        *,
        subresource: str = "",
        precondition: str | None = None,
    ) -> Obj:
        """Read-modify-write under the lock: `change(current)` returns the new object (a PATCH's
        result, a PUT's body). metadata.resourceVersion in the result, or `precondition`, must be
        current. Status writes keep everything else; main writes keep status (status subresource)."""
        with self._lock:
            key = self._key(rt, namespace, name)
            current = self._objects.get(key)
            if current is None:
                raise errors.not_found(rt.plural, rt.group, name)
            new = change(copy.deepcopy(current))
            if not isinstance(new, dict):
                raise errors.bad_request("the object must be a JSON object")
            new_meta = new.get("metadata") if isinstance(new.get("metadata"), dict) else {}
            assert isinstance(new_meta, dict)
            wanted_rv = precondition or new_meta.get("resourceVersion") or None
            if wanted_rv is not None and str(wanted_rv) != current["metadata"]["resourceVersion"]:
                raise errors.conflict(rt.plural, rt.group, name)
            if subresource == "status":
                result = copy.deepcopy(current)
                if "status" in new:
                    result["status"] = new["status"]
                else:
                    result.pop("status", None)
            else:
                result = merge_main(rt, current, new)
                validate_metadata(rt, name, result["metadata"])
            if result == current:
                return copy.deepcopy(current)  # kube-apiserver skips no-op writes: same resourceVersion
            if rt.generation and spec_part(result, rt) != spec_part(current, rt):
                result["metadata"]["generation"] = int(current["metadata"].get("generation", 1)) + 1
            done = self._finalize_if_released(rt, key, result, current)
            if not done:
                self._commit("MODIFIED", key, result, current)
            return copy.deepcopy(result)

    def delete(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        *,
        grace_seconds: int | None = None,
        precondition_uid: str | None = None,
        precondition_rv: str | None = None,
    ) -> tuple[Obj, bool]:
        """Delete; returns (object, gone). A pod bound to a node with a grace period, or an
        object with finalizers, only gets deletionTimestamp (gone False)."""
        with self._lock:
            key = self._key(rt, namespace, name)
            current = self._objects.get(key)
            if current is None:
                raise errors.not_found(rt.plural, rt.group, name)
            meta = current["metadata"]
            if precondition_uid is not None and precondition_uid != meta["uid"]:
                raise errors.ApiError(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on {errors.qualified(rt.plural, rt.group)} "{name}": '
                    f"Precondition failed: UID in precondition: {precondition_uid}, UID in object meta: "
                    f"{meta['uid']}",
                    {"name": name, "kind": rt.plural},
                )
            if precondition_rv is not None and precondition_rv != meta["resourceVersion"]:
                raise errors.conflict(rt.plural, rt.group, name)
            grace = termination_grace(rt, current, grace_seconds)
            if grace == 0 and not meta.get("finalizers"):
                return copy.deepcopy(self._remove(key)), True
            if meta.get("deletionTimestamp"):
                return copy.deepcopy(current), False  # already terminating: a second delete changes nothing
            result = copy.deepcopy(current)
            result["metadata"]["deletionTimestamp"] = rfc3339(self.clock() + grace)
            result["metadata"]["deletionGracePeriodSeconds"] = grace
            if rt.generation:
                result["metadata"]["generation"] = int(meta.get("generation", 1)) + 1
            self._commit("MODIFIED", key, result, current)
            return copy.deepcopy(result), False

    def finish_termination(self, rt: ResourceType, namespace: str, name: str, uid: str) -> bool:
        """The kubelet's part: remove a terminating pod once its grace period ended."""
        with self._lock:
            key = self._key(rt, namespace, name)
            current = self._objects.get(key)
            if current is None or current["metadata"]["uid"] != uid or current["metadata"].get("finalizers"):
                return False
            self._remove(key)
            return True

    def put(self, obj: Obj) -> Obj:
        """Create or replace `obj` as it is, status included (tests and seeding; no preconditions)."""
        rt = by_kind(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
        if rt is None:
            raise ValueError(f"unknown kind {obj.get('apiVersion')}/{obj.get('kind')}")
        meta = obj.get("metadata") or {}
        ns = str(meta.get("namespace") or ("default" if rt.namespaced else ""))
        with self._lock:
            key = self._key(rt, ns, str(meta.get("name", "")))
            if key not in self._objects:
                created = self.create(rt, ns, obj)
                if "status" in obj and "status" not in created:
                    return self.mutate(
                        rt,
                        ns,
                        created["metadata"]["name"],
                        lambda c: {**c, "status": obj["status"]},
                        subresource="status",
                    )
                return created

            def replace(current: Obj) -> Obj:
                new = copy.deepcopy(obj)
                new.setdefault("metadata", {})["resourceVersion"] = current["metadata"]["resourceVersion"]
                return new

            result = self.mutate(rt, ns, key[2], replace)
            if "status" in obj and rt.status:
                result = self.mutate(
                    rt, ns, key[2], lambda c: {**c, "status": obj["status"]}, subresource="status"
                )
            return result

    # --- watching ------------------------------------------------------------------------

    def watch(
        self, rt: ResourceType, namespace: str | None, since: int | None
    ) -> tuple[Watcher, list[WatchEvent]]:
        """Open a watch. `since` None: ADDED for every current object, then changes; else the
        changes after that resourceVersion (410 Expired when the history no longer has them)."""
        with self._lock:
            watcher = Watcher(rt.key, namespace)
            if since is None:
                backlog = [
                    WatchEvent(
                        "ADDED", rt.key, int(obj["metadata"]["resourceVersion"]), copy.deepcopy(obj), None
                    )
                    for (key, ns, _), obj in sorted(self._objects.items())
                    if key == rt.key and (namespace is None or ns == namespace)
                ]
            else:
                if since < self._compacted:
                    raise errors.gone(f"too old resource version: {since} ({self._compacted + 1})")
                backlog = [e for e in self._history if e.rv > since and watcher.wants(e)]
            self._watchers.add(watcher)
            return watcher, backlog

    def watch_all(self) -> tuple[Watcher, list[WatchEvent]]:
        """A watch on every resource from now on (to wait for any change)."""
        with self._lock:
            watcher = Watcher("", None)
            self._watchers.add(watcher)
            return watcher, []

    def unwatch(self, watcher: Watcher) -> None:
        with self._lock:
            self._watchers.discard(watcher)

    def watcher_count(self) -> int:
        with self._lock:
            return len(self._watchers)

    def close_watches(self) -> int:
        """End every open watch (server stop, fault injection); returns how many."""
        with self._lock:
            watchers = list(self._watchers)
            self._watchers.clear()
        for w in watchers:
            w.events.put(None)
        return len(watchers)

    def compact(self) -> int:
        """Forget the watch history, as etcd compaction does: older resourceVersions get 410."""
        with self._lock:
            self._history.clear()
            self._compacted = self._rv
            return self._compacted

    def add_hook(self, hook: Callable[[WatchEvent], None]) -> None:
        """Run `hook(event)` after every commit, under the store lock (derived state, e.g. PDB status)."""
        self._hooks.append(hook)

    # --- internals -----------------------------------------------------------------------

    @staticmethod
    def _key(rt: ResourceType, namespace: str, name: str) -> ObjKey:
        return (rt.key, namespace if rt.namespaced else "", name)

    def _generate_name(self, rt: ResourceType, namespace: str, prefix: str) -> str:
        alphabet = "bcdfghjklmnpqrstvwxz2456789"  # kube's: no vowels, no confusable digits
        for _ in range(100):
            suffix = "".join(alphabet[b % len(alphabet)] for b in uuid.uuid4().bytes[:5])
            if self._key(rt, namespace, prefix + suffix) not in self._objects:
                return prefix + suffix
        raise errors.ApiError(500, "InternalError", "could not generate a unique name")

    def _finalize_if_released(self, rt: ResourceType, key: ObjKey, result: Obj, current: Obj) -> bool:
        """An object being deleted goes once its last finalizer is removed (unless a grace period runs)."""
        meta = result["metadata"]
        if not meta.get("deletionTimestamp") or meta.get("finalizers"):
            return False
        if rt.kind == "Pod" and (result.get("spec") or {}).get("nodeName"):
            stamp = str(meta["deletionTimestamp"]).replace("Z", "+00:00")
            if datetime.fromisoformat(stamp).timestamp() > self.clock():
                return False  # the kubelet stand-in removes it when its grace period ends
        self._commit("MODIFIED", key, result, current)
        self._remove(key)
        return True

    def _remove(self, key: ObjKey) -> Obj:
        obj = self._objects[key]
        self._rv += 1
        gone = copy.deepcopy(obj)
        gone["metadata"]["resourceVersion"] = str(self._rv)  # kube reports the deletion's revision
        del self._objects[key]
        self._publish(WatchEvent("DELETED", key[0], self._rv, gone, obj))
        return gone

    def _commit(self, kind: str, key: ObjKey, obj: Obj, old: Obj | None) -> None:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        self._objects[key] = obj
        self._publish(WatchEvent(kind, key[0], self._rv, copy.deepcopy(obj), old))

    def _publish(self, event: WatchEvent) -> None:
        if len(self._history) == self._history.maxlen:
            self._compacted = self._history[0].rv
        self._history.append(event)
        for w in self._watchers:
            if w.wants(event):
                w.events.put(event)
        for hook in self._hooks:
            hook(event)


def resource_for_key(key: str) -> ResourceType:
    return next(rt for rt in RESOURCES if rt.key == key and not rt.view_of)
