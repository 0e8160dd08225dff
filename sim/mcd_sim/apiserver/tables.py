"""Server-side printing: the `meta.k8s.io/v1` Table kubectl asks for to print `get` output.

Columns and cell formats follow kube-apiserver's printers for the built-in kinds and the
additionalPrinterColumns of the OpenShift CRDs, so `kubectl get` prints what it prints on a
real cluster. No I/O: the clock is an argument.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from mcd_sim.apiserver.resources import ResourceType

Obj = dict[str, Any]
Column = tuple[str, str, int, Callable[[Obj, float], Any]]  # (name, type, priority, cell)


def parse_time(value: Any) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def human_duration(seconds: float) -> str:
    """kubectl's compact age: 45s, 3m20s, 25m, 5h10m, 3d4h, 400d, 2y30d."""
    s = round(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = hours // 24 % 365
        return f"{hours // 24 // 365}y{days}d" if days else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def _age_of(value: Any, now: float) -> str:
    ts = parse_time(value)
    return "<unknown>" if ts is None else human_duration(now - ts)


def _age(obj: Obj, now: float) -> str:
    return _age_of(obj["metadata"].get("creationTimestamp"), now)


def _path(obj: Obj, *keys: str) -> Any:
    cur: Any = obj
    for k in keys:
        cur = cur.get(k) if isinstance(cur, dict) else None
    return cur


def _or_none(value: Any) -> Any:
    return "<none>" if value in (None, "") else value


def _node_status(obj: Obj, _now: float) -> str:
    conditions = _path(obj, "status", "conditions") or []
    ready = next((c for c in conditions if c.get("type") == "Ready"), None)
    parts = ["Unknown" if ready is None else "Ready" if ready.get("status") == "True" else "NotReady"]
    if _path(obj, "spec", "unschedulable"):
        parts.append("SchedulingDisabled")
    return ",".join(parts)


def _node_roles(obj: Obj, _now: float) -> str:
    labels = obj["metadata"].get("labels") or {}
    roles = sorted(
        k.removeprefix("node-role.kubernetes.io/") for k in labels if k.startswith("node-role.kubernetes.io/")
    )
    if "kubernetes.io/role" in labels:
        roles = sorted({*roles, labels["kubernetes.io/role"]})
    return ",".join(r for r in roles if r) or "<none>"


def _node_address(kind: str) -> Callable[[Obj, float], str]:
    def cell(obj: Obj, _now: float) -> str:
        for addr in _path(obj, "status", "addresses") or []:
            if addr.get("type") == kind:
                return str(addr.get("address"))
        return "<none>"

    return cell


def _pod_ready(obj: Obj, _now: float) -> str:
    total = len(_path(obj, "spec", "containers") or [])
    ready = sum(1 for c in _path(obj, "status", "containerStatuses") or [] if c.get("ready"))
    return f"{ready}/{total}"


def _pod_status(obj: Obj, _now: float) -> str:
    reason = _path(obj, "status", "reason") or _path(obj, "status", "phase") or "Pending"
    for c in _path(obj, "status", "containerStatuses") or []:
        waiting = _path(c, "state", "waiting", "reason")
        terminated = _path(c, "state", "terminated", "reason")
        if waiting or terminated:
            reason = waiting or terminated
    if obj["metadata"].get("deletionTimestamp"):
        reason = "Terminating"
    return str(reason)


def _pod_restarts(obj: Obj, _now: float) -> str:
    return str(sum(int(c.get("restartCount") or 0) for c in _path(obj, "status", "containerStatuses") or []))


def _event_last_seen(obj: Obj, now: float) -> str:
    last = obj.get("lastTimestamp") or obj.get("eventTime") or obj["metadata"].get("creationTimestamp")
    first = obj.get("firstTimestamp") or obj.get("eventTime") or obj["metadata"].get("creationTimestamp")
    count = int(obj.get("count") or 1)
    if _path(obj, "series", "count"):
        count = int(obj["series"]["count"])
        last = _path(obj, "series", "lastObservedTime") or last
    if count > 1:
        return f"{_age_of(last, now)} (x{count} over {_age_of(first, now)})"
    return _age_of(last, now)


def _event_object(obj: Obj, _now: float) -> str:
    involved = obj.get("involvedObject") or {}
    return f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}"


