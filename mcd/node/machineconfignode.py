"""The node's MachineConfigNode (machineconfiguration.openshift.io/v1): its conditions through an
update and how one report changes them. Pure: no I/O; the clock is an argument.

Upstream's `pkg/upgrademonitor` reports each phase of an update as a parent condition (the
phase: UpdatePrepared, UpdateExecuted, UpdatePostActionComplete, UpdateComplete, ...) and
optionally a child (the step inside it: Cordoned, Drained, AppliedFilesAndOS, Uncordoned), with
upstream's statuses and reasons (a child's reason is its parent's type followed by its own).
`merge` keeps upstream's rules: a new object gets every condition, the ones not yet reached False
with reason NotYetOccurred; a parent that says what it already says changes nothing; `Updated`
turns every other condition that is not False back to False, its message prefixed with the
update it belonged to; `status.configVersion.desired` stays `not-yet-set` until the update is
known to be compatible. The messages are ours (docs/upstream-differences.md).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

API_VERSION = "machineconfiguration.openshift.io/v1"
KIND = "MachineConfigNode"
NOT_YET_SET = "not-yet-set"
NOT_YET_OCCURRED = "NotYetOccurred"

# the condition types (the API's StateProgress values)
UPDATE_PREPARED = "UpdatePrepared"
UPDATE_EXECUTED = "UpdateExecuted"
UPDATE_POST_ACTION_COMPLETE = "UpdatePostActionComplete"
UPDATE_COMPLETE = "UpdateComplete"
UPDATED = "Updated"
RESUMED = "Resumed"
DRAINED = "Drained"
APPLIED_FILES_AND_OS = "AppliedFilesAndOS"
CORDONED = "Cordoned"
UNCORDONED = "Uncordoned"
REBOOTED = "RebootedNode"
NODE_DEGRADED = "NodeDegraded"
PINNED_IMAGE_SETS_PROGRESSING = "PinnedImageSetsProgressing"
PINNED_IMAGE_SETS_DEGRADED = "PinnedImageSetsDegraded"

# every type a new object starts with, in upstream's order (ImagePulledFromRegistry belongs to
# a feature gate this agent does not implement)
ALL_TYPES = (
    UPDATE_PREPARED,
    UPDATE_EXECUTED,
    UPDATE_POST_ACTION_COMPLETE,
    UPDATE_COMPLETE,
    RESUMED,
    DRAINED,
    APPLIED_FILES_AND_OS,
    CORDONED,
    REBOOTED,
    UPDATED,
    UNCORDONED,
    NODE_DEGRADED,
    PINNED_IMAGE_SETS_DEGRADED,
    PINNED_IMAGE_SETS_PROGRESSING,
)
# conditions without children: a repeat still writes (upstream re-applies them)
SINGLETONS = frozenset({PINNED_IMAGE_SETS_DEGRADED, PINNED_IMAGE_SETS_PROGRESSING})

TRUE, FALSE, UNKNOWN = "True", "False", "Unknown"

Obj = dict[str, Any]


@dataclass(frozen=True)
class Condition:
    """One condition as reported (the transition time is stamped by `merge`)."""

    type: str
    status: str
    reason: str
    message: str


@dataclass(frozen=True)
class Report:
    """One phase report: the parent condition and, for a step inside the phase, the child."""

    parent: Condition
    child: Condition | None = None
    # the update is known to be compatible: the spec's desired config is brought up to date too
    spec: bool = False


def _stamp(now: float) -> str:
    return datetime.datetime.fromtimestamp(now, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _as_dict(c: Condition, now: float) -> Obj:
    return {
        "type": c.type,
        "status": c.status,
        "reason": c.reason,
        "message": c.message,
        "lastTransitionTime": _stamp(now),
    }


def pool_of(desired_config: str, default: str = "worker") -> str:
    """The pool a node belongs to, from its rendered config's name (`rendered-<pool>-<hash>`),
    so no MachineConfigPool need be read; `default` when the name is not a rendered one."""
    if desired_config.startswith("rendered-"):
        pool, sep, _hash = desired_config.removeprefix("rendered-").rpartition("-")
        if sep and pool:
            return pool
    return default


def new_object(node: str, pool: str, desired_config: str) -> Obj:
    """A MachineConfigNode for `node` (status is written through the status subresource)."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": node},
        "spec": {
            "node": {"name": node},
            "pool": {"name": pool},
            "configVersion": {"desired": desired_config or NOT_YET_SET},
        },
    }


