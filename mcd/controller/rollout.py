"""Which nodes of a pool move to its rendered config next, and what the pool's status says: pure.

The rules are upstream's node controller's (`pkg/controller/node`): a node is *unavailable* when
it is not ready (Ready not True, DiskPressure or NetworkUnavailable not False, or cordoned), or
when its daemon has not reported Done on its desired config and is not failing on it (a node
that fails its new config is counted apart: it uses up capacity without being unavailable).
`maxUnavailable` (an int, or a percentage of the pool rounded down; at least 1; 1 by default)
bounds them; the candidates are the ready nodes whose desiredConfig is not the pool's, and when
there are more than the capacity left they are taken by zone label, then creation time.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mcd.config.selector import selects as matches

# the node annotations are the agent's, named once (mcd.node.annotations)
from mcd.node.annotations import (
    CURRENT_CONFIG,
    CURRENT_IMAGE,
    DESIRED_CONFIG,
    DESIRED_IMAGE,
    STATE,
)

ZONE_LABEL = "topology.kubernetes.io/zone"
OS_LABEL = "kubernetes.io/os"
MASTER, WORKER = "master", "worker"

Obj = dict[str, Any]


class PoolError(ValueError):
    """A pool whose spec cannot be acted on (its message names the pool and the field)."""


def annotations_of(node: Mapping[str, Any]) -> Mapping[str, str]:
    return (node.get("metadata") or {}).get("annotations") or {}


def labels_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def name_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def pool_target(pool: Mapping[str, Any]) -> str:
    return str(((pool.get("spec") or {}).get("configuration") or {}).get("name") or "")


# -- one node


def not_ready_reason(node: Mapping[str, Any]) -> str:
    """Why the node is not ready for an update ("" when it is), as upstream's CheckNodeReady."""
    name = name_of(node)
    for cond in (node.get("status") or {}).get("conditions") or []:
        kind, status = cond.get("type"), cond.get("status")
        if kind == "Ready" and status != "True":
            return f"node {name} is reporting NotReady={status}"
        if kind == "DiskPressure" and status != "False":
            return f"node {name} is reporting OutOfDisk={status}"
        if kind == "NetworkUnavailable" and status != "False":
            return f"node {name} is reporting NetworkUnavailable={status}"
    if (node.get("spec") or {}).get("unschedulable"):
        return f"node {name} is reporting Unschedulable"
    return ""


def is_ready(node: Mapping[str, Any]) -> bool:
    return not not_ready_reason(node)


def joining(node: Mapping[str, Any]) -> str:
    """The config a node joins its pool on: its `currentConfig` when its daemon reported one but
    nothing named a `desiredConfig` yet, else "".

    On OpenShift the Machine Config Server hands a new node both annotations
    (`node-annotations.json`); a node of a cluster without the operator was provisioned with a
    config (`mcd start --once-from`) and its agent, as upstream's, reports only `currentConfig`
    from the disk and then waits for a desired one. Naming that same config is no change for the
    node (no drain, no reboot, no capacity spent): its agent checks the disk and reports Done,
    and from then on it is a node like the others."""
    a = annotations_of(node)
    return a.get(CURRENT_CONFIG, "") if a.get(CURRENT_CONFIG) and DESIRED_CONFIG not in a else ""


def is_done(node: Mapping[str, Any]) -> bool:
    """The daemon reports Done on its desired config (and image, when one is asked)."""
    a = annotations_of(node)
    current, desired = a.get(CURRENT_CONFIG, ""), a.get(DESIRED_CONFIG, "")
    if not current or not desired or current != desired:
        return False
    image_asked = DESIRED_IMAGE in a or CURRENT_IMAGE in a
    if image_asked and (not a.get(DESIRED_IMAGE) or a.get(DESIRED_IMAGE) != a.get(CURRENT_IMAGE)):
        return False
    return a.get(STATE, "") == "Done"


def is_degraded(node: Mapping[str, Any]) -> bool:
    return annotations_of(node).get(STATE, "") in ("Degraded", "Unreconcilable")


def is_failing(node: Mapping[str, Any]) -> bool:
    """Degraded or Unreconcilable on the way to a config it does not run."""
    a = annotations_of(node)
    return a.get(CURRENT_CONFIG, "") != a.get(DESIRED_CONFIG, "") and is_degraded(node)


def is_new(node: Mapping[str, Any]) -> bool:
    """A node mcd never ran on: neither config named (upstream's nodes always get both from the
    Machine Config Server; a cluster's own nodes joining a pool here have none)."""
    a = annotations_of(node)
    return not a.get(CURRENT_CONFIG) and not a.get(DESIRED_CONFIG)


