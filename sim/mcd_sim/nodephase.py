"""What a Node's annotations say about its update, as upstream's node controller reads them.

Pure (no I/O): the controller stand-in decides with it how many more nodes it may move, and the
fleet timeline (`mcd_sim.timeline`) measures with it, from the API server's history, how many
nodes really were unavailable, so the measure does not take the controller's word for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# the node annotations are the agent's, named once
from mcd.node.annotations import (
    CURRENT_CONFIG,
    DESIRED_CONFIG,
    DESIRED_DRAIN,
    LAST_APPLIED_DRAIN,
    POST_CONFIG_ACTION,
    REBOOTING,
    STATE,
)

# the annotations the phase and availability read (what a recorded sample keeps)
KEYS = (DESIRED_CONFIG, CURRENT_CONFIG, STATE, DESIRED_DRAIN, LAST_APPLIED_DRAIN, POST_CONFIG_ACTION)
FAILING_STATES = ("Degraded", "Unreconcilable")
ZONE_LABEL = "topology.kubernetes.io/zone"

# the phases of a node through a rollout, in the order a node goes through them
OLD = "old"  # on a config other than the target, not asked to move yet
QUEUED = "queued"  # desiredConfig set, the agent has not started (upstream counts it unavailable)
UPDATING = "updating"  # state Working: preparing, writing files, or back from the reboot
DRAINING = "draining"  # desiredDrain asks for a drain the controller has not finished
REBOOTING_PHASE = "rebooting"  # the agent asked for the reboot; cleared by the booted agent
DONE = "done"  # Done on the target
DEGRADED = "degraded"
PHASES = (OLD, QUEUED, UPDATING, DRAINING, REBOOTING_PHASE, DONE, DEGRADED)

Obj = dict[str, Any]


def ready(conditions: list[Obj], unschedulable: bool) -> bool:
    """Upstream's CheckNodeReady: Ready True, DiskPressure and NetworkUnavailable not True (a
    missing condition passes), and schedulable."""
    for c in conditions:
        kind, status = c.get("type"), c.get("status")
        if (kind == "Ready" and status != "True") or (
            kind in ("DiskPressure", "NetworkUnavailable") and status != "False"
        ):
            return False
    return not unschedulable


def done(annotations: Mapping[str, str]) -> bool:
    """currentConfig == desiredConfig and the agent says Done."""
    current = annotations.get(CURRENT_CONFIG)
    return bool(current) and current == annotations.get(DESIRED_CONFIG) and annotations.get(STATE) == "Done"


def unavailable(annotations: Mapping[str, str], is_ready: bool) -> bool:
    """Upstream's IsUnavailableForUpdate: not ready, or not done while its agent is not failing
    (a node asked to move counts from that moment, before its agent even starts)."""
    if not is_ready:
        return True
    if done(annotations):
        return False
    return annotations.get(STATE) not in FAILING_STATES


def node_unavailable(node: Obj) -> bool:
    """`unavailable` of a Node object."""
    annotations = node["metadata"].get("annotations") or {}
    spec, status = node.get("spec") or {}, node.get("status") or {}
    return unavailable(annotations, ready(status.get("conditions") or [], bool(spec.get("unschedulable"))))


def phase(annotations: Mapping[str, str], target: str) -> str:
    """Where the node is in its move to `target` (one of PHASES)."""
    # a drain or reboot under way says more than Degraded: a retried sync keeps that state
    # until it is Done
    if annotations.get(POST_CONFIG_ACTION) == REBOOTING:
        return REBOOTING_PHASE
    drain = annotations.get(DESIRED_DRAIN, "")
    if drain.startswith("drain-") and drain != annotations.get(LAST_APPLIED_DRAIN, ""):
        return DRAINING
    if annotations.get(STATE) in FAILING_STATES:
        return DEGRADED
    if done(annotations):
        return DONE if annotations.get(CURRENT_CONFIG) == target else OLD
    if annotations.get(STATE, "Done") == "Done":
        return QUEUED if annotations.get(DESIRED_CONFIG) == target else OLD
    return UPDATING


def update_order(nodes: list[Obj]) -> list[Obj]:
    """Upstream's sortNodeList: nodes with a zone label first, by zone, then by age (oldest
    first); the name breaks ties (creation stamps have one-second resolution)."""

    def key(node: Obj) -> tuple[int, str, str, str]:
        meta = node["metadata"]
        zone = (meta.get("labels") or {}).get(ZONE_LABEL)
        return (0 if zone is not None else 1, zone or "", meta.get("creationTimestamp", ""), meta["name"])

    return sorted(nodes, key=key)
