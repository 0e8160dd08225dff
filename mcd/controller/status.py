"""A MachineConfigPool's status from its nodes, as upstream's node controller writes it. Pure.

Counts: machines, updated (Done on the pool's target), ready (updated and ready), unavailable
(see `rollout.is_unavailable`), degraded (state Degraded or Unreconcilable). Conditions:
Updated / Updating (with upstream's messages, "Pool is paused; …" when paused), NodeDegraded
("N nodes are reporting degraded status on sync", one `Node X is reporting: "reason"` per
node), Degraded (any of NodeDegraded and RenderDegraded, with the node message), and
RenderDegraded kept as the render step set it. A condition keeps its lastTransitionTime while
its status is unchanged, and a changed one moves to the end of the list, as upstream's
SetMachineConfigPoolCondition does. `status.configuration` follows the target once every node
is updated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mcd.controller.rollout import is_degraded, is_ready, is_unavailable, is_updated, pool_target
from mcd.node.annotations import REASON

Obj = dict[str, Any]

UPDATED, UPDATING = "Updated", "Updating"
DEGRADED, NODE_DEGRADED, RENDER_DEGRADED = "Degraded", "NodeDegraded", "RenderDegraded"
INVALID_SPEC = "InvalidSpec"  # mcd's own: upstream only logs a spec its node controller cannot use


def set_condition(
    conditions: list[Obj], kind: str, value: bool, reason: str, message: str, *, now: str
) -> list[Obj]:
    """`conditions` with `kind` set; unchanged when equal, the transition time kept while the
    status holds."""
    status = "True" if value else "False"
    current = next((c for c in conditions if c.get("type") == kind), None)
    if current is not None and (
        current.get("status"),
        current.get("reason", ""),
        current.get("message", ""),
    ) == (
        status,
        reason,
        message,
    ):
        return conditions
    stamp = (
        current.get("lastTransitionTime", now)
        if current is not None and current.get("status") == status
        else now
    )
    new = {"type": kind, "status": status, "lastTransitionTime": stamp, "reason": reason, "message": message}
    return [c for c in conditions if c.get("type") != kind] + [new]


def is_true(conditions: Sequence[Mapping[str, Any]], kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def pool_status(pool: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]], now: str) -> Obj:
    """The whole new `status` of `pool` over its `nodes` (`now` stamps changed conditions)."""
    old: Mapping[str, Any] = pool.get("status") or {}
    spec: Mapping[str, Any] = pool.get("spec") or {}
    target = pool_target(pool)
    total = len(nodes)
    updated = [n for n in nodes if is_updated(n, target)]
    ready = [n for n in updated if is_ready(n)]
    unavailable = [n for n in nodes if is_unavailable(n)]
    degraded = [n for n in nodes if is_degraded(n)]
    status: Obj = {
        "observedGeneration": (pool.get("metadata") or {}).get("generation", 1),
        "machineCount": total,
        "updatedMachineCount": len(updated),
        "readyMachineCount": len(ready),
        "unavailableMachineCount": len(unavailable),
        "degradedMachineCount": len(degraded),
        "configuration": dict(old.get("configuration") or {}),
    }
    conditions: list[Obj] = [dict(c) for c in old.get("conditions") or []]
    line = f"MachineConfig {target}"
    all_updated = len(updated) == total and len(ready) == total and not unavailable
    if all_updated:
        conditions = set_condition(
            conditions, UPDATED, True, "", f"All nodes are updated with {line}", now=now
        )
        conditions = set_condition(conditions, UPDATING, False, "", "", now=now)
        status["configuration"] = dict(spec.get("configuration") or {})
    else:
        conditions = set_condition(conditions, UPDATED, False, "", "", now=now)
        if spec.get("paused"):
            message = f"Pool is paused; will not update to {line}"
            conditions = set_condition(conditions, UPDATING, False, "", message, now=now)
        else:
            conditions = set_condition(
                conditions, UPDATING, True, "", f"All nodes are updating to {line}", now=now
            )
    node_message = ""
    if degraded:
        reasons = [
            f"Node {n['metadata']['name']} is reporting: {_quoted(r)}"
            for n in degraded
            if (r := ((n.get("metadata") or {}).get("annotations") or {}).get(REASON, ""))
        ]
        node_message = ", ".join(reasons)
        why = f"{len(degraded)} nodes are reporting degraded status on sync"
        conditions = set_condition(conditions, NODE_DEGRADED, True, why, node_message, now=now)
    else:
        conditions = set_condition(conditions, NODE_DEGRADED, False, "", "", now=now)
    if degraded or is_true(conditions, RENDER_DEGRADED):
        conditions = set_condition(conditions, DEGRADED, True, "", node_message, now=now)
    else:
        conditions = set_condition(conditions, DEGRADED, False, "", "", now=now)
    status["conditions"] = conditions
    return status


def _quoted(text: str) -> str:
    """Go's %q of a string: double quotes, with backslash, quote and control characters escaped."""
    out = []
    for ch in text:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def spec_invalid(conditions: Sequence[Mapping[str, Any]], error: str | None, now: str) -> list[Obj]:
    """`conditions` with InvalidSpec True and `error` as its message (reason InvalidMaxUnavailable),
    or False once fixed; a pool that never had it does not get it."""
    out = [dict(c) for c in conditions]
    if error is None:
        if not any(c.get("type") == INVALID_SPEC for c in out):
            return out
        return set_condition(out, INVALID_SPEC, False, "", "", now=now)
    return set_condition(out, INVALID_SPEC, True, "InvalidMaxUnavailable", error, now=now)


def render_degraded(pool: Mapping[str, Any], error: str | None, now: str) -> list[Obj]:
    """The pool's conditions with RenderDegraded set from the render step (None: it rendered)."""
    conditions: list[Obj] = [dict(c) for c in (pool.get("status") or {}).get("conditions") or []]
    name = str((pool.get("metadata") or {}).get("name", ""))
    if error is None:
        return set_condition(conditions, RENDER_DEGRADED, False, "", "", now=now)
    message = f"Failed to render configuration for pool {name}: {error}"
    return set_condition(conditions, RENDER_DEGRADED, True, "", message, now=now)
