"""Post-config-change actions: NodeDisruptionPolicy (NDP) lookup and the legacy action table. Pure: no I/O.

Two tables decide what the daemon does after writing a new config without a full reboot:

* **NodeDisruptionPolicy** (every in-cluster update): the ``MachineConfiguration/cluster`` object's
  ``status.nodeDisruptionPolicyStatus.clusterPolicies``, which the operator builds by merging the
  admin's ``spec.nodeDisruptionPolicy`` over `DEFAULT_POLICIES`. Each changed file, unit and the SSH
  key set maps to a list of `Action`; `combine_actions` folds those lists into the final one.
* **Legacy table** (firstboot, ``--once-from``, HyperShift): fixed per-path rules giving
  ``none`` / ``reload crio`` / ``restart crio`` / ``reboot``.

This module is only the *per-path* part. The short-circuits that come first — forcefile present,
``osImageURL`` / kernel arguments / FIPS / kernel type / extensions changed (and, in legacy mode,
any unit change) ⇒ Reboot; no file, unit or passwd change ⇒ ``[None]`` — are decided by
`mcd.plan`, which then calls the functions here for the changed paths only.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from mcd.config.findings import Finding, JsonPath, format_path

__all__ = [
    "DEFAULT_POLICIES",
    "Action",
    "ClusterPolicies",
    "Decision",
    "FilePolicy",
    "LegacyDecision",
    "PolicyError",
    "UnitPolicy",
    "actions_for_changes",
    "combine_actions",
    "combine_legacy",
    "file_decision",
    "legacy_actions_for_files",
    "legacy_drain_required",
    "legacy_file_decision",
    "merge_policies",
    "ndp_drain_required",
    "parse_cluster_policies",
    "policies_from_machineconfiguration",
    "sshkey_decision",
    "unit_decision",
]

# --------------------------------------------------------------------------------------------
# Action types and API constraints (openshift/api operator/v1 types_machineconfiguration.go)
# --------------------------------------------------------------------------------------------

REBOOT = "Reboot"
DRAIN = "Drain"
RELOAD = "Reload"
RESTART = "Restart"
DAEMON_RELOAD = "DaemonReload"
NONE = "None"
SPECIAL = "Special"

# Order as the API enums list them; Special exists only in status (the operator sets it, users cannot).
SPEC_ACTION_TYPES = (REBOOT, DRAIN, RELOAD, RESTART, DAEMON_RELOAD, NONE)
STATUS_ACTION_TYPES = (*SPEC_ACTION_TYPES, SPECIAL)
# The one-of member carrying the service name, per action type.
_SERVICE_KEY = {RELOAD: "reload", RESTART: "restart"}

MAX_SPEC_ENTRIES = 50
MAX_STATUS_ENTRIES = 100
MAX_ACTIONS = 10
MAX_SERVICE_NAME = 255

# The API's two CEL rules on service names. CEL `matches` is an unanchored RE2 search, so the
# name rule only constrains the start of the string; `\Z` because RE2's `$` never matches before
# a trailing newline, unlike Python's.
_SERVICE_SUFFIX_RE = re.compile(
    r"\.(service|socket|device|mount|automount|swap|target|path|timer|snapshot|slice|scope)\Z"
)
_SERVICE_NAME_RE = re.compile(r"^[a-zA-Z0-9:._\\-]+\..")

# Messages copied from the API's validation markers so `mcd validate` matches what `oc apply` says.
MSG_BAD_SUFFIX = (
    "Invalid ${SERVICETYPE} in service name. Expected format is ${NAME}${SERVICETYPE}, where "
    '${SERVICETYPE} must be one of ".service", ".socket", ".device", ".mount", ".automount", ".swap", '
    '".target", ".path", ".timer",".snapshot", ".slice" or ".scope".'
)
MSG_BAD_NAME = (
    "Invalid ${NAME} in service name. Expected format is ${NAME}${SERVICETYPE}, where {NAME} must be "
    'atleast 1 character long and can only consist of alphabets, digits, ":", "-", "_", ".", and "\\"'
)
MSG_REBOOT_ALONE = "Reboot action can only be specified standalone, as it will override any other actions"
MSG_NONE_ALONE = "None action can only be specified standalone, as it will override any other actions"
MSG_RELOAD_UNION = "reload is required when type is Reload, and forbidden otherwise"
MSG_RESTART_UNION = "restart is required when type is Restart, and forbidden otherwise"
_UNION_MSG = {RELOAD: MSG_RELOAD_UNION, RESTART: MSG_RESTART_UNION}


class PolicyError(ValueError):
    """A NodeDisruptionPolicy document the API server would reject; carries located findings."""

    def __init__(self, findings: Sequence[Finding]) -> None:
        self.findings = tuple(findings)
        super().__init__("; ".join(f"{format_path(f.path)}: {f.message}" for f in self.findings))


@dataclass(frozen=True)
class Action:
    """One NodeDisruptionPolicy action; `service` is set exactly for Reload and Restart."""

    type: str
    service: str | None = None

    def __post_init__(self) -> None:
        # Guards against building an action the API could never hold (typos in code, not user input).
        if self.type not in STATUS_ACTION_TYPES:
            raise ValueError(f"unknown node disruption action type {self.type!r}")
        if (self.type in _SERVICE_KEY) != (self.service is not None):
            need = "needs a" if self.type in _SERVICE_KEY else "takes no"
            raise ValueError(f"{self.type} action {need} service")

    def to_api(self) -> dict[str, object]:
        """The API form, e.g. ``{"type": "Reload", "reload": {"serviceName": "crio.service"}}``."""
        out: dict[str, object] = {"type": self.type}
        key = _SERVICE_KEY.get(self.type)
        if key is not None:
            out[key] = {"serviceName": self.service}
        return out

    def __str__(self) -> str:
        return f"{self.type} {self.service}" if self.service else self.type

    @classmethod
    def from_api(cls, obj: object, path: JsonPath, *, allow_special: bool = True) -> Action:
        """Parse one API action at `path`; raises `PolicyError` with located findings.

        `allow_special=False` applies the spec enum (users may not set ``Special``).
        """
        allowed = STATUS_ACTION_TYPES if allow_special else SPEC_ACTION_TYPES
        action, findings = _parse_action(obj, path, allowed)
        if findings or action is None:
            raise PolicyError(findings)
        return action


@dataclass(frozen=True)
class FilePolicy:
    """Actions for changes to `path` or anything below it; `origin` is default, user or cluster."""

    path: str
    actions: tuple[Action, ...]
    origin: str


@dataclass(frozen=True)
class UnitPolicy:
    """Actions for changes to the systemd unit `name` (exact match)."""

    name: str
    actions: tuple[Action, ...]
    origin: str


@dataclass(frozen=True)
class ClusterPolicies:
    """The effective policies: the shape of ``status.nodeDisruptionPolicyStatus.clusterPolicies``."""

    files: tuple[FilePolicy, ...]
    units: tuple[UnitPolicy, ...]
    sshkey: tuple[Action, ...]
    sshkey_origin: str

    def to_api(self) -> dict[str, object]:
        """The API (status) form of these policies."""
        return {
            "files": [{"path": f.path, "actions": [a.to_api() for a in f.actions]} for f in self.files],
            "units": [{"name": u.name, "actions": [a.to_api() for a in u.actions]} for u in self.units],
            "sshkey": {"actions": [a.to_api() for a in self.sshkey]},
        }


def _reload(service: str) -> Action:
    return Action(RELOAD, service)


def _restart(service: str) -> Action:
    return Action(RESTART, service)


def _default_file(path: str, *actions: Action) -> FilePolicy:
    return FilePolicy(path, actions, "default")


_CRIO = "crio.service"
_CA_TRUST = "coreos-update-ca-trust.service"
_KUBELET = "kubelet.service"
_IRI = "iri-registry.service"

# The operator's built-in policies (MCO pkg/apihelpers defaultClusterPolicies), in its order:
# order matters because a user entry replaces a default one in place and ties in the longest-path
# match go to the earlier entry.
DEFAULT_POLICIES = ClusterPolicies(
    files=(
        _default_file("/var/lib/kubelet/config.json", Action(NONE)),
        _default_file("/etc/machine-config-daemon/no-reboot/containers-gpg.pub", _reload(_CRIO)),
        _default_file("/etc/containers/policy.json", _reload(_CRIO)),
        # Special = reload crio, draining only if the registries.conf change is unsafe
        _default_file("/etc/containers/registries.conf", Action(SPECIAL)),
        _default_file("/etc/containers/registries.d", _reload(_CRIO)),
        _default_file("/etc/crio/policies", _reload(_CRIO)),
        _default_file("/etc/nmstate/openshift", Action(NONE)),
        _default_file(
            "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt",
            _restart(_CA_TRUST),
            _restart(_CRIO),
        ),
        _default_file("/etc/kubernetes/credential-providers", _restart(_KUBELET)),
        _default_file(
            "/etc/systemd/system/kubelet.service.d/40-kubelet-crio-image-credential-provider.conf",
            Action(DAEMON_RELOAD),
            _restart(_KUBELET),
        ),
        _default_file("/etc/iri-registry", _restart(_IRI)),
        _default_file("/usr/local/bin/load-registry-image.sh", _restart(_IRI)),
        _default_file("/etc/pki/ca-trust/source/anchors/iri-root-ca.crt", _restart(_CA_TRUST)),
    ),
    units=(UnitPolicy(_IRI, (Action(DAEMON_RELOAD), _restart(_IRI)), "default"),),
    sshkey=(Action(NONE),),
    sshkey_origin="default",
)

# --------------------------------------------------------------------------------------------
# Parsing and validation of API documents (collects every finding, never stops at the first)
# --------------------------------------------------------------------------------------------


def _type_finding(path: JsonPath, value: object, want: str) -> Finding:
    return Finding(path, f"Invalid value: {_show(value)}: must be of type {want}")


def _show(value: object) -> str:
    try:
        return json.dumps(value, sort_keys=True)
    except (TypeError, ValueError):
        return repr(value)


def _service_name_findings(value: object, path: JsonPath) -> list[Finding]:
    """The API's checks on a ``NodeDisruptionPolicyServiceName`` (unit names and serviceName fields)."""
    if not isinstance(value, str):
        return [_type_finding(path, value, "string")]
    findings: list[Finding] = []
    if len(value.encode()) > MAX_SERVICE_NAME:
        findings.append(Finding(path, f"Too long: may not be more than {MAX_SERVICE_NAME} bytes"))
    if not _SERVICE_SUFFIX_RE.search(value):
        findings.append(Finding(path, MSG_BAD_SUFFIX))
    if not _SERVICE_NAME_RE.search(value):
        findings.append(Finding(path, MSG_BAD_NAME))
    return findings


