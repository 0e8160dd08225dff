"""Discovery documents kubectl reads before anything else: /version, /api, /apis and each
group/version's resource list (the legacy, unaggregated form kubectl falls back to)."""

from __future__ import annotations

import hashlib
from typing import Any

from mcd_sim.apiserver.resources import RESOURCES, ResourceType, groups, in_group_version

# The Kubernetes release OpenShift 4.18 ships; within kubectl's supported skew of this machine's client.
KUBE_VERSION = {
    "major": "1",
    "minor": "31",
    "gitVersion": "v1.31.6",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.22.12",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def version() -> dict[str, Any]:
    return dict(KUBE_VERSION)


def core_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def _group(name: str) -> dict[str, Any]:
    versions = sorted({rt.version for rt in RESOURCES if rt.group == name})
    entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": entries, "preferredVersion": entries[0]}


def group_list() -> dict[str, Any]:
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_group(g) for g in groups() if g]}


def group(name: str) -> dict[str, Any] | None:
    if not name or name not in groups():
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(name)}


def _storage_hash(rt: ResourceType) -> str:
    # kubectl only compares these for change; any stable value per resource does
    return hashlib.sha256(f"{rt.api_version}/{rt.kind}".encode()).hexdigest()[:11]


def resource_list(group_name: str, version_name: str) -> dict[str, Any] | None:
    types = in_group_version(group_name, version_name)
    if not types:
        return None
    resources: list[dict[str, Any]] = []
    for rt in types:
        entry: dict[str, Any] = {
            "name": rt.plural,
            "singularName": rt.singular,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": list(rt.verbs),
        }
        if rt.short_names:
            entry["shortNames"] = list(rt.short_names)
        if rt.categories:
            entry["categories"] = list(rt.categories)
        entry["storageVersionHash"] = _storage_hash(rt)
        resources.append(entry)
        if rt.status:
            resources.append(
                {
                    "name": f"{rt.plural}/status",
                    "singularName": "",
                    "namespaced": rt.namespaced,
                    "kind": rt.kind,
                    "verbs": ["get", "patch", "update"],
                }
            )
        if rt.group == "" and rt.plural == "pods":
            resources.append(
                {
                    "name": "pods/eviction",
                    "singularName": "",
                    "namespaced": True,
                    "group": "policy",
                    "version": "v1",
                    "kind": "Eviction",
                    "verbs": ["create"],
                }
            )
    group_version = f"{group_name}/{version_name}" if group_name else version_name
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }
