"""NodeDisruptionPolicy types, the API's limits and messages, and the defaults. Pure: no I/O."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence

from mcd.config.findings import Finding, format_path
from mcd.config.record import field, record

# --------------------------------------------------------------------------------------------
# Action types and API constraints (openshift/api operator/v1 types_machineconfiguration.go)
# --------------------------------------------------------------------------------------------

# the one file with a special action (reload crio, drain only when the change is unsafe): the default
# policy, the legacy table and the planner's safety check all name it
REGISTRIES_CONF = "/etc/containers/registries.conf"

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
SERVICE_KEY = {RELOAD: "reload", RESTART: "restart"}

MAX_SPEC_ENTRIES = 50
MAX_STATUS_ENTRIES = 100
MAX_ACTIONS = 10
MAX_SERVICE_NAME = 255

# The API's two CEL rules on service names. CEL `matches` is an unanchored RE2 search, so the
# name rule only constrains the start of the string; `\Z` because RE2's `$` never matches before
# a trailing newline, unlike Python's.
SERVICE_SUFFIX_RE = re.compile(
    r"\.(service|socket|device|mount|automount|swap|target|path|timer|snapshot|slice|scope)\Z"
)
SERVICE_NAME_RE = re.compile(r"^[a-zA-Z0-9:._\\-]+\..")

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
UNION_MSG = {RELOAD: MSG_RELOAD_UNION, RESTART: MSG_RESTART_UNION}


class PolicyError(ValueError):
    """A NodeDisruptionPolicy document, or a MachineConfiguration object, the API server would
    reject; carries the findings, located in the document. `subject` (e.g. "MachineConfiguration
    cluster") starts the message when given."""

    def __init__(self, findings: Sequence[Finding], subject: str = "") -> None:
        self.findings = tuple(findings)
        text = "; ".join(f"{format_path(f.path)}: {f.message}" for f in self.findings)
        super().__init__(f"{subject}: {text}" if subject else text)


@record
class Action:
    """One NodeDisruptionPolicy action; `service` is set exactly for Reload and Restart."""

    type: str
    service: str | None = None

    def __post_init__(self) -> None:
        # Guards against building an action the API could never hold (typos in code, not user input).
        if self.type not in STATUS_ACTION_TYPES:
            raise ValueError(f"unknown node disruption action type {self.type!r}")
        if (self.type in SERVICE_KEY) != (self.service is not None):
            need = "needs a" if self.type in SERVICE_KEY else "takes no"
            raise ValueError(f"{self.type} action {need} service")

    def to_api(self) -> dict[str, object]:
        """The API form, e.g. ``{"type": "Reload", "reload": {"serviceName": "crio.service"}}``."""
        out: dict[str, object] = {"type": self.type}
        key = SERVICE_KEY.get(self.type)
        if key is not None:
            out[key] = {"serviceName": self.service}
        return out

    def __str__(self) -> str:
        return f"{self.type} {self.service}" if self.service else self.type


def go_clean(path: str) -> str:
    """Go's ``filepath.Clean`` on a slash path (``posixpath.normpath`` keeps a leading ``//``)."""
    cleaned = posixpath.normpath(path)
    return "/" + cleaned.lstrip("/") if cleaned.startswith("//") else cleaned


@record
class FilePolicy:
    """Actions for changes to `path` or anything below it; `origin` is default, user or cluster."""

    path: str
    actions: tuple[Action, ...]
    origin: str
    # `path` cleaned, with the "/" that starts its children: what a changed file's cleaned path
    # must start with to be below it (built with the policy, not for each changed file)
    prefix: str = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "prefix", go_clean(self.path) + "/")


@record
class UnitPolicy:
    """Actions for changes to the systemd unit `name` (exact match)."""

    name: str
    actions: tuple[Action, ...]
    origin: str


@record
class ClusterPolicies:
    """The effective policies: the shape of ``status.nodeDisruptionPolicyStatus.clusterPolicies``."""

    files: tuple[FilePolicy, ...]
    units: tuple[UnitPolicy, ...]
    sshkey: tuple[Action, ...]
    sshkey_origin: str
    # every file policy's path and its children's prefix, for one C call telling whether any
    # policy can match a changed path at all (most changed files match none)
    file_paths: frozenset[str] = field(init=False, compare=False, repr=False)
    file_prefixes: tuple[str, ...] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "file_paths", frozenset(f.path for f in self.files))
        object.__setattr__(self, "file_prefixes", tuple(f.prefix for f in self.files))

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
        _default_file(REGISTRIES_CONF, Action(SPECIAL)),
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
