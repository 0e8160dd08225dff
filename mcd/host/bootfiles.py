"""What the node's first boot leaves behind, retired by the agent's first sync (upstream's boot path).

* The encapsulated MachineConfig the Machine Config Server put in the Ignition
  (`/etc/ignition-machine-config-encapsulated.json`): the firstboot service renames it to
  `.bak` once applied. Still there when the agent starts means the firstboot service never
  finished (upstream's `upgradeHackFor44AndBelow`, rhbz#1842906); the agent renames it
  likewise, so nothing takes it for work still to do.
* Ignition's systemd preset `/etc/systemd/system-preset/20-ignition.preset`: it enables the
  units of the install-time config; left in place, a later `systemctl preset` would put those
  back over what later configs asked for (upstream's `removeIgnitionArtifacts`).

Both changes are a rename or an unlink followed by an fsync of the directory.
"""

from __future__ import annotations

import os

from mcd.host import atomicfs
from mcd.host.errors import os_error_text
from mcd.host.root import HostRoot

ENCAPSULATED_CONFIG = "/etc/ignition-machine-config-encapsulated.json"
IGNITION_PRESET = "/etc/systemd/system-preset/20-ignition.preset"


class BootFileError(RuntimeError):
    """A leftover of the first boot could not be retired (upstream's error text)."""


def retire_encapsulated_config(root: HostRoot, path: str = ENCAPSULATED_CONFIG) -> bool:
    """Rename the encapsulated config at `path` to `<path>.bak` (the rename made durable).

    True when there was one. As upstream, only a path that can be stat'ed (a link to a file
    counts) is renamed, the entry itself; one that cannot (missing, a dangling link) is left.
    """
    src = root.join(path)
    try:
        os.stat(src)
    except OSError:
        return False
    try:
        os.replace(src, root.join(path + ".bak"))
        atomicfs.fsync_dir(src.parent)
    except OSError as exc:
        raise BootFileError(
            f"failed to rename encapsulated MachineConfig after processing on firstboot: {os_error_text(exc)}"
        ) from None
    return True


def remove_ignition_preset(root: HostRoot) -> bool:
    """Remove Ignition's preset file; True when there was one."""
    try:
        return atomicfs.remove(root.join(IGNITION_PRESET))
    except OSError as exc:
        raise BootFileError(
            f"failed to remove Ignition-written systemd preset file: {os_error_text(exc)}"
        ) from None
