"""The os-release of a node's root, and the base OS version upstream reads from it.

Upstream decides by this version where a step applies: NIC-name pinning on EL 9 and its clean-up
on EL 10 (`mcd.host.nicnames`), the node's own bootloader unit on EL 9.6 and later
(`mcd.host.bootloader`).
"""

from __future__ import annotations

from mcd.host import atomicfs
from mcd.host.root import HostRoot, PathEscapeError

OS_RELEASE_PATHS = ("/etc/os-release", "/usr/lib/os-release")


def read_os_release(root: HostRoot) -> str:
    """The root's os-release text ("" when it has none)."""
    for path in OS_RELEASE_PATHS:
        try:
            data = atomicfs.read_bytes_nofollow(root.join(path, follow_final=True))
        except (OSError, PathEscapeError):
            continue
        if data is not None:
            return data.decode("utf-8", errors="replace")
    return ""


def os_version(os_release: str) -> tuple[int, int]:
    """The base OS (major, minor) of an os-release text as upstream reads it: RHEL_VERSION, else
    VERSION without the OpenShift release prefix, else VERSION_ID; -1 for a part not a number."""
    fields: dict[str, str] = {}
    for line in os_release.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            fields[key.strip()] = value.strip().strip("\"'")
    version = fields.get("VERSION_ID", "")
    prefix = fields.get("OPENSHIFT_VERSION", "").replace(".", "") + "."
    if "RHEL_VERSION" in fields:
        version = fields["RHEL_VERSION"]
    elif "OPENSHIFT_VERSION" in fields and fields.get("VERSION", "").startswith(prefix):
        version = fields["VERSION"].replace(prefix, "")
    parts = version.split(".", 2)
    major = int(parts[0]) if parts[0].isdigit() else -1
    minor = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else -1
    return major, minor
