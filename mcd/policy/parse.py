"""Parsing and validation of NodeDisruptionPolicy documents (every finding, never only the first),
and what mcd takes from a MachineConfiguration object (`settings_from_machineconfiguration`). Pure."""

from __future__ import annotations

import json
from collections import namedtuple
from collections.abc import Mapping, Sequence

from mcd.config.findings import Finding, InputError, JsonPath
from mcd.config.machineconfiguration import KIND, MachineConfiguration
from mcd.config.overrides import storage_overrides
from mcd.policy.model import (
    DEFAULT_POLICIES,
    MAX_ACTIONS,
    MAX_SERVICE_NAME,
    MAX_SPEC_ENTRIES,
    MAX_STATUS_ENTRIES,
    MSG_BAD_NAME,
    MSG_BAD_SUFFIX,
    MSG_NONE_ALONE,
    MSG_REBOOT_ALONE,
    NONE,
    REBOOT,
    SERVICE_KEY,
    SERVICE_NAME_RE,
    SERVICE_SUFFIX_RE,
    SPEC_ACTION_TYPES,
    STATUS_ACTION_TYPES,
    UNION_MSG,
    Action,
    ClusterPolicies,
    FilePolicy,
    PolicyError,
    UnitPolicy,
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
    if not SERVICE_SUFFIX_RE.search(value):
        findings.append(Finding(path, MSG_BAD_SUFFIX))
    if not SERVICE_NAME_RE.search(value):
        findings.append(Finding(path, MSG_BAD_NAME))
    return findings


def parse_action(obj: object, path: JsonPath, allowed: Sequence[str]) -> tuple[Action | None, list[Finding]]:
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
    for t, key in SERVICE_KEY.items():
        present = obj.get(key) is not None
        if present != (kind == t):
            # the API reports the one-of rule on the action object itself
            findings.append(Finding(path, UNION_MSG[t]))
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
        action, item_findings = parse_action(item, (*path, i), allowed)
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
    obj: object, path: JsonPath, *, status: bool
) -> tuple[ClusterPolicies | None, list[Finding]]:
    """Parse a spec ``nodeDisruptionPolicy`` (origin user) or a status ``clusterPolicies`` (cluster).

    A missing or empty sshkey action list gives ``sshkey=()`` (the caller decides what that means).
    """
    if not isinstance(obj, Mapping):
        return None, [_type_finding(path, obj, "object")]
    origin = "cluster" if status else "user"
    allowed = STATUS_ACTION_TYPES if status else SPEC_ACTION_TYPES
    limit = MAX_STATUS_ENTRIES if status else MAX_SPEC_ENTRIES

    files, findings = _file_policies(obj, path, limit, allowed, origin)
    units, found = _unit_policies(obj, path, limit, allowed, origin)
    findings += found
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


def _file_policies(
    obj: Mapping[str, object], path: JsonPath, limit: int, allowed: Sequence[str], origin: str
) -> tuple[list[FilePolicy], list[Finding]]:
    """The `files` entries of a policy document, and what is wrong with them."""
    files: list[FilePolicy] = []
    items, findings = _entries(obj, "files", path, limit)
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
    return files, findings


def _unit_policies(
    obj: Mapping[str, object], path: JsonPath, limit: int, allowed: Sequence[str], origin: str
) -> tuple[list[UnitPolicy], list[Finding]]:
    """The `units` entries of a policy document, and what is wrong with them."""
    units: list[UnitPolicy] = []
    items, findings = _entries(obj, "units", path, limit)
    seen: set[str] = set()
    for i, item in enumerate(items):
        at: JsonPath = (*path, "units", i)
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
    return units, findings


def merge_policies(defaults: ClusterPolicies, user: Mapping[str, object], path: JsonPath) -> ClusterPolicies:
    """Merge a ``spec.nodeDisruptionPolicy`` object over `defaults` the way the operator does.

    A user file (unit) whose path (name) equals a default entry's replaces that entry in place;
    any other is appended in the user's order. The user's sshkey actions replace the default ones
    only when non-empty. Raises `PolicyError` (findings located under `path`) for invalid input.
    """
    parsed, findings = _parse_document(user, path, status=False)
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
    parsed, findings = _parse_document(obj, path, status=True)
    if parsed is None:
        raise PolicyError(findings)
    default_files = {(f.path, f.actions) for f in DEFAULT_POLICIES.files}
    default_units = {(u.name, u.actions) for u in DEFAULT_POLICIES.units}
    return ClusterPolicies(
        files=tuple(
            FilePolicy(f.path, f.actions, "default" if (f.path, f.actions) in default_files else f.origin)
            for f in parsed.files
        ),
        units=tuple(
            UnitPolicy(u.name, u.actions, "default" if (u.name, u.actions) in default_units else u.origin)
            for u in parsed.units
        ),
        sshkey=parsed.sshkey,
        sshkey_origin="default" if parsed.sshkey == DEFAULT_POLICIES.sshkey else parsed.sshkey_origin,
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
    _, found = _parse_document(user, user_path, status=False)
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
        _, found = _parse_document(cluster, status_path, status=True)
        findings += found

    if any(f.severity == "error" for f in findings):
        raise PolicyError(findings)
    if cluster is not None:
        return parse_cluster_policies(cluster)  # valid: checked above, with its path
    assert isinstance(user, Mapping)  # a non-mapping produced a finding above
    return merge_policies(DEFAULT_POLICIES, user, user_path)


TYPE_CHECKING = False  # not typing's: its import is a few ms of every short command
if TYPE_CHECKING:
    from typing import NamedTuple

    class Settings(NamedTuple):
        """What mcd takes from a MachineConfiguration object."""

        policies: ClusterPolicies
        # spec.irreconcilableValidationOverrides.storage: storage sections allowed to change in place
        storage_overrides: tuple[str, ...]

else:  # the same named tuple without typing.NamedTuple (typing's import: a short command's few ms)
    Settings = namedtuple("Settings", ("policies", "storage_overrides"))
    Settings.__doc__ = "What mcd takes from a MachineConfiguration object."


DEFAULT_SETTINGS = Settings(DEFAULT_POLICIES, ())


def settings_from_machineconfiguration(obj: Mapping[str, object] | None) -> Settings:
    """The node disruption policies and the storage overrides of a MachineConfiguration object
    (the defaults when there is none): the one reader of that object, for the cluster agent, the
    config directory and the command line.

    Anything the API server would refuse in either part is one PolicyError with every finding
    (paths inside the object), reading `MachineConfiguration NAME: PATH: message; …`.
    """
    if obj is None:
        return DEFAULT_SETTINGS
    findings: list[Finding] = []
    policies = DEFAULT_POLICIES
    try:
        policies = policies_from_machineconfiguration(obj)
    except PolicyError as exc:
        findings += exc.findings
    overrides, bad = storage_overrides(obj)
    findings += bad
    if findings:
        meta = obj.get("metadata")
        name = meta.get("name") if isinstance(meta, Mapping) else None
        raise PolicyError(findings, f"{KIND} {name}" if isinstance(name, str) and name else KIND)
    return Settings(policies, tuple(overrides))


def settings_of(machineconfiguration: MachineConfiguration) -> Settings:
    """`settings_from_machineconfiguration` of an object loaded from a file; InputError located in it."""
    try:
        return settings_from_machineconfiguration(machineconfiguration.obj)
    except PolicyError as exc:
        located = [f.located(machineconfiguration.path) for f in exc.findings]
        raise InputError(machineconfiguration.source, located) from None
