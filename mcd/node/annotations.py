"""Node annotation keys, the node state machine and upstream's reason truncation. Pure: no I/O.

The keys and values are upstream's (`pkg/daemon/constants`), so `oc get node`, the pool status
and the controller's drain handshake read mcd's node exactly as they read one run by upstream.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from mcd.planner.nodefacts import HIGHLY_AVAILABLE, SINGLE_REPLICA

PREFIX = "machineconfiguration.openshift.io/"
CURRENT_CONFIG = PREFIX + "currentConfig"
DESIRED_CONFIG = PREFIX + "desiredConfig"
CURRENT_IMAGE = PREFIX + "currentImage"
DESIRED_IMAGE = PREFIX + "desiredImage"
STATE = PREFIX + "state"
REASON = PREFIX + "reason"
POST_CONFIG_ACTION = PREFIX + "post-config-action"
DESIRED_DRAIN = PREFIX + "desiredDrain"
LAST_APPLIED_DRAIN = PREFIX + "lastAppliedDrain"
CONTROL_PLANE_TOPOLOGY = PREFIX + "controlPlaneTopology"
FIRST_PIVOT_CONFIG = PREFIX + "firstPivotConfig"
# the previous boot's ostree-finalize-staged.service error ("" once a later boot finalized)
FINALIZE_FAILURE = PREFIX + "ostree-finalize-staged-failure"
# the certificate writer's: the ControllerConfig resourceVersion last written to disk, and the
# service-ca-rotate value last acted on
LAST_SYNCED_CONTROLLER_CONFIG = PREFIX + "lastSyncedControllerConfigResourceVersion"
LAST_OBSERVED_SERVER_CA = PREFIX + "lastObservedServerCAAnnotation"

# marks a node whose reboot was requested (value of POST_CONFIG_ACTION); cleared after the boot
REBOOTING = "Rebooting"
DRAIN = "drain"
UNCORDON = "uncordon"

# upstream writes the reason with "%.2000s"
REASON_LIMIT = 2000


class NodeState(enum.Enum):
    DONE = "Done"
    WORKING = "Working"
    DEGRADED = "Degraded"
    UNRECONCILABLE = "Unreconcilable"

    @classmethod
    def parse(cls, value: str | None) -> NodeState:
        """The state an annotation value means; empty or missing is Done, as upstream reads it."""
        if not value:
            return cls.DONE
        try:
            return cls(value)
        except ValueError:
            raise UnknownNodeStateError(f"unknown node state {value!r}") from None


class UnknownNodeStateError(ValueError):
    """The node's state annotation holds a value upstream never writes (someone else wrote it)."""


def transition(current: NodeState, new: NodeState) -> NodeState:
    """The state after asking for `new` from `current`.

    Every state may become any other, but for one rule: upstream never overwrites Degraded or
    Unreconcilable with Working (its `update()` only sets Working when the node is neither), so
    they stay until Done.
    """
    if new is NodeState.WORKING and current in (NodeState.DEGRADED, NodeState.UNRECONCILABLE):
        return current
    return new


def truncate_reason(reason: str) -> str:
    """The reason as upstream stores it: at most 2000 characters, cut without a marker."""
    return reason[:REASON_LIMIT]


def truncate(s: str, limit: int) -> str:
    """Upstream's `truncate` helper for log lines: the first `limit` characters and how many were cut."""
    if len(s) <= limit:
        return s
    return f"{s[:limit]} [{len(s) - limit} more chars]"


def state_annotations(state: NodeState, reason: str = "") -> dict[str, str]:
    """The annotations that report `state` (the reason truncated as upstream)."""
    return {STATE: state.value, REASON: truncate_reason(reason)}


@dataclass(frozen=True)
class NodeView:
    """The annotations and schedulability of a Node, as the daemon reads them."""

    name: str
    annotations: Mapping[str, str]
    unschedulable: bool = False
    resource_version: str = ""
    deleting: bool = False

    @property
    def current_config(self) -> str:
        return self.annotations.get(CURRENT_CONFIG, "")

    @property
    def desired_config(self) -> str:
        return self.annotations.get(DESIRED_CONFIG, "")

    @property
    def current_image(self) -> str:
        return self.annotations.get(CURRENT_IMAGE, "")

    @property
    def desired_image(self) -> str:
        return self.annotations.get(DESIRED_IMAGE, "")

    @property
    def state(self) -> NodeState:
        return NodeState.parse(self.annotations.get(STATE))

    @property
    def reason(self) -> str:
        return self.annotations.get(REASON, "")

    @property
    def desired_drain(self) -> str:
        return self.annotations.get(DESIRED_DRAIN, "")

    @property
    def last_applied_drain(self) -> str:
        return self.annotations.get(LAST_APPLIED_DRAIN, "")

    @property
    def topology(self) -> str:
        """The control plane topology the planner is given: SingleReplica or HighlyAvailable
        (unknown values count as HighlyAvailable, as upstream's getControlPlaneTopology)."""
        return SINGLE_REPLICA if self.single_replica else HIGHLY_AVAILABLE

    @property
    def single_replica(self) -> bool:
        return self.annotations.get(CONTROL_PLANE_TOPOLOGY) == SINGLE_REPLICA

    @property
    def drain_pending(self) -> bool:
        """A drain or uncordon was asked for and the controller has not confirmed it yet."""
        return bool(self.desired_drain) and self.desired_drain != self.last_applied_drain

    @classmethod
    def from_object(cls, obj: Mapping[str, object]) -> NodeView:
        """A NodeView of a Node object as the API returns it (a JSON dict)."""
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        spec = obj.get("spec")
        spec = spec if isinstance(spec, Mapping) else {}
        ann = meta.get("annotations")
        annotations = {str(k): str(v) for k, v in ann.items()} if isinstance(ann, Mapping) else {}
        return cls(
            name=str(meta.get("name", "")),
            annotations=annotations,
            unschedulable=bool(spec.get("unschedulable", False)),
            resource_version=str(meta.get("resourceVersion", "")),
            deleting=bool(meta.get("deletionTimestamp")),
        )


@dataclass(frozen=True)
class UpdateDecision:
    """Upstream's `prepUpdateFromCluster`: which config the node is in, which it should be in."""

    update: bool
    current_config: str
    desired_config: str
    current_image: str
    desired_image: str


def decide_update(node: NodeView, disk_config: str | None, disk_image: str | None) -> UpdateDecision:
    """Whether an update is needed; the on-disk config (and image) win over the annotations.

    A node whose names and images match but whose state is not Done is updated anyway: that is
    how a Degraded node re-applies its config and recovers.
    """
    current = disk_config if disk_config else node.current_config
    current_image = disk_image if disk_config and disk_image is not None else node.current_image
    desired, desired_image = node.desired_config, node.desired_image
    in_place = current == desired and current_image == desired_image
    return UpdateDecision(
        update=not (in_place and node.state is NodeState.DONE),
        current_config=current,
        desired_config=desired,
        current_image=current_image,
        desired_image=desired_image,
    )


def drain_value(verb: str, config: str) -> str:
    """`drain-<config>` or `uncordon-<config>`: the desiredDrain request of the handshake."""
    return f"{verb}-{config}"