def _parse_action(obj: object, path: JsonPath, allowed: Sequence[str]) -> tuple[Action | None, list[Finding]]:
    if not isinstance(obj, Mapping):
        return None, [_type_finding(path, obj, "object")]
    kind = obj.get("type")
    if kind is None:
        return None, [Finding((*path, "type"), "Required value")]
    if kind not in allowed:
        supported = ", ".join(f'"{t}"' for t in allowed)
        message = f"Unsupported value: {_show(kind)}: supported values: {supported}"
        return None, [Finding((*path, "type"), message)]
    findings: list[Finding] = []
    service: str | None = None
    for t, key in _SERVICE_KEY.items():
        present = obj.get(key) is not None
        if present != (kind == t):
            # the API reports the one-of rule on the action object itself
            findings.append(Finding(path, _UNION_MSG[t]))
        elif present:
            member = obj[key]
            if not isinstance(member, Mapping):
                findings.append(_type_finding((*path, key), member, "object"))
            elif member.get("serviceName") is None:
                findings.append(Finding((*path, key, "serviceName"), "Required value"))
            else:
                name_findings = _service_name_findings(member["serviceName"], (*path, key, "serviceName"))
                findings += name_findings
                if not name_findings:
                    service = member["serviceName"]
    if findings:
        return None, findings
    return Action(str(kind), service), []