def _event_source(obj: Obj, _now: float) -> str:
    source = obj.get("source") or {}
    text = str(source.get("component") or obj.get("reportingComponent") or "")
    if source.get("host"):
        text += f", {source['host']}"
    return text


def _cond(kind: str) -> Callable[[Obj, float], str]:
    def cell(obj: Obj, _now: float) -> str:
        for c in _path(obj, "status", "conditions") or []:
            if c.get("type") == kind:
                return str(c.get("status", ""))
        return ""

    return cell


def _field(*keys: str, default: Any = "") -> Callable[[Obj, float], Any]:
    return lambda obj, _now: _or_default(_path(obj, *keys), default)


def _or_default(value: Any, default: Any) -> Any:
    return default if value is None else value


def _annotation(key: str) -> Callable[[Obj, float], str]:
    return lambda obj, _now: str((obj["metadata"].get("annotations") or {}).get(key, ""))


def _pdb(key: str) -> Callable[[Obj, float], Any]:
    return lambda obj, _now: "N/A" if _path(obj, "spec", key) is None else obj["spec"][key]


def _name(obj: Obj, _now: float) -> str:
    return str(obj["metadata"]["name"])


NAME: Column = ("Name", "string", 0, _name)
AGE: Column = ("Age", "date", 0, _age)

