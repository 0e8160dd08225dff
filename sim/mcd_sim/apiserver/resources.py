"""The resource types the stand-in API server serves: names, scope, subresources, verbs.

One table drives routing, discovery, OpenAPI and Table printing, so a resource is added in
one place.
"""

from __future__ import annotations

from dataclasses import dataclass

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class ResourceType:
    """One REST resource (e.g. `nodes` in the core group `v1`)."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    status: bool = False  # has a `status` subresource: main writes keep status, status writes keep the rest
    generation: bool = False  # metadata.generation moves on spec changes
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    # fields usable in fieldSelector besides metadata.name / metadata.namespace
    field_labels: tuple[str, ...] = ()
    # a second view of the objects of another resource (events.k8s.io/v1 Events are core Events)
    view_of: str = ""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def key(self) -> str:
        """Storage key: objects live once per group/plural (a view shares its target's key)."""
        return self.view_of or f"{self.group}/{self.plural}"

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    def base_path(self, namespace: str | None = None) -> str:
        prefix = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            return f"{prefix}/namespaces/{namespace}/{self.plural}"
        return f"{prefix}/{self.plural}"


MC_GROUP = "machineconfiguration.openshift.io"
OPERATOR_GROUP = "operator.openshift.io"

RESOURCES: tuple[ResourceType, ...] = (
    ResourceType(
        "",
        "v1",
        "namespaces",
        "Namespace",
        False,
        ("ns",),
        status=True,
        verbs=("create", "delete", "get", "list", "patch", "update", "watch"),
        field_labels=("status.phase",),
    ),
    ResourceType(
        "", "v1", "nodes", "Node", False, ("no",), status=True, field_labels=("spec.unschedulable",)
    ),
    ResourceType(
        "",
        "v1",
        "pods",
        "Pod",
        True,
        ("po",),
        status=True,
        categories=("all",),
        field_labels=(
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ),
    ),
    ResourceType(
        "",
        "v1",
        "events",
        "Event",
        True,
        ("ev",),
        field_labels=(
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ),
    ),
    ResourceType(
        "events.k8s.io",
        "v1",
        "events",
        "Event",
        True,
        ("ev",),
        view_of="/events",
        field_labels=(
            "regarding.kind",
            "regarding.namespace",
            "regarding.name",
            "regarding.uid",
            "reason",
            "reportingController",
            "type",
        ),
    ),
    ResourceType(
        "apps",
        "v1",
        "daemonsets",
        "DaemonSet",
        True,
        ("ds",),
        status=True,
        generation=True,
        categories=("all",),
    ),
    ResourceType(
        "apps",
        "v1",
        "replicasets",
        "ReplicaSet",
        True,
        ("rs",),
        status=True,
        generation=True,
        categories=("all",),
    ),
    ResourceType("coordination.k8s.io", "v1", "leases", "Lease", True),
    ResourceType(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        True,
        ("pdb",),
        status=True,
        generation=True,
    ),
    ResourceType(MC_GROUP, "v1", "machineconfigs", "MachineConfig", False, ("mc",), generation=True),
    ResourceType(
        MC_GROUP,
        "v1",
        "machineconfigpools",
        "MachineConfigPool",
        False,
        ("mcp",),
        status=True,
        generation=True,
    ),
    # not in the list, but the daemon reads them (certificate writer, MCN reporting)
    ResourceType(
        MC_GROUP, "v1", "controllerconfigs", "ControllerConfig", False, status=True, generation=True
    ),
    # upstream's CRD has no short name: `mcn` is the simulator's own (docs/upstream-differences.md)
    ResourceType(
        MC_GROUP,
        "v1",
        "machineconfignodes",
        "MachineConfigNode",
        False,
        ("mcn",),
        status=True,
        generation=True,
    ),
    ResourceType(
        OPERATOR_GROUP,
        "v1",
        "machineconfigurations",
        "MachineConfiguration",
        False,
        status=True,
        generation=True,
    ),
)

# Subresources served besides `status` (the table above says which resources have that one).
EVICTION = ("", "pods", "eviction")


def groups() -> list[str]:
    """API groups in discovery order (the core group "" first)."""
    seen: list[str] = []
    for rt in RESOURCES:
        if rt.group not in seen:
            seen.append(rt.group)
    return seen


def in_group_version(group: str, version: str) -> list[ResourceType]:
    return [rt for rt in RESOURCES if rt.group == group and rt.version == version]


def lookup(group: str, version: str, plural: str) -> ResourceType | None:
    for rt in RESOURCES:
        if rt.group == group and rt.version == version and rt.plural == plural:
            return rt
    return None


def by_kind(api_version: str, kind: str) -> ResourceType | None:
    for rt in RESOURCES:
        if rt.api_version == api_version and rt.kind == kind and not rt.view_of:
            return rt
    return None


def storage_type(rt: ResourceType) -> ResourceType:
    """The resource whose objects a view serves (itself when not a view)."""
    if not rt.view_of:
        return rt
    return next(r for r in RESOURCES if r.key == rt.view_of and not r.view_of)
