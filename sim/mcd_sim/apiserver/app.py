"""Request routing and the REST verbs over the store: what each URL and method does.

Transport-free: `App.handle(Request)` returns a `Response`, or a `WatchStream` that the HTTP
layer (`mcd_sim.apiserver.http`) writes out as chunked JSON lines.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mcd_sim.apiserver import discovery, errors, eventsv1, openapi, reviews, tables
from mcd_sim.apiserver.errors import ApiError
from mcd_sim.apiserver.lifecycle import Lifecycle
from mcd_sim.apiserver.objectrules import CR_GROUPS, Obj
from mcd_sim.apiserver.patch import PATCH_TYPES, STRATEGIC, PatchError, apply_patch
from mcd_sim.apiserver.rbac import Access
from mcd_sim.apiserver.resources import ResourceType, lookup, storage_type
from mcd_sim.apiserver.selectors import object_filter
from mcd_sim.apiserver.store import Store, Watcher, WatchEvent

WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: Mapping[str, str]
    headers: Mapping[str, str]  # names in lower case
    body: bytes = b""


@dataclass(frozen=True)
class Target:
    """What a request addresses; `rt` None for discovery and other non-resource paths."""

    verb: str
    rt: ResourceType | None = None
    namespace: str = ""
    name: str = ""
    subresource: str = ""

    def object_ref(self) -> dict[str, str] | None:
        if self.rt is None:
            return None
        ref = {"resource": self.rt.plural}
        if self.namespace:
            ref["namespace"] = self.namespace
        if self.name:
            ref["name"] = self.name
        ref["apiGroup"] = self.rt.group
        ref["apiVersion"] = self.rt.version
        if self.subresource:
            ref["subresource"] = self.subresource
        return ref


@dataclass
class Response:
    code: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class WatchStream:
    """An open watch the HTTP layer streams: `backlog` first, then `watcher.events`."""

    watcher: Watcher
    backlog: list[WatchEvent]
    render: Callable[[WatchEvent], Obj | None]
    bookmark: Callable[[int], Obj] | None
    timeout: float
    start_rv: int
    initial_end: bool = False  # send the bookmark that ends sendInitialEvents after the backlog


def _bool(value: str | None) -> bool:
    return value in ("1", "true", "True")


def _json(body: bytes) -> Any:
    if not body:
        raise errors.bad_request("the request body is empty")
    try:
        return json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise errors.bad_request(f"the request body is not valid JSON: {exc}") from None


class App:
    """The REST semantics. `server_address` goes into /api's serverAddressByClientCIDRs."""

    def __init__(self, store: Store, lifecycle: Lifecycle, *, bookmark_interval: float = 1.0) -> None:
        self.store = store
        self.lifecycle = lifecycle
        self.bookmark_interval = bookmark_interval
        self.server_address = ""
        self.default_watch_timeout = 1800.0
        # the authenticator and authorizer the reviews answer from (`mcd_sim.apiserver.reviews`)
        self.access: Access | None = None

    # --- routing -------------------------------------------------------------------------

    def target(self, method: str, path: str, query: Mapping[str, str]) -> Target:
        """Classify the request (for audit, faults and dispatch); unknown paths get rt None."""
        parts = [p for p in path.split("/") if p]
        verb_of = {"POST": "create", "PUT": "update", "PATCH": "patch"}
        if len(parts) >= 2 and parts[0] == "api":
            group, version, rest = "", parts[1], parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return Target(method.lower())
        namespace = ""
        if (
            len(rest) >= 3
            and rest[0] == "namespaces"
            and not (len(rest) == 3 and rest[2] in ("status", "finalize"))
        ):
            namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            return Target(method.lower())
        rt = lookup(group, version, rest[0]) or reviews.review_type(group, version, rest[0])
        if rt is None:
            return Target(method.lower())
        name = rest[1] if len(rest) >= 2 else ""
        sub = rest[2] if len(rest) == 3 else ""
        if method == "GET":
            verb = "watch" if _bool(query.get("watch")) else ("get" if name else "list")
        elif method == "DELETE":
            verb = "delete" if name else "deletecollection"
        else:
            verb = verb_of.get(method, method.lower())
        return Target(verb, rt, namespace, name, sub)

    def handle(self, req: Request, target: Target) -> Response | WatchStream:
        if target.rt is None:
            return self._non_resource(req)
        rt = target.rt
        if reviews.is_review(rt) and target.verb == "create" and not target.name:
            return Response(*reviews.answer(self.access, rt, req.body))
        if target.subresource and not (
            (target.subresource == "status" and rt.status)
            or (target.subresource == "eviction" and rt.plural == "pods" and rt.group == "")
        ):
            raise errors.path_not_found()
        if rt.namespaced is False and target.namespace:
            raise errors.path_not_found()
        if target.verb not in rt.verbs and target.verb not in ("create", "update", "patch", "get"):
            raise errors.method_not_allowed()
        dispatch: dict[str, Callable[[Request, Target], Response | WatchStream]] = {
            "get": self._get,
            "list": self._list,
            "watch": self._watch,
            "create": self._create,
            "update": self._update,
            "patch": self._patch,
            "delete": self._delete,
            "deletecollection": self._delete_collection,
        }
        handler = dispatch.get(target.verb)
        if handler is None:
            raise errors.method_not_allowed()
        return handler(req, target)

    def _non_resource(self, req: Request) -> Response:
        if req.method != "GET":
            raise errors.method_not_allowed()
        parts = [p for p in req.path.split("/") if p]
        doc: Any = None
        if parts == ["version"]:
            doc = discovery.version()
        elif parts in (["healthz"], ["readyz"], ["livez"]):
            return Response(200, "ok", {"Content-Type": "text/plain; charset=utf-8"})
        elif parts == ["api"]:
            doc = discovery.core_versions(self.server_address)
        elif parts == ["apis"]:
            doc = discovery.group_list()
        elif len(parts) == 2 and parts[0] == "api":
            doc = discovery.resource_list("", parts[1])
        elif len(parts) == 2 and parts[0] == "apis":
            doc = discovery.group(parts[1])
        elif len(parts) == 3 and parts[0] == "apis":
            doc = discovery.resource_list(parts[1], parts[2])
        elif parts and parts[0] == "openapi":
            doc = openapi.document(parts[1:], req.query)
        if doc is None:
            raise errors.path_not_found()
        return Response(200, doc)

    # --- helpers -------------------------------------------------------------------------

    def _out(self, rt: ResourceType, obj: Obj) -> Obj:
        return eventsv1.to_v1(obj) if rt.view_of else obj

    def _in(self, rt: ResourceType, obj: Obj) -> Obj:
        return eventsv1.to_core(obj) if rt.view_of else obj

    def _filter(self, rt: ResourceType, query: Mapping[str, str]) -> Callable[[Obj], bool]:
        fields = query.get("fieldSelector")
        supported = storage_type(rt).field_labels
        if rt.view_of and fields:
            fields = eventsv1.selector_to_core(fields)
        return object_filter(query.get("labelSelector"), fields, supported)

    def _wants_table(self, req: Request) -> bool:
        return "as=Table" in req.headers.get("accept", "")

    def _check_body(self, rt: ResourceType, body: Any, target: Target) -> Obj:
        if not isinstance(body, dict):
            raise errors.bad_request("the request body must be a JSON object")
        if target.subresource == "eviction":
            return body
        api_version, kind = body.get("apiVersion"), body.get("kind")
        if api_version not in (None, rt.api_version) or kind not in (None, rt.kind):
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected API version "
                f"({rt.api_version})"
                if api_version != rt.api_version
                else f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})"
            )
        meta = body.get("metadata")
        if meta is not None and not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        ns = (meta or {}).get("namespace")
        if rt.namespaced and ns and ns != target.namespace:
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        if rt.kind == "Event" and rt.api_version == "v1":
            _check_event_namespace(body, target.namespace)
        return body

    # --- verbs ---------------------------------------------------------------------------

    def _get(self, req: Request, t: Target) -> Response:
        assert t.rt is not None
        if not t.rt.view_of and not self._wants_table(req):
            # only encoded: the stored object as it is (`Store.peek`)
            return Response(200, self.store.peek(t.rt, t.namespace, t.name))
        obj = self._out(t.rt, self.store.get(storage_type(t.rt), t.namespace, t.name))
        if self._wants_table(req):
            return Response(
                200,
                tables.table(
                    t.rt, [obj], self.store.clock(), include_object=req.query.get("includeObject", "Metadata")
                ),
            )
        return Response(200, obj)

    def _list(self, req: Request, t: Target) -> Response:
        assert t.rt is not None
        items, rv = self.store.select(storage_type(t.rt), t.namespace or None, self._filter(t.rt, req.query))
        items = [self._out(t.rt, o) for o in items]
        if self._wants_table(req):
            return Response(
                200,
                tables.table(
                    t.rt,
                    items,
                    self.store.clock(),
                    resource_version=str(rv),
                    include_object=req.query.get("includeObject", "Metadata"),
                ),
            )
        return Response(
            200,
            {
                "kind": t.rt.list_kind,
                "apiVersion": t.rt.api_version,
                "metadata": {"resourceVersion": str(rv)},
                "items": items,
            },
        )

    def _watch(self, req: Request, t: Target) -> WatchStream:
        rt = t.rt
        assert rt is not None
        predicate = self._filter(rt, req.query)
        if t.name:  # a watch on one object, as the legacy /watch/... paths and informers by name
            name, inner = t.name, predicate
            predicate = lambda o: o["metadata"]["name"] == name and inner(o)  # noqa: E731
        raw_rv = req.query.get("resourceVersion", "")
        send_initial = _bool(req.query.get("sendInitialEvents"))
        since = None if raw_rv in ("", "0") or send_initial else self._rv(raw_rv)
        watcher, backlog = self.store.watch(storage_type(rt), t.namespace or None, since)
        table = self._wants_table(req)
        include = req.query.get("includeObject", "Metadata")
        clock = self.store.clock

        def render(event: WatchEvent) -> Obj | None:
            new_ok = predicate(event.obj)
            old_ok = event.old is not None and event.type != "ADDED" and predicate(event.old)
            if event.type == "DELETED":
                kind = "DELETED" if new_ok else None
            elif new_ok:
                kind = "MODIFIED" if old_ok else "ADDED"
            else:
                kind = "DELETED" if old_ok else None
            if kind is None:
                return None
            obj = self._out(rt, event.obj)
            if table:
                obj = tables.table(rt, [obj], clock(), include_object=include, headers=False)
            return {"type": kind, "object": obj}

        bookmark = None
        if _bool(req.query.get("allowWatchBookmarks")) or send_initial:

            def bookmark(rv: int) -> Obj:
                return {
                    "type": "BOOKMARK",
                    "object": {
                        "kind": rt.kind,
                        "apiVersion": rt.api_version,
                        "metadata": {"resourceVersion": str(rv)},
                    },
                }

        timeout = float(req.query.get("timeoutSeconds") or self.default_watch_timeout)
        start_rv = since if since is not None else self.store.resource_version
        if since is None and backlog:
            start_rv = max(start_rv, *(e.rv for e in backlog))
        return WatchStream(watcher, backlog, render, bookmark, timeout, start_rv, initial_end=send_initial)

    @staticmethod
    def _rv(raw: str) -> int:
        try:
            return int(raw)
        except ValueError:
            raise errors.bad_request(f"invalid resource version: {raw}") from None

    def _create(self, req: Request, t: Target) -> Response:
        rt = t.rt
        assert rt is not None
        if t.subresource == "eviction":
            body = _json(req.body)
            if not isinstance(body, dict):
                raise errors.bad_request("the request body must be an Eviction")
            if (body.get("metadata") or {}).get("name") not in (None, t.name):
                raise errors.bad_request("name in URL does not match name in Eviction object")
            return Response(201, self.lifecycle.evict(t.namespace, t.name, body))
        if t.name:
            raise errors.method_not_allowed()
        body = self._check_body(rt, _json(req.body), t)
        obj = self.store.create(storage_type(rt), t.namespace, self._in(rt, body))
        return Response(201, self._out(rt, obj))

    def _update(self, req: Request, t: Target) -> Response:
        rt = t.rt
        assert rt is not None
        if not t.name:
            raise errors.method_not_allowed()
        body = self._check_body(rt, _json(req.body), t)
        if rt.group in CR_GROUPS and not (body.get("metadata") or {}).get("resourceVersion"):
            # a custom resource's strategy takes no unconditional update (built-in types do);
            # kube-apiserver reads the object first, so a missing one is still 404
            self.store.get(storage_type(rt), t.namespace, t.name)
            cause = ("metadata.resourceVersion", "Invalid value: 0x0: must be specified for an update")
            raise errors.invalid(rt.plural, rt.group, t.name, [cause])
        obj = self.store.update(
            storage_type(rt), t.namespace, t.name, self._in(rt, body), subresource=t.subresource
        )
        return Response(200, self._out(rt, obj))

    def _patch(self, req: Request, t: Target) -> Response:
        rt = t.rt
        assert rt is not None
        if not t.name:
            raise errors.method_not_allowed()
        content_type = req.headers.get("content-type", "").split(";")[0].strip()
        # custom resources take no strategic merge patch: their schemas carry no merge keys
        accepted = tuple(t for t in PATCH_TYPES if t != STRATEGIC or rt.group not in CR_GROUPS)
        if content_type not in accepted:
            raise errors.unsupported_media_type(accepted)
        patch_doc = _json(req.body)

        def change(current: Obj) -> Obj:
            try:
                patched = apply_patch(content_type, self._out(rt, current), patch_doc)
            except PatchError as exc:
                raise ApiError(422, "Invalid", str(exc)) from None
            return self._in(rt, patched)

        obj = self.store.mutate(storage_type(rt), t.namespace, t.name, change, subresource=t.subresource)
        return Response(200, self._out(rt, obj))

    def _delete_options(self, req: Request) -> Obj:
        options: Obj = {}
        if req.body:
            parsed = _json(req.body)
            if isinstance(parsed, dict):
                options = parsed
        if "gracePeriodSeconds" in req.query:
            options["gracePeriodSeconds"] = self._rv(req.query["gracePeriodSeconds"])
        return options

    def _delete(self, req: Request, t: Target) -> Response:
        rt = t.rt
        assert rt is not None
        if t.subresource:
            raise errors.method_not_allowed()
        options = self._delete_options(req)
        pre = options.get("preconditions") or {}
        obj, gone = self.store.delete(
            storage_type(rt),
            t.namespace,
            t.name,
            grace_seconds=options.get("gracePeriodSeconds"),
            precondition_uid=pre.get("uid"),
            precondition_rv=pre.get("resourceVersion"),
        )
        if gone and rt.group not in CR_GROUPS and rt.kind != "Pod":
            return Response(
                200,
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Success",
                    "details": {"name": t.name, "kind": rt.plural, "uid": obj["metadata"]["uid"]},
                },
            )
        return Response(200, self._out(rt, obj))

    def _delete_collection(self, req: Request, t: Target) -> Response:
        rt = t.rt
        assert rt is not None
        items, _ = self.store.select(storage_type(rt), t.namespace or None, self._filter(rt, req.query))
        options = self._delete_options(req)
        for obj in items:
            meta = obj["metadata"]
            try:
                self.store.delete(
                    storage_type(rt),
                    meta.get("namespace", ""),
                    meta["name"],
                    grace_seconds=options.get("gracePeriodSeconds"),
                )
            except ApiError as exc:
                if exc.code != 404:
                    raise
        _, rv = self.store.select(storage_type(rt), None, lambda _o: False)
        return Response(
            200,
            {
                "kind": rt.list_kind,
                "apiVersion": rt.api_version,
                "metadata": {"resourceVersion": str(rv)},
                "items": [],
            },
        )


def _check_event_namespace(body: Obj, namespace: str) -> None:
    """kube-apiserver's rule for a core/v1 Event: its involved object's namespace is its own, and an
    Event about a cluster-scoped object (no namespace) lives only in `default`."""
    involved = body.get("involvedObject")
    ns = str((involved if isinstance(involved, dict) else {}).get("namespace") or "")
    if (ns and ns != namespace) or (not ns and namespace not in ("", "default")):
        name = str((body.get("metadata") or {}).get("name", ""))
        cause = ("involvedObject.namespace", f'Invalid value: "{ns}": does not match event.namespace')
        raise errors.invalid("Event", "", name, [cause])