def _parse_actions(
    obj: object, path: JsonPath, allowed: Sequence[str]
) -> tuple[tuple[Action, ...], list[Finding]]:
    if not isinstance(obj, list):
        return (), [_type_finding(path, obj, "array")]
    findings: list[Finding] = []
    if len(obj) > MAX_ACTIONS:
        findings.append(Finding(path, f"Too many: {len(obj)}: must have at most {MAX_ACTIONS} items"))
    actions: list[Action] = []
    for i, item in enumerate(obj):
        action, item_findings = _parse_action(item, (*path, i), allowed)
        findings += item_findings
        if action is not None:
            actions.append(action)
    types = [item.get("type") for item in obj if isinstance(item, Mapping)]
    if REBOOT in types and len(obj) != 1:
        findings.append(Finding(path, MSG_REBOOT_ALONE))
    if NONE in types and len(obj) != 1:
        findings.append(Finding(path, MSG_NONE_ALONE))
    return tuple(actions), findings


def _entries(
    obj: Mapping[str, object], key: str, path: JsonPath, limit: int
) -> tuple[list[object], list[Finding]]:
    """The list under `key` (absent or null = empty), with the type and MaxItems checks."""
    value = obj.get(key)
    if value is None:
        return [], []
    if not isinstance(value, list):
        return [], [_type_finding((*path, key), value, "array")]
    findings: list[Finding] = []
    if len(value) > limit:
        findings.append(Finding((*path, key), f"Too many: {len(value)}: must have at most {limit} items"))
    return value, findings


