"""Paths the daemon manages and what the planner knows about them. Pure: no I/O.

Shared by the planner (which paths a step names) and the host layer (where it writes them),
so both spell a unit file, a dropin or a never-deleted certificate the same way.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Sequence

from mcd.config.ignition import File, Unit

UNIT_DIR = "/etc/systemd/system"
# the mode of every unit file and dropin the daemon writes (Ignition gives units no mode)
UNIT_FILE_MODE = 0o644
DEV_NULL = "/dev/null"
KUBECONFIG = "/etc/kubernetes/kubeconfig"
KUBELET_CA = "/etc/kubernetes/kubelet-ca.crt"
CLOUD_CA = "/etc/kubernetes/static-pod-resources/configmaps/cloud-config/ca-bundle.pem"
# the merged pull secret (internal registry + global) the certificate writer keeps on the node
INTERNAL_REGISTRY_PULL_SECRET = "/etc/mco/internal-registry-pull-secret.json"
FORCEFILE = "/run/machine-config-daemon-force"

# Certificates managed by the certificate writer: deleting them when an MC stops declaring them
# would leave the node without its CAs.
NEVER_DELETED = frozenset(
    {
        "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt",
        KUBELET_CA,
        CLOUD_CA,
    }
)
# Any file whose directory contains this (image registry CAs) is never deleted either.
IMAGE_CA_DIR = "/etc/docker/certs.d"
# Enablement symlinks leaked by older daemons (OCPBUGS-33694), removed on every prune.
LEAKED_SYMLINKS = (
    "/etc/systemd/system/network-online.target.requires/node-valid-hostname.service",
    "/etc/systemd/system/network-online.target.wants/ovs-configuration.service",
)


def unit_path(name: str) -> str:
    """Config path of unit file `name`."""
    return f"{UNIT_DIR}/{name}"


def dropin_path(unit: str, dropin: str) -> str:
    """Config path of dropin `dropin` of unit `unit`."""
    return f"{UNIT_DIR}/{unit}.d/{dropin}"


TYPE_CHECKING = False  # not typing's: its import is a few ms of every short command
# `Managed`: a named tuple, not a record: the drift monitor indexes every path of every config
# it is armed with (thousands) this way, and a tuple is made several times faster
if TYPE_CHECKING:
    from typing import NamedTuple

    class Managed(NamedTuple):
        """One path a config declares: a file, a unit file (or mask) or a dropin."""

        path: str
        order: int  # position in upstream's validation order: the reason names the first drifted path
        file: File | None = None
        unit: Unit | None = None
        dropin: str | None = None  # dropin contents ("" when the dropin must be absent)

else:  # the same named tuple without typing.NamedTuple (typing's import: a short command's few ms)
    Managed = namedtuple("Managed", ("path", "order", "file", "unit", "dropin"), defaults=(None, None, None))
    Managed.__doc__ = "One path a config declares: a file, a unit file (or mask) or a dropin."


def never_deleted(path: str) -> bool:
    """Whether pruning must leave `path` alone even when no config declares it any more."""
    return path in NEVER_DELETED or IMAGE_CA_DIR in path.rsplit("/", 1)[0]


def path_in_dropins(path: str, units: Sequence[Unit]) -> bool:
    """True when `path` is the dropin file of a dropin declared in `units`.

    Mirrors upstream's parsing: a `.conf` file under /etc/systemd/system whose directory name
    ends in `.d` names the unit (the directory name without `.d`).
    """
    if not path.startswith(UNIT_DIR) or not path.endswith(".conf"):
        return False
    segments = path.split("/")
    if len(segments) < 2:
        return False
    dropin, unit_dir = segments[-1], segments[-2]
    unit_name, dot, suffix = unit_dir.rpartition(".")
    if suffix != "d":
        return False
    if not dot:
        unit_name = ""
    return any(u.name == unit_name and any(d.name == dropin for d in u.dropins) for u in units)


INSTALL_HEADER = b"[Install]"


def install_section(text: bytes) -> tuple[bytes, ...]:
    """The lines of a unit file's [Install] section(s), stripped, without comments.

    Equal results mean the same [Install] semantics (the comparison is on text, so equivalent
    but differently written sections compare unequal: that only costs a disable). Blank lines
    are kept: one can end a continued line.
    """
    lines: list[bytes] = []
    inside = False
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith(b"[") and line.endswith(b"]"):
            inside = line == INSTALL_HEADER
            if inside:
                lines.append(line)  # two [Install] headers are not one
            continue
        if inside and not line.startswith((b"#", b";")):
            lines.append(line)
    return tuple(lines)


def is_static(contents: str | None, dropins: tuple[str | None, ...] = ()) -> bool:
    """Whether a unit file (with its dropins) has no installation config: systemd calls such a
    unit `static`; `systemctl enable` has nothing to do for it, and `is-enabled` says "static".

    A header alone installs nothing: only an entry in an [Install] section does.
    """
    if not contents:
        return False
    return not any(
        line != INSTALL_HEADER and line for text in (contents, *dropins) if text
        for line in install_section(text.encode())
    )