def is_unavailable(node: Mapping[str, Any]) -> bool:
    if not is_ready(node):
        return True
    if is_done(node):
        return False
    # a new node runs its workloads as it is until it is pointed at its first config: counting
    # it unavailable would spend the pool's capacity on it and, at maxUnavailable 1, never move it
    return not (is_failing(node) or is_new(node))


def is_updated(node: Mapping[str, Any], target: str) -> bool:
    """Done on the pool's target, with no image asked (pools here are never layered)."""
    a = annotations_of(node)
    return is_done(node) and a.get(DESIRED_CONFIG) == target and DESIRED_IMAGE not in a


# -- which pool a node is in


def _is_windows(node: Mapping[str, Any]) -> bool:
    return ((node.get("metadata") or {}).get("labels") or {}).get(OS_LABEL) == "windows"


def primary_pool(node: Mapping[str, Any], pools: Sequence[Mapping[str, Any]]) -> str | None:
    """The pool that manages the node, as upstream: master wins, then the one custom pool, then
    worker; None for a Windows node, a node no pool selects, or one in two custom pools."""
    if _is_windows(node):
        return None
    labels = (node.get("metadata") or {}).get("labels") or {}
    selecting = [p for p in pools if _selects_nodes(p, labels)]
    names = [name_of(p) for p in selecting]
    custom = [n for n in names if n not in (MASTER, WORKER)]
    if len(custom) > 1:
        return None
    if MASTER in names:
        return MASTER
    if custom:
        return custom[0]
    return WORKER if WORKER in names else None


def selects_nothing(selector: object) -> bool:
    """A node selector that must match no node: missing, not an object, or empty (`{}`,
    `{matchLabels: {}}`, `{matchExpressions: []}`). As upstream's ListPools: a pool whose
    selector is empty would otherwise take every node from the pool that manages it."""
    if not isinstance(selector, Mapping):
        return True
    return not selector.get("matchLabels") and not selector.get("matchExpressions")


def _selects_nodes(pool: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    selector = (pool.get("spec") or {}).get("nodeSelector")
    return isinstance(selector, Mapping) and not selects_nothing(selector) and matches(selector, labels)


def nodes_of(pool: Mapping[str, Any], nodes: Sequence[Obj], pools: Sequence[Mapping[str, Any]]) -> list[Obj]:
    return [n for n in nodes if primary_pool(n, pools) == name_of(pool)]


# -- how many at a time, and which


_PERCENT = re.compile(r"^(\d+)%$")


def max_unavailable(pool: Mapping[str, Any], total: int) -> int:
    """spec.maxUnavailable as a node count: an int, or "N%" of `total` rounded down; 1 by default,
    and never 0 (a pool always moves)."""
    value = (pool.get("spec") or {}).get("maxUnavailable")
    if value is None:
        return 1
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise PoolError(f"pool {name_of(pool)}: spec.maxUnavailable: expected an integer or a percentage")
    if isinstance(value, str):
        m = _PERCENT.match(value)
        if m is None:
            raise PoolError(
                f"pool {name_of(pool)}: spec.maxUnavailable: {value!r} is not an integer or a percentage"
            )
        count = int(m[1]) * total // 100
    else:
        count = value
    return max(count, 1)


def needs_update(node: Mapping[str, Any], target: str) -> bool:
    a = annotations_of(node)
    return a.get(DESIRED_CONFIG) != target or DESIRED_IMAGE in a


def _order_key(node: Mapping[str, Any]) -> tuple[int, str, str, str]:
    """Zone-labelled nodes first by zone, then by creation time (RFC 3339 sorts as text); the name
    breaks the remaining ties, so the order is the same on every pass."""
    meta = node.get("metadata") or {}
    zone = (meta.get("labels") or {}).get(ZONE_LABEL)
    return (0 if zone is not None else 1, zone or "", str(meta.get("creationTimestamp", "")), name_of(node))


@dataclass(frozen=True)
class Choice:
    """The nodes to point at the target now, and the counts that decided it (for the log)."""

    nodes: tuple[str, ...]
    capacity: int
    unavailable: int
    limit: int


def choose(pool: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]]) -> Choice:
    target = pool_target(pool)
    limit = max_unavailable(pool, len(nodes))
    unavailable = sum(1 for n in nodes if is_unavailable(n))
    if not target or unavailable >= limit:
        return Choice((), 0, unavailable, limit)
    capacity = limit - unavailable
    failing = 0
    candidates = []
    for node in nodes:
        if not needs_update(node, target):
            # a node failing on the target already takes a slot: one more would fail the same way
            failing += 1 if is_failing(node) else 0
            continue
        if is_ready(node):
            candidates.append(node)
    if failing >= capacity:
        return Choice((), 0, unavailable, limit)
    capacity -= failing
    picked = sorted(candidates, key=_order_key)[:capacity] if capacity < len(candidates) else candidates
    return Choice(tuple(name_of(n) for n in picked), capacity, unavailable, limit)
