"""The drain's rules, shared by the agent's built-in drainer and the pool controller's drain
controller: which pods a drain evicts, which budgets block it, how its timeouts are worded. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mcd.config.selector import selects

MIRROR_POD = "kubernetes.io/config.mirror"
# pods marked critical the legacy way: a drain leaves them on the node, as the design asks
CRITICAL_POD = "scheduler.alpha.kubernetes.io/critical-pod"


def duration_text(seconds: float) -> str:
    """A timeout as upstream words its hour and ten minutes ("1 hour", "10 minutes"), for any
    value the flags give. Pure."""
    for unit, size in (("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            n = int(seconds // size)
            return f"{n} {unit}" + ("s" if n != 1 else "")
    return f"{seconds:g} second" + ("s" if seconds != 1 else "")


def blocking_pdbs(pdbs: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]]) -> list[str]:
    """`namespace/name` of every budget that allows 0 disruptions and selects a pod to evict. Pure."""
    found: list[str] = []
    for pdb in pdbs:
        meta = pdb.get("metadata") or {}
        status = pdb.get("status") or {}
        if int(status.get("disruptionsAllowed", 0) or 0) > 0:
            continue
        selector = (pdb.get("spec") or {}).get("selector")
        if selector is None:
            continue
        ns = meta.get("namespace", "")
        for pod in pods:
            pmeta = pod.get("metadata") or {}
            if pmeta.get("namespace") == ns and selects(selector, pmeta.get("labels") or {}):
                found.append(f"{ns}/{meta.get('name', '')}")
                break
    return sorted(found)


def pods_to_evict(
    pods: Sequence[Mapping[str, Any]], own_pod: tuple[str, str] | None
) -> list[Mapping[str, Any]]:
    """The pods a drain evicts: not DaemonSet pods, not mirror (static) pods, not pods annotated
    critical, not the daemon's own. Pure."""
    out = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        if own_pod is not None and (meta.get("namespace"), meta.get("name")) == own_pod:
            continue
        annotations = meta.get("annotations") or {}
        if MIRROR_POD in annotations or CRITICAL_POD in annotations:
            continue
        if any(
            o.get("kind") == "DaemonSet" and o.get("controller") for o in meta.get("ownerReferences") or []
        ):
            continue
        out.append(pod)
    return out