COLUMNS: dict[str, list[Column]] = {
    "Node": [
        NAME,
        ("Status", "string", 0, _node_status),
        ("Roles", "string", 0, _node_roles),
        AGE,
        ("Version", "string", 0, _field("status", "nodeInfo", "kubeletVersion")),
        ("Internal-IP", "string", 1, _node_address("InternalIP")),
        ("External-IP", "string", 1, _node_address("ExternalIP")),
        ("OS-Image", "string", 1, _field("status", "nodeInfo", "osImage", default="<unknown>")),
        ("Kernel-Version", "string", 1, _field("status", "nodeInfo", "kernelVersion", default="<unknown>")),
        (
            "Container-Runtime",
            "string",
            1,
            _field("status", "nodeInfo", "containerRuntimeVersion", default="<unknown>"),
        ),
    ],
    "Pod": [
        NAME,
        ("Ready", "string", 0, _pod_ready),
        ("Status", "string", 0, _pod_status),
        ("Restarts", "string", 0, _pod_restarts),
        AGE,
        ("IP", "string", 1, lambda o, _n: _or_none(_path(o, "status", "podIP"))),
        ("Node", "string", 1, lambda o, _n: _or_none(_path(o, "spec", "nodeName"))),
        ("Nominated Node", "string", 1, lambda o, _n: _or_none(_path(o, "status", "nominatedNodeName"))),
        ("Readiness Gates", "string", 1, lambda _o, _n: "<none>"),
    ],
    "Namespace": [NAME, ("Status", "string", 0, _field("status", "phase")), AGE],
    "Event": [
        ("Last Seen", "string", 0, _event_last_seen),
        ("Type", "string", 0, _field("type")),
        ("Reason", "string", 0, _field("reason")),
        ("Object", "string", 0, _event_object),
        ("Subobject", "string", 1, _field("involvedObject", "fieldPath")),
        ("Source", "string", 1, _event_source),
        ("Message", "string", 0, lambda o, _n: str(o.get("message") or "").strip()),
        ("First Seen", "string", 1, lambda o, n: _age_of(o.get("firstTimestamp") or o.get("eventTime"), n)),
        ("Count", "string", 1, lambda o, _n: str(o.get("count") or 1)),
        ("Name", "string", 1, _name),
    ],
    "DaemonSet": [
        NAME,
        ("Desired", "integer", 0, _field("status", "desiredNumberScheduled", default=0)),
        ("Current", "integer", 0, _field("status", "currentNumberScheduled", default=0)),
        ("Ready", "integer", 0, _field("status", "numberReady", default=0)),
        ("Up-to-date", "integer", 0, _field("status", "updatedNumberScheduled", default=0)),
        ("Available", "integer", 0, _field("status", "numberAvailable", default=0)),
        (
            "Node Selector",
            "string",
            0,
            lambda o, _n: (
                ",".join(
                    f"{k}={v}"
                    for k, v in sorted((_path(o, "spec", "template", "spec", "nodeSelector") or {}).items())
                )
                or "<none>"
            ),
        ),
        AGE,
    ],
    "ReplicaSet": [
        NAME,
        ("Desired", "integer", 0, _field("spec", "replicas", default=1)),
        ("Current", "integer", 0, _field("status", "replicas", default=0)),
        ("Ready", "integer", 0, _field("status", "readyReplicas", default=0)),
        AGE,
    ],
    "PodDisruptionBudget": [
        NAME,
        ("Min Available", "string", 0, _pdb("minAvailable")),
        ("Max Unavailable", "string", 0, _pdb("maxUnavailable")),
        ("Allowed Disruptions", "integer", 0, _field("status", "disruptionsAllowed", default=0)),
        AGE,
    ],
    "MachineConfig": [
        NAME,
        (
            "GeneratedByController",
            "string",
            0,
            _annotation("machineconfiguration.openshift.io/generated-by-controller-version"),
        ),
        ("IgnitionVersion", "string", 0, _field("spec", "config", "ignition", "version")),
        AGE,
    ],
    "MachineConfigPool": [
        NAME,
        ("Config", "string", 0, _field("status", "configuration", "name")),
        ("Updated", "string", 0, _cond("Updated")),
        ("Updating", "string", 0, _cond("Updating")),
        ("Degraded", "string", 0, _cond("Degraded")),
        ("MachineCount", "number", 0, _field("status", "machineCount", default=None)),
        ("ReadyMachineCount", "number", 0, _field("status", "readyMachineCount", default=None)),
        ("UpdatedMachineCount", "number", 0, _field("status", "updatedMachineCount", default=None)),
        ("DegradedMachineCount", "number", 0, _field("status", "degradedMachineCount", default=None)),
        AGE,
    ],
    # the CRD's additionalPrinterColumns (the wide ones at priority 1)
    "MachineConfigNode": [
        NAME,
        ("PoolName", "string", 0, _field("spec", "pool", "name")),
        ("DesiredConfig", "string", 0, _field("spec", "configVersion", "desired")),
        ("CurrentConfig", "string", 0, _field("status", "configVersion", "current")),
        ("Updated", "string", 0, _cond("Updated")),
        AGE,
        ("UpdatePrepared", "string", 1, _cond("UpdatePrepared")),
        ("UpdateExecuted", "string", 1, _cond("UpdateExecuted")),
        ("UpdatePostActionComplete", "string", 1, _cond("UpdatePostActionComplete")),
        ("UpdateComplete", "string", 1, _cond("UpdateComplete")),
        ("Resumed", "string", 1, _cond("Resumed")),
        ("UpdatedFilesAndOS", "string", 1, _cond("AppliedFilesAndOS")),
        ("CordonedNode", "string", 1, _cond("Cordoned")),
        ("DrainedNode", "string", 1, _cond("Drained")),
        ("RebootedNode", "string", 1, _cond("RebootedNode")),
        ("UncordonedNode", "string", 1, _cond("Uncordoned")),
    ],
}


def _columns(rt: ResourceType) -> list[Column]:
    return COLUMNS.get(rt.kind, [NAME, AGE])


def _definition(column: Column) -> dict[str, Any]:
    name, kind, priority, _ = column
    fmt = "name" if name == "Name" else ""
    return {"name": name, "type": kind, "format": fmt, "description": "", "priority": priority}


def _partial(obj: Obj) -> Obj:
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]}


def table(
    rt: ResourceType,
    items: list[Obj],
    now: float,
    *,
    resource_version: str = "",
    include_object: str = "Metadata",
    headers: bool = True,
) -> Obj:
    """A `meta.k8s.io/v1` Table of `items`; `include_object` None, Metadata or Object as in the query."""
    columns = _columns(rt)
    rows = []
    for obj in items:
        row: Obj = {"cells": [cell(obj, now) for _, _, _, cell in columns]}
        if include_object == "Object":
            row["object"] = obj
        elif include_object != "None":
            row["object"] = _partial(obj)
        rows.append(row)
    result: Obj = {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {}}
    if resource_version:
        result["metadata"]["resourceVersion"] = resource_version
    result["columnDefinitions"] = [_definition(c) for c in columns] if headers else []
    result["rows"] = rows
    return result