def _parse_document(
    obj: object, path: JsonPath, *, status: bool, origin: str
) -> tuple[ClusterPolicies | None, list[Finding]]:
    """Parse a spec ``nodeDisruptionPolicy`` or a status ``clusterPolicies`` object.

    A missing or empty sshkey action list gives ``sshkey=()`` (the caller decides what that means).
    """
    if not isinstance(obj, Mapping):
        return None, [_type_finding(path, obj, "object")]
    allowed = STATUS_ACTION_TYPES if status else SPEC_ACTION_TYPES
    limit = MAX_STATUS_ENTRIES if status else MAX_SPEC_ENTRIES
    findings: list[Finding] = []

    files: list[FilePolicy] = []
    items, found = _entries(obj, "files", path, limit)
    findings += found
    seen: set[str] = set()
    for i, item in enumerate(items):
        at: JsonPath = (*path, "files", i)
        if not isinstance(item, Mapping):
            findings.append(_type_finding(at, item, "object"))
            continue
        file_path = item.get("path")
        if file_path is None:
            findings.append(Finding((*at, "path"), "Required value"))
        elif not isinstance(file_path, str):
            findings.append(_type_finding((*at, "path"), file_path, "string"))
        elif not file_path.startswith("/"):
            # Not an API rule upstream; a relative path could never match an Ignition file path.
            message = f"Invalid value: {_show(file_path)}: must be an absolute path"
            findings.append(Finding((*at, "path"), message))
        elif file_path in seen:
            # listType=map keyed by path: the API server refuses duplicate keys
            findings.append(Finding((*at, "path"), f"Duplicate value: {_show({'path': file_path})}"))
        else:
            seen.add(file_path)
        if item.get("actions") is None:
            findings.append(Finding((*at, "actions"), "Required value"))
            continue
        actions, found = _parse_actions(item["actions"], (*at, "actions"), allowed)
        findings += found
        if isinstance(file_path, str):
            files.append(FilePolicy(file_path, actions, origin))

    units: list[UnitPolicy] = []
    items, found = _entries(obj, "units", path, limit)
    findings += found
    seen = set()
    for i, item in enumerate(items):
        at = (*path, "units", i)
        if not isinstance(item, Mapping):
            findings.append(_type_finding(at, item, "object"))
            continue
        name = item.get("name")
        if name is None:
            findings.append(Finding((*at, "name"), "Required value"))
        else:
            findings += _service_name_findings(name, (*at, "name"))
            if isinstance(name, str) and name in seen:
                findings.append(Finding((*at, "name"), f"Duplicate value: {_show({'name': name})}"))
            elif isinstance(name, str):
                seen.add(name)
        if item.get("actions") is None:
            findings.append(Finding((*at, "actions"), "Required value"))
            continue
        actions, found = _parse_actions(item["actions"], (*at, "actions"), allowed)
        findings += found
        if isinstance(name, str):
            units.append(UnitPolicy(name, actions, origin))

    sshkey: tuple[Action, ...] = ()
    ssh_obj = obj.get("sshkey")
    if ssh_obj is not None:
        if not isinstance(ssh_obj, Mapping):
            findings.append(_type_finding((*path, "sshkey"), ssh_obj, "object"))
        elif ssh_obj.get("actions") is not None:
            # Go clients always serialise `sshkey: {actions: null}`; treat null like absent
            sshkey, found = _parse_actions(ssh_obj["actions"], (*path, "sshkey", "actions"), allowed)
            findings += found

    errors = [f for f in findings if f.severity == "error"]
    if errors:
        return None, findings
    return ClusterPolicies(tuple(files), tuple(units), sshkey, origin), findings