def spec_change(obj: Mapping[str, Any], pool: str, desired_config: str) -> Obj | None:
    """`obj` with its spec's pool and desired config brought up to date; None when they are."""
    spec = dict(obj.get("spec") or {})
    desired = desired_config or NOT_YET_SET
    if (spec.get("configVersion") or {}).get("desired") == desired and (spec.get("pool") or {}).get(
        "name"
    ) == pool:
        return None
    spec["configVersion"] = {"desired": desired}
    spec["pool"] = {"name": pool}
    spec.setdefault("node", {"name": (obj.get("metadata") or {}).get("name", "")})
    return {**obj, "spec": spec}


def _prefixed(message: str, desired: str) -> str:
    return f"During the update to {desired}: {message}"


def merge(
    status: Mapping[str, Any] | None,
    report: Report,
    *,
    spec_desired: str,
    current_config: str,
    desired_config: str,
    now: float,
) -> Obj | None:
    """The status after `report`, or None when the report changes nothing.

    `spec_desired` is the object's spec.configVersion.desired (the update the conditions a reset
    turns False belonged to); `current_config` and `desired_config` are the node's annotations.
    """
    old = dict(status or {})
    conditions: list[Obj] = [dict(c) for c in old.get("conditions") or []]
    parent, child = report.parent, report.child
    if not conditions:
        conditions = [_as_dict(parent, now)]
        if child is not None:
            conditions.append(_as_dict(child, now))
        reported = {c["type"] for c in conditions}
        for kind in ALL_TYPES:
            if kind not in reported:
                message = f"The node has not reached the {kind} phase yet"
                conditions.append(_as_dict(Condition(kind, FALSE, NOT_YET_OCCURRED, message), now))
    else:
        found_parent = found_child = False
        reset = parent.type == UPDATED
        for i, c in enumerate(conditions):
            ctype = c.get("type")
            if ctype == UPDATED and c.get("status") == TRUE and parent.type != UPDATED:
                # a phase reported while the node says it is up to date: it no longer is
                conditions[i] = _as_dict(
                    Condition(UPDATED, FALSE, UPDATED, "The node is no longer up to date: an update began"),
                    now,
                )
            elif child is not None and ctype == child.type:
                found_child = True
                conditions[i] = _as_dict(child, now)
            elif ctype == parent.type:
                found_parent = True
                same = c.get("status") == parent.status and c.get("message") == parent.message
                if same and ctype not in SINGLETONS:
                    return None
                conditions[i] = _as_dict(parent, now)
            elif reset and c.get("status") != FALSE:
                conditions[i] = {
                    **c,
                    "status": FALSE,
                    "lastTransitionTime": _stamp(now),
                    "message": _prefixed(str(c.get("message", "")), spec_desired),
                }
        if child is not None and not found_child:
            conditions.append(_as_dict(child, now))
        if not found_parent:
            conditions.append(_as_dict(parent, now))
    prepared = parent.type == UPDATE_PREPARED
    desired = NOT_YET_SET
    if (prepared and parent.status == TRUE) or (not prepared and desired_config):
        desired = desired_config
    version: Obj = dict(old.get("configVersion") or {})
    version["desired"] = desired
    if current_config:
        version["current"] = current_config
    new = {**old, "conditions": conditions, "configVersion": version}
    return new


# --- the phases (upstream's statuses and reasons; our wording) ------------------------------


def _pair(
    parent: str, child: str, parent_reason: str, statuses: tuple[str, str], messages: tuple[str, str]
) -> Report:
    return Report(
        Condition(parent, statuses[0], parent_reason, messages[0]),
        Condition(child, statuses[1], parent + child, messages[1]),
    )


def _go_bool(value: bool) -> str:
    return "true" if value else "false"


def rebooted() -> Report:
    return Report(Condition(REBOOTED, TRUE, REBOOTED, "The node rebooted"))


def reboot_required() -> Report:
    return Report(Condition(REBOOTED, UNKNOWN, REBOOTED, "The update needs a reboot"))


def resumed(config: str) -> Report:
    message = f"Running the desired config {config}; normal operation resumed"
    return Report(Condition(RESUMED, TRUE, RESUMED, message))


def needs_update(node: str) -> Report:
    return Report(Condition(UPDATED, FALSE, UPDATED, f"Node {node} has an update to apply"))


def updated(node: str) -> Report:
    return Report(Condition(UPDATED, TRUE, UPDATED, f"Node {node} is up to date"))


def prepared(actions: Sequence[object], drain: bool) -> Report:
    text = " ".join(str(a) for a in actions)
    message = f"The update is compatible. Post-config actions: [{text}]; drain required: {_go_bool(drain)}"
    return Report(Condition(UPDATE_PREPARED, TRUE, UPDATE_PREPARED, message), spec=True)


