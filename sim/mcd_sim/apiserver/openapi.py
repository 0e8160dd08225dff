"""OpenAPI v3 documents: enough for kubectl to see that every resource accepts the
`fieldValidation` query parameter, so `kubectl create -f` validates on the server instead of
downloading schemas. Schemas are open objects (the stand-in does not validate fields)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from functools import cache
from typing import Any

from mcd_sim.apiserver.resources import RESOURCES, ResourceType

QUERY_PARAMS = ("fieldValidation", "fieldManager", "dryRun", "pretty")


def _gv_path(rt: ResourceType) -> str:
    return f"apis/{rt.group}/{rt.version}" if rt.group else f"api/{rt.version}"


def _gvk(rt: ResourceType) -> dict[str, str]:
    return {"group": rt.group, "version": rt.version, "kind": rt.kind}


def _schema_name(rt: ResourceType) -> str:
    group = ".".join(reversed(rt.group.split("."))) if rt.group else "io.k8s.api.core"
    return f"{group}.{rt.version}.{rt.kind}"


def _operation(rt: ResourceType, action: str, *, params: bool) -> dict[str, Any]:
    op: dict[str, Any] = {
        "operationId": f"{action}{rt.kind}",
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": _gvk(rt),
        "responses": {
            "200": {
                "description": "OK",
                "content": {
                    "application/json": {"schema": {"$ref": f"#/components/schemas/{_schema_name(rt)}"}}
                },
            }
        },
    }
    if params:
        op["parameters"] = [
            {"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
            for name in QUERY_PARAMS
        ]
    return op


def _paths(rt: ResourceType) -> dict[str, Any]:
    scope = "/namespaces/{namespace}" if rt.namespaced else ""
    base = f"/{_gv_path(rt)}{scope}/{rt.plural}"
    paths: dict[str, Any] = {
        base: {"get": _operation(rt, "list", params=False), "post": _operation(rt, "post", params=True)},
        f"{base}/{{name}}": {
            "get": _operation(rt, "get", params=False),
            "put": _operation(rt, "put", params=True),
            "patch": _operation(rt, "patch", params=True),
            "delete": _operation(rt, "delete", params=False),
        },
    }
    if rt.status:
        paths[f"{base}/{{name}}/status"] = {
            "get": _operation(rt, "get", params=False),
            "put": _operation(rt, "put", params=True),
            "patch": _operation(rt, "patch", params=True),
        }
    return paths


def _schema(rt: ResourceType) -> dict[str, Any]:
    open_object = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {
        "type": "object",
        "x-kubernetes-group-version-kind": [_gvk(rt)],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": open_object,
            "spec": open_object,
            "status": open_object,
        },
        "x-kubernetes-preserve-unknown-fields": True,
    }


@cache
def _group_version_doc(gv_path: str) -> str:
    types = [rt for rt in RESOURCES if _gv_path(rt) == gv_path and not rt.view_of]
    views = [rt for rt in RESOURCES if _gv_path(rt) == gv_path and rt.view_of]
    if not types and not views:
        return ""
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    for rt in types + views:
        paths.update(_paths(rt))
        schemas[_schema_name(rt)] = _schema(rt)
    doc = {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.31.6"},
        "paths": paths,
        "components": {"schemas": schemas},
    }
    return json.dumps(doc, separators=(",", ":"))


def _root() -> dict[str, Any]:
    paths = {}
    for gv in sorted({_gv_path(rt) for rt in RESOURCES}):
        digest = hashlib.sha512(_group_version_doc(gv).encode()).hexdigest()[:128].upper()
        paths[gv] = {"serverRelativeURL": f"/openapi/v3/{gv}?hash={digest}"}
    return {"paths": paths}


def document(parts: list[str], query: Mapping[str, str]) -> Any:
    """The document at /openapi/<parts>, or None (404: kubectl then falls back, as for an old server)."""
    del query  # the hash only busts client caches; every version of a document is the current one
    if parts == ["v3"]:
        return _root()
    if len(parts) >= 3 and parts[0] == "v3":
        text = _group_version_doc("/".join(parts[1:]))
        return json.loads(text) if text else None
    return None
