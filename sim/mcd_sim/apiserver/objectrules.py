"""What kube-apiserver checks, fixes and stamps on one object, apart from storing it.

The store (store.py) owns resourceVersions, locking and watch fan-out; these rules only look at
one object at a time: the name and metadata validation, what a write may not change, what moves
metadata.generation and how long a deleted pod is given to stop.
"""

from __future__ import annotations

import copy
import re
from datetime import UTC, datetime
from typing import Any

from mcd_sim.apiserver import errors
from mcd_sim.apiserver.resources import ResourceType

Obj = dict[str, Any]

# a custom resource of these groups has its status written through /status only
CR_GROUPS = ("machineconfiguration.openshift.io", "operator.openshift.io")

# what a write through the main resource cannot change: the server owns these
_FIXED_METADATA = (
    "name",
    "namespace",
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "resourceVersion",
)

_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_SUBDOMAIN_RULE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


def rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def validate_metadata(rt: ResourceType, name: str, meta: Obj) -> None:
    """What kube-apiserver checks on every object: a DNS-1123 name, string label and annotation values."""
    causes: list[tuple[str, str]] = []
    if len(name) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(name):
        causes.append(("metadata.name", f'Invalid value: "{name}": {_SUBDOMAIN_RULE}'))
    for part in ("labels", "annotations"):
        values = meta.get(part)
        if values is None:
            continue
        if not isinstance(values, dict):
            causes.append((f"metadata.{part}", "Invalid value: must be a map of strings"))
            continue
        for key, value in values.items():
            if not isinstance(value, str):
                causes.append((f"metadata.{part}", f"Invalid value: {key!r}: must be a string"))
    if causes:
        raise errors.invalid(rt.kind, rt.group, name, causes)


def spec_part(obj: Obj, rt: ResourceType) -> Obj:
    """What moves metadata.generation: everything but metadata (and status when a subresource)."""
    skip = {"metadata", "kind", "apiVersion"} | ({"status"} if rt.status else set())
    return {k: v for k, v in obj.items() if k not in skip}


def merge_main(rt: ResourceType, current: Obj, new: Obj) -> Obj:
    """A write through the main resource: `new`, with the server-owned metadata of `current` and,
    when status is a subresource, `current`'s status."""
    result = copy.deepcopy(new)
    meta = result.setdefault("metadata", {})
    old_meta = current["metadata"]
    for fixed in _FIXED_METADATA:
        if fixed in old_meta:
            meta[fixed] = old_meta[fixed]
        else:
            meta.pop(fixed, None)
    result["apiVersion"], result["kind"] = rt.api_version, rt.kind
    if rt.status:
        if "status" in current:
            result["status"] = current["status"]
        else:
            result.pop("status", None)
    return result


def termination_grace(rt: ResourceType, obj: Obj, requested: int | None) -> int:
    """How long a deleted object stays terminating before it goes."""
    if rt.kind != "Pod" or not (obj.get("spec") or {}).get("nodeName"):
        return 0  # only a pod on a node needs the kubelet to stop it first
    if requested is not None:
        return max(0, requested)
    value = (obj.get("spec") or {}).get("terminationGracePeriodSeconds")
    return 30 if value is None else max(0, int(value))