def not_prepared(old: str, new: str, error: str) -> Report:
    message = f"The update failed validation: MachineConfigs {old} and {new} are not compatible: {error}"
    return Report(Condition(UPDATE_PREPARED, UNKNOWN, UPDATE_PREPARED, message))


def drain_not_required() -> Report:
    text = "This update needs no drain"
    return _pair(UPDATE_EXECUTED, DRAINED, DRAINED, (UNKNOWN, FALSE), (text, text))


def cordoned(unschedulable: bool) -> Report:
    return _pair(
        UPDATE_EXECUTED,
        CORDONED,
        CORDONED,
        (UNKNOWN, TRUE),
        (
            "Cordoned the node (update executed phase)",
            f"The node is cordoned; it reports unschedulable = {_go_bool(unschedulable)}",
        ),
    )


def draining(detail: str) -> Report:
    return _pair(
        UPDATE_EXECUTED,
        DRAINED,
        DRAINED,
        (UNKNOWN, UNKNOWN),
        ("Draining the node (update executed phase)", f"Draining the node: {detail}"),
    )


def drain_failed(error: str) -> Report:
    return _pair(
        UPDATE_EXECUTED,
        DRAINED,
        DRAINED,
        (UNKNOWN, UNKNOWN),
        ("The drain has not succeeded", f"The drain has not succeeded: {error}"),
    )


def drained(detail: str) -> Report:
    return _pair(
        UPDATE_EXECUTED,
        DRAINED,
        DRAINED,
        (UNKNOWN, TRUE),
        ("Drained the node (update executed phase)", f"The node is drained: {detail}"),
    )


def _needed(flag: bool) -> str:
    return "yes" if flag else "no"


def applying(os_update: bool, ssh_keys: bool) -> Report:
    needs = f"OS update needed: {_needed(os_update)}; SSH keys update needed: {_needed(ssh_keys)}"
    return _pair(
        UPDATE_EXECUTED,
        APPLIED_FILES_AND_OS,
        APPLIED_FILES_AND_OS,
        (UNKNOWN, UNKNOWN),
        (
            "Updating the files and the OS on disk (update executed phase)",
            f"Applying the files and the OS config to the node ({needs})",
        ),
    )


def applied(os_update: bool, ssh_keys: bool) -> Report:
    needs = f"OS update needed: {_needed(os_update)}; SSH keys update needed: {_needed(ssh_keys)}"
    return _pair(
        UPDATE_EXECUTED,
        APPLIED_FILES_AND_OS,
        APPLIED_FILES_AND_OS,
        (TRUE, TRUE),
        (
            "Updated the files and the OS on disk (update executed phase)",
            f"Applied the files and the OS config to the node ({needs})",
        ),
    )


def apply_failed(error: str) -> Report:
    return _pair(
        UPDATE_EXECUTED,
        APPLIED_FILES_AND_OS,
        APPLIED_FILES_AND_OS,
        (UNKNOWN, UNKNOWN),
        (
            "Failed to update the files and the OS on disk (update executed phase)",
            f"Applying the files and the OS config failed: {error}",
        ),
    )


def post_action_none() -> Report:
    return Report(Condition(UPDATE_POST_ACTION_COMPLETE, TRUE, "None", "These changes need no reboot"))


def post_action_done(actions: Iterable[tuple[str, str]]) -> Report:
    """A rebootless update's service actions ran: (verb, service) pairs; crio's reload is
    upstream's own message, any other the service named."""
    parts = []
    for verb, service in actions:
        if service == "crio" and verb == "reload":
            parts.append("CRI-O reloaded")
        elif service:
            parts.append(f"service {service} {'restarted' if verb == 'restart' else 'reloaded'}")
        else:
            parts.append("systemd reloaded")
    message = "The node ran its post-config actions: " + ", ".join(parts)
    return Report(Condition(UPDATE_POST_ACTION_COMPLETE, TRUE, UPDATE_POST_ACTION_COMPLETE, message))


def uncordoned(unschedulable: bool) -> Report:
    return _pair(
        UPDATE_COMPLETE,
        UNCORDONED,
        UNCORDONED,
        (TRUE, TRUE),
        (
            "Uncordoned the node (update complete phase)",
            f"The node is uncordoned; it reports unschedulable = {_go_bool(unschedulable)}",
        ),
    )


def degraded(node: str, error: str) -> Report:
    return Report(Condition(NODE_DEGRADED, TRUE, NODE_DEGRADED, f"Node {node} failed to update: {error}"))


def not_degraded(node: str) -> Report:
    return Report(Condition(NODE_DEGRADED, FALSE, NODE_DEGRADED, f"Node {node} updated successfully"))