def merge_policies(defaults: ClusterPolicies, user: Mapping[str, object], path: JsonPath) -> ClusterPolicies:
    """Merge a ``spec.nodeDisruptionPolicy`` object over `defaults` the way the operator does.

    A user file (unit) whose path (name) equals a default entry's replaces that entry in place;
    any other is appended in the user's order. The user's sshkey actions replace the default ones
    only when non-empty. Raises `PolicyError` (findings located under `path`) for invalid input.
    """
    parsed, findings = _parse_document(user, path, status=False, origin="user")
    if parsed is None:
        raise PolicyError(findings)
    files = list(defaults.files)
    for entry in parsed.files:
        # Only default entries are candidates for replacement (exact string equality, as upstream).
        index = next((i for i, d in enumerate(defaults.files) if d.path == entry.path), None)
        if index is None:
            files.append(entry)
        else:
            files[index] = entry
    units = list(defaults.units)
    for unit in parsed.units:
        index = next((i for i, d in enumerate(defaults.units) if d.name == unit.name), None)
        if index is None:
            units.append(unit)
        else:
            units[index] = unit
    if parsed.sshkey:
        return ClusterPolicies(tuple(files), tuple(units), parsed.sshkey, "user")
    return ClusterPolicies(tuple(files), tuple(units), defaults.sshkey, defaults.sshkey_origin)


def parse_cluster_policies(obj: object, path: JsonPath = ()) -> ClusterPolicies:
    """Parse a ``clusterPolicies`` status object as the daemon uses it: as is, no merging.

    Entries identical (same key and actions) to a default entry keep origin ``default``; the rest
    are ``cluster``. An empty sshkey list stays empty (the daemon then adds no action for SSH changes).
    """
    parsed, findings = _parse_document(obj, path, status=True, origin="cluster")
    if parsed is None:
        raise PolicyError(findings)
    default_files = {(f.path, f.actions) for f in DEFAULT_POLICIES.files}
    default_units = {(u.name, u.actions) for u in DEFAULT_POLICIES.units}
    return ClusterPolicies(
        files=tuple(
            FilePolicy(f.path, f.actions, "default" if (f.path, f.actions) in default_files else "cluster")
            for f in parsed.files
        ),
        units=tuple(
            UnitPolicy(u.name, u.actions, "default" if (u.name, u.actions) in default_units else "cluster")
            for u in parsed.units
        ),
        sshkey=parsed.sshkey,
        sshkey_origin="default" if parsed.sshkey == DEFAULT_POLICIES.sshkey else "cluster",
    )


def policies_from_machineconfiguration(obj: Mapping[str, object]) -> ClusterPolicies:
    """The effective policies of a ``MachineConfiguration`` object.

    ``status.nodeDisruptionPolicyStatus.clusterPolicies``, when present, is used as is (that is
    what the daemon reads); otherwise `DEFAULT_POLICIES` merged with ``spec.nodeDisruptionPolicy``
    (what the operator would publish). Both parts are validated when present, with the spec limits
    (≤50 entries, no ``Special``) and the status limits (≤100 entries); every problem is reported
    in one `PolicyError`.
    """
    findings: list[Finding] = []
    spec = obj.get("spec")
    user: object = {}
    if spec is not None:
        if isinstance(spec, Mapping):
            ndp_spec = spec.get("nodeDisruptionPolicy")
            user = {} if ndp_spec is None else ndp_spec
        else:
            findings.append(_type_finding(("spec",), spec, "object"))
    user_path: JsonPath = ("spec", "nodeDisruptionPolicy")
    _, found = _parse_document(user, user_path, status=False, origin="user")
    findings += found

    cluster: object = None
    status = obj.get("status")
    status_path: JsonPath = ("status", "nodeDisruptionPolicyStatus", "clusterPolicies")
    if isinstance(status, Mapping):
        ndp_status = status.get("nodeDisruptionPolicyStatus")
        if isinstance(ndp_status, Mapping):
            cluster = ndp_status.get("clusterPolicies")
        elif ndp_status is not None:
            findings.append(_type_finding(status_path[:2], ndp_status, "object"))
    elif status is not None:
        findings.append(_type_finding(("status",), status, "object"))
    if cluster is not None:
        _, found = _parse_document(cluster, status_path, status=True, origin="cluster")
        findings += found

    if any(f.severity == "error" for f in findings):
        raise PolicyError(findings)
    if cluster is not None:
        return parse_cluster_policies(cluster, status_path)
    assert isinstance(user, Mapping)  # a non-mapping produced a finding above
    return merge_policies(DEFAULT_POLICIES, user, user_path)


