"""The daemon's own records on the node: the applied config and the update in progress.

`/etc/machine-config-daemon/currentconfig` holds the MachineConfig last applied (JSON, as
upstream) and `currentimage` its layered OS image; they are written just before a reboot, so
after it the node knows which config it must be in. `/etc/machine-config-daemon/txn.json` is
mcd's own write-ahead record of an update in progress: it is on disk before the first host
change and removed after the last, so a process killed in between finds it on restart and
re-runs the same update, which converges (every step is idempotent).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcd.host import fsops
from mcd.host.root import HostRoot

LOG = logging.getLogger(__name__)

STATE_DIR = "/etc/machine-config-daemon"
CURRENT_CONFIG = f"{STATE_DIR}/currentconfig"
CURRENT_IMAGE = f"{STATE_DIR}/currentimage"
TRANSACTION = f"{STATE_DIR}/txn.json"
FORCEFILE = "/run/machine-config-daemon-force"
ENCAPSULATED_CONFIG = "/etc/ignition-machine-config-encapsulated.json"


class StateError(RuntimeError):
    """A record on the node exists but cannot be read."""


@dataclass(frozen=True)
class Transaction:
    """An update that started and has not finished: re-running it converges."""

    old: Mapping[str, Any] | None
    new: Mapping[str, Any]
    phase: str  # "apply" | "rollback"
    mode: str  # "legacy" | "policy"


def _dump(obj: Any) -> bytes:
    return (json.dumps(obj, sort_keys=True, separators=(",", ":")) + "\n").encode()


def _load_json(root: HostRoot, path: str) -> Any:
    data = fsops.read_bytes_nofollow(root.join(path))
    if data is None:
        return None
    try:
        return json.loads(data)
    except ValueError as exc:
        raise StateError(f"cannot parse {path}: {exc}") from None


def read_current_config(root: HostRoot) -> Mapping[str, Any] | None:
    """The MachineConfig object last applied, or None on a node that never had one."""
    obj = _load_json(root, CURRENT_CONFIG)
    if obj is not None and not isinstance(obj, Mapping):
        raise StateError(f"{CURRENT_CONFIG} does not hold a MachineConfig object")
    return obj


def read_current_image(root: HostRoot) -> str:
    data = fsops.read_bytes_nofollow(root.join(CURRENT_IMAGE))
    return data.decode().strip() if data else ""


def write_current(root: HostRoot, config: Mapping[str, Any], image: str = "") -> bool:
    """Persist the applied config (and image) atomically; False when already on disk as is."""
    changed = fsops.atomic_write(root.join(CURRENT_CONFIG), _dump(config), 0o644)
    changed = fsops.atomic_write(root.join(CURRENT_IMAGE), image.encode(), 0o644) or changed
    return changed


def begin(root: HostRoot, txn: Transaction) -> None:
    """Record the update before the first host change."""
    record = {"old": txn.old, "new": txn.new, "phase": txn.phase, "mode": txn.mode, "version": 1}
    fsops.atomic_write(root.join(TRANSACTION), _dump(record), 0o600)


def pending(root: HostRoot) -> Transaction | None:
    """The interrupted update, if any."""
    obj = _load_json(root, TRANSACTION)
    if obj is None:
        return None
    if not isinstance(obj, Mapping) or not isinstance(obj.get("new"), Mapping):
        raise StateError(f"{TRANSACTION} is not a valid transaction record")
    return Transaction(
        old=obj.get("old"),
        new=obj["new"],
        phase=str(obj.get("phase", "apply")),
        mode=str(obj.get("mode", "legacy")),
    )


def finish(root: HostRoot) -> None:
    """The update is complete (or fully rolled back): drop the record."""
    fsops.remove(root.join(TRANSACTION))


def forcefile_present(root: HostRoot) -> bool:
    return fsops.lstat_or_none(root.join(FORCEFILE)) is not None


def remove_forcefile(root: HostRoot) -> None:
    fsops.remove(root.join(FORCEFILE))
