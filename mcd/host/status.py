"""The node's status records and their reader (`mcd status` shows them: `mcd.cli.status`): what
the node runs, what it was asked to run, its state, the last drift and a reboot owed, read from
the root alone (no cluster needed).

The daemon keeps two small records beside upstream's `currentconfig`, written atomically
whenever they change: the state it last reported (with the desired config and the reason) and
the last config drift its monitor saw. Upstream has neither: its state lives only in the Node's
annotations, which a host without a cluster does not have.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from mcd.host import atomicfs, state
from mcd.host.root import HostRoot

STATUS_RECORD = f"{state.STATE_DIR}/mcd-status.json"
DRIFT_RECORD = f"{state.STATE_DIR}/mcd-last-drift.json"


def _write(root: HostRoot, path: str, obj: Mapping[str, Any]) -> None:
    atomicfs.atomic_write(root.join(path), (json.dumps(obj, sort_keys=True) + "\n").encode(), 0o644)


def _read(root: HostRoot, path: str) -> dict[str, Any]:
    try:
        data = atomicfs.read_bytes_nofollow(root.join(path))
        obj = json.loads(data) if data else {}
    except (OSError, ValueError):
        return {}
    return obj if isinstance(obj, dict) else {}


def record_state(root: HostRoot, node_state: str, reason: str, desired: str = "") -> None:
    """Keep the state just reported (and the desired config it was about) for `mcd status`."""
    old = _read(root, STATUS_RECORD)
    new = {"state": node_state, "reason": reason, "desiredConfig": desired or old.get("desiredConfig", "")}
    if {k: old.get(k) for k in new} != new:
        _write(root, STATUS_RECORD, {**new, "time": _stamp(time.time())})


def record_drift(root: HostRoot, path: str, reason: str, config: str, when: float) -> None:
    _write(root, DRIFT_RECORD, {"path": path, "reason": reason, "config": config, "time": _stamp(when)})


def _stamp(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


@dataclass(frozen=True)
class Status:
    current_config: str
    desired_config: str
    state: str
    reason: str
    since: str
    last_drift: dict[str, Any] | None
    reboot_owed: dict[str, str] | None
    update_in_progress: bool

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        return {
            "currentConfig": d["current_config"],
            "desiredConfig": d["desired_config"],
            "state": d["state"],
            "reason": d["reason"],
            "since": d["since"],
            "lastDrift": d["last_drift"],
            "rebootOwed": d["reboot_owed"],
            "updateInProgress": d["update_in_progress"],
        }


def read_status(root: HostRoot) -> Status:
    """The node's status from its records; nothing is written (a reboot already done stays listed
    as owed until the daemon sees the new boot)."""
    current = state.read_current_config(root)
    name = ""
    if current is not None:
        meta = current.get("metadata")
        name = str(meta.get("name", "")) if isinstance(meta, Mapping) else ""
    rec = _read(root, STATUS_RECORD)
    drift = _read(root, DRIFT_RECORD) or None
    reboot = _read(root, state.REBOOT_PENDING) or None
    owed = None
    if reboot is not None:
        recorded, now = reboot.get("bootID"), state.boot_id(root)
        if not state.rebooted_since(recorded, now):
            owed = {"config": str(reboot.get("config", "")), "reason": str(reboot.get("reason", ""))}
    in_progress = atomicfs.lstat_or_none(root.join(state.TRANSACTION)) is not None
    node_state = str(rec.get("state", "")) or ("Done" if name else "")
    return Status(
        current_config=name,
        desired_config=str(rec.get("desiredConfig", "")) or name,
        state=node_state,
        reason=str(rec.get("reason", "")),
        since=str(rec.get("time", "")),
        last_drift=drift,
        reboot_owed=owed,
        update_in_progress=in_progress,
    )