# --------------------------------------------------------------------------------------------
# Node disruption decisions
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    """The actions one changed thing (file, unit, SSH keys) contributes, and the rule that gave them."""

    actions: tuple[Action, ...]
    rule: str
    # False when no policy matched and the default Reboot applied
    matched: bool = True


def _go_clean(path: str) -> str:
    """Go's ``filepath.Clean`` on a slash path (``posixpath.normpath`` keeps a leading ``//``)."""
    cleaned = posixpath.normpath(path)
    return "/" + cleaned.lstrip("/") if cleaned.startswith("//") else cleaned


def _go_dir(path: str) -> str:
    """Go's ``filepath.Dir``: everything before the last slash, cleaned."""
    return _go_clean(path[: path.rfind("/") + 1])


def _is_under(directory: str, target: str) -> bool:
    # As upstream IsSubdirectory: clean both, then a plain string-prefix test on "dir/". A policy
    # path "/" therefore never matches as a parent (its prefix would be "//").
    return _go_clean(target).startswith(_go_clean(directory) + "/")


def file_decision(path: str, policies: ClusterPolicies) -> Decision:
    """Actions for a changed file: the policy with the longest path equal to it or a parent of it.

    Parents match at any depth; equal-length ties go to the earlier entry; no match ⇒ Reboot.
    """
    best: FilePolicy | None = None
    for policy in policies.files:
        # Length is compared on the raw policy path, and only a strictly longer one wins, as upstream.
        if (path == policy.path or _is_under(policy.path, path)) and (
            best is None or len(policy.path) > len(best.path)
        ):
            best = policy
    if best is None:
        return Decision((Action(REBOOT),), f"no policy for {path}: reboot", matched=False)
    return Decision(best.actions, f"{best.origin} policy {best.path}")


def unit_decision(name: str, policies: ClusterPolicies) -> Decision:
    """Actions for a changed (added, updated or removed) unit: exact name match; none ⇒ Reboot."""
    for policy in policies.units:
        if policy.name == name:
            return Decision(policy.actions, f"unit policy {name} ({policy.origin})")
    return Decision((Action(REBOOT),), f"no policy for unit {name}: reboot", matched=False)


def sshkey_decision(policies: ClusterPolicies) -> Decision:
    """Actions for a passwd (SSH keys / password hash) change: the sshkey policy."""
    return Decision(policies.sshkey, f"sshkey policy ({policies.sshkey_origin})")


def combine_actions(actions: Iterable[Action]) -> tuple[Action, ...]:
    """Fold the per-path action lists (already concatenated in order) into the final list.

    Any Reboot ⇒ ``(Reboot,)``. If None appears with any other action, the Nones are dropped; if
    only Nones appear ⇒ ``(None,)``. Otherwise the list is kept as is: same order, duplicates kept
    (two files reloading crio reload it twice, as upstream). An empty list stays empty, as upstream
    (possible only with an empty policy action list; `mcd.plan` maps "nothing changed" to None itself).
    """
    collected = tuple(actions)
    types = {a.type for a in collected}
    if REBOOT in types:
        return (Action(REBOOT),)
    if NONE in types:
        if types - {NONE}:
            return tuple(a for a in collected if a.type != NONE)
        return (Action(NONE),)
    return collected


def actions_for_changes(
    files: Iterable[str], units: Iterable[str], passwd_changed: bool, policies: ClusterPolicies
) -> tuple[tuple[Action, ...], tuple[Decision, ...]]:
    """Final NDP actions for changed file paths, unit names and an SSH/passwd change, plus why.

    Per-path part only (see the module docstring): files first, then units, then sshkey.
    """
    decisions = (
        *(file_decision(p, policies) for p in files),
        *(unit_decision(u, policies) for u in units),
        *((sshkey_decision(policies),) if passwd_changed else ()),
    )
    return combine_actions(a for d in decisions for a in d.actions), decisions


def ndp_drain_required(actions: Sequence[Action], registries_change_safe: Callable[[], bool]) -> bool:
    """Whether the node must be drained before applying `actions`.

    Reboot or Drain ⇒ yes. Else Special (registries.conf) ⇒ only if the registries.conf change is
    not safe — `registries_change_safe` is called only then (it may parse TOML; the caller folds in
    the image-registry drain-override ConfigMap). Anything else ⇒ no.
    """
    types = {a.type for a in actions}
    if types & {REBOOT, DRAIN}:
        return True
    if SPECIAL in types:
        return not registries_change_safe()
    return False


# --------------------------------------------------------------------------------------------
# Legacy table (firstboot, once-from, HyperShift)
# --------------------------------------------------------------------------------------------

LEGACY_NONE = "none"
LEGACY_RELOAD_CRIO = "reload crio"
LEGACY_RESTART_CRIO = "restart crio"
LEGACY_REBOOT = "reboot"

REGISTRIES_CONF = "/etc/containers/registries.conf"
_LEGACY_NO_CHANGE_FILES = ("/etc/kubernetes/kubelet-ca.crt", "/var/lib/kubelet/config.json")
_LEGACY_RELOAD_FILES = (
    REGISTRIES_CONF,
    "/etc/machine-config-daemon/no-reboot/containers-gpg.pub",
    "/etc/containers/policy.json",
)
_LEGACY_RELOAD_DIRS = ("/etc/containers/registries.d",)
_LEGACY_RESTART_FILES = ("/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt",)
_LEGACY_NO_CHANGE_DIRS = ("/etc/nmstate/openshift",)


@dataclass(frozen=True)
class LegacyDecision:
    """The legacy action for one changed file; `action` None means "leaves the result unchanged"."""

    action: str | None
    rule: str


def legacy_file_decision(path: str) -> LegacyDecision:
    """Legacy action for one changed file path (rules tried in upstream's order).

    Directory rules match direct children only (the cleaned parent directory must equal the rule),
    unlike NDP's any-depth parent matching.
    """
    parent = _go_dir(path)
    if path in _LEGACY_NO_CHANGE_FILES:
        return LegacyDecision(None, f"legacy: {path} needs no action")
    if path in _LEGACY_RELOAD_FILES:
        return LegacyDecision(LEGACY_RELOAD_CRIO, f"legacy: {path}: reload crio")
    if parent in _LEGACY_RELOAD_DIRS:
        return LegacyDecision(LEGACY_RELOAD_CRIO, f"legacy: file in {parent}: reload crio")
    if path in _LEGACY_RESTART_FILES:
        return LegacyDecision(LEGACY_RESTART_CRIO, f"legacy: {path}: restart crio")
    if parent in _LEGACY_NO_CHANGE_DIRS:
        return LegacyDecision(None, f"legacy: file in {parent} needs no action")
    return LegacyDecision(LEGACY_REBOOT, f"legacy: no rule for {path}: reboot")


def combine_legacy(decisions: Iterable[LegacyDecision]) -> list[str]:
    """Fold legacy decisions as upstream does while walking the changed files.

    Start ``["none"]``; reload crio replaces the result unless restart crio was already chosen;
    restart crio replaces it; the first reboot ends the walk with ``["reboot"]``.
    """
    actions = [LEGACY_NONE]
    for decision in decisions:
        if decision.action in (None, LEGACY_NONE):
            continue
        if decision.action == LEGACY_RELOAD_CRIO:
            if LEGACY_RESTART_CRIO not in actions:
                actions = [LEGACY_RELOAD_CRIO]
        elif decision.action == LEGACY_RESTART_CRIO:
            actions = [LEGACY_RESTART_CRIO]
        elif decision.action == LEGACY_REBOOT:
            return [LEGACY_REBOOT]
        else:
            raise ValueError(f"unknown legacy action {decision.action!r}")
    return actions


def legacy_actions_for_files(paths: Iterable[str]) -> tuple[list[str], tuple[LegacyDecision, ...]]:
    """Legacy actions for changed file paths, plus the per-path decisions (per-path part only)."""
    decisions = tuple(legacy_file_decision(p) for p in paths)
    return combine_legacy(decisions), decisions


def legacy_drain_required(
    actions: Sequence[str], registries_changed: bool, registries_change_safe: Callable[[], bool]
) -> bool:
    """Whether the node must be drained before applying legacy `actions`.

    reboot ⇒ yes; reload/restart crio ⇒ only when registries.conf changed and the change is not
    safe; none ⇒ no; anything else (including an empty list) ⇒ yes, upstream's safe default.
    """
    if LEGACY_REBOOT in actions:
        return True
    if LEGACY_RELOAD_CRIO in actions or LEGACY_RESTART_CRIO in actions:
        return registries_changed and not registries_change_safe()
    return LEGACY_NONE not in actions
