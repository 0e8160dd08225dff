"""The daemon's own records on the node: the applied config and the update in progress.

`/etc/machine-config-daemon/currentconfig` holds the MachineConfig last applied (JSON, as
upstream) and `currentimage` its layered OS image; they are in place before a reboot, so after
it the node knows which config it must be in. An update in progress is mcd's own write-ahead
record: the new config in `pendingconfig` and a small `txn.json`, both on disk before the first
host change. The commit is one rename of `pendingconfig` onto `currentconfig`; then the record
goes. A process killed in between finds the record on restart and re-runs the same update,
which converges (every step is idempotent).

The agent knows the new config's text some tens of milliseconds before the update starts (it
plans meanwhile): `stage` writes and fsyncs it then, on a writer thread, under a temp name of
its own in the daemon's directory, and `begin` only renames that file onto `pendingconfig`
when it holds the very text being recorded. A staged file nobody took is removed by its owner
(`Staged.discard`), or, after a crash, by `remove_leftovers` when the agent starts.

Replacing `currentconfig` frees the old config's blocks, which takes milliseconds for a rendered
config (ext4): the agent gives the old file a second name first (`keep_aside`), so the commit's
rename only drops a name, and removes that name once its sync is over (after Done).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import secrets
import threading
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcd.host import atomicfs, dirsync, failpoints
from mcd.host.errors import StepError, os_error_text
from mcd.host.root import HostRoot

LOG = logging.getLogger(__name__)

STATE_DIR = "/etc/machine-config-daemon"
CURRENT_CONFIG = f"{STATE_DIR}/currentconfig"
CURRENT_IMAGE = f"{STATE_DIR}/currentimage"
TRANSACTION = f"{STATE_DIR}/txn.json"
PENDING_CONFIG = f"{STATE_DIR}/pendingconfig"
REBOOT_PENDING = f"{STATE_DIR}/reboot-pending"
BOOT_ID = "/proc/sys/kernel/random/boot_id"
FORCEFILE = "/run/machine-config-daemon-force"
# a staged config's name: `.pendingconfig.<16 hex>.staged` (not the temp files' `.tmp`, which
# every update sweeps from this directory before it starts, staged file included)
STAGED_SUFFIX = ".staged"
# the names of a killed agent's leftovers: a staged record, an old config's second name
_LEFTOVER_NAME = re.compile(r"^\.(pendingconfig\.[0-9a-f]{16}\.staged|currentconfig\.[0-9a-f]{16}\.aside)$")


class StateError(RuntimeError):
    """A record on the node exists but cannot be read."""


def _write_record(
    root: HostRoot, what: str, path: str, data: bytes, mode: int, *, batch: dirsync.DirSync | None = None
) -> None:
    """Write one record; an OS error (a full disk) names the record and what writing it was for."""
    try:
        atomicfs.atomic_write(root.join(path), data, mode, dirsync=batch)
    except OSError as exc:
        raise StepError(f"{what} {path}: {os_error_text(exc)}") from exc


class Staged:
    """A config's text being written and fsynced ahead of its update (see `stage`).

    The file written stays open until it is taken or discarded, so its inode cannot be another
    file's meanwhile: `take` hands out the path only while it still names that very file.
    Thread-safe: the agent's threads stage and discard, the update's thread takes.
    """

    def __init__(self, text: bytes, future: Future[tuple[Path, int]]) -> None:
        self.text = text
        self._future = future
        self._lock = threading.Lock()
        self._done = False  # taken (renamed away) or discarded

    def _written(self) -> tuple[Path, int] | None:
        """The staged file and a descriptor of it once written; None when staging failed."""
        try:
            return self._future.result()
        except OSError as exc:
            LOG.debug("staging the update record failed (it is written at the update): %s", exc)
            return None

    def _finish(self) -> tuple[Path, int] | None:
        """The written file, marked done and its descriptor closed (None: failed or done before)."""
        written = self._written()
        with self._lock:
            if self._done or written is None:
                self._done = True
                return None
            self._done = True
        os.close(written[1])
        return written

    def take(self, text: bytes) -> Path | None:
        """The staged file for the record of `text` if it holds exactly that text (None else);
        waits for the write. Handed out once: the caller renames it."""
        if text is not self.text and text != self.text:
            return None
        written = self._written()
        if written is None:
            return None
        path, fd = written
        st, held = atomicfs.lstat_or_none(path), os.fstat(fd)
        if st is None or (st.st_dev, st.st_ino) != (held.st_dev, held.st_ino) or st.st_size != len(text):
            return None
        return path if self._finish() is not None else None

    def discard(self) -> None:
        """Remove the staged file unless it was taken (waits for a write still under way)."""
        written = self._finish()
        if written is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(written[0])


def stage(root: HostRoot, text: bytes) -> Staged:
    """Start writing `text` (a config's JSON text, as `begin` records it) durably beside
    `pendingconfig`, on a writer thread; the returned `Staged` is taken by `begin` or discarded.

    Not a host change: until renamed the file is nobody's record (its directory is not synced;
    a power cut may keep or lose it, `remove_leftovers` clears it either way).
    """
    target = root.join(PENDING_CONFIG)
    fill = atomicfs.owned_fill(text, 0o644, -1, -1)

    def write() -> tuple[Path, int]:
        # held open (see `Staged`); few system calls: each one gives the interpreter lock away,
        # and getting it back waits for the thread parsing the config meanwhile
        written = atomicfs.durable_temp_open(target, fill, suffix=STAGED_SUFFIX)
        failpoints.hit("update record staged")
        return written

    return Staged(text, dirsync.pool().submit(write))


def keep_aside(root: HostRoot) -> Path | None:
    """A second name for the applied config's file (None when there is none), to be removed with
    `release_aside` after the update: the commit's rename then frees nothing.

    Not a host change: the file is the same, and the name is nobody's record (not synced;
    `remove_leftovers` removes it after a crash).
    """
    current = root.join(CURRENT_CONFIG)
    aside = current.with_name(f".currentconfig.{secrets.token_hex(8)}.aside")
    try:
        os.link(current, aside, follow_symlinks=False)
    except OSError:  # no config yet, or a filesystem without hard links: the rename frees it
        return None
    failpoints.hit("old config kept aside")
    return aside


def release_aside(aside: Path) -> None:
    """Remove the name `keep_aside` gave (freeing the old config's blocks, if nothing else holds them)."""
    try:
        os.unlink(aside)
    except FileNotFoundError:
        pass
    except OSError as exc:  # left for the next start (`remove_leftovers`)
        LOG.warning("cannot remove %s: %s", aside, os_error_text(exc))


def remove_leftovers(root: HostRoot) -> list[str]:
    """Remove what a killed agent left of its own (staged records, second names of old configs);
    at its start, when none of its own is in flight."""
    directory = root.join(STATE_DIR, follow_final=True)
    try:
        names = os.listdir(directory)
    except (FileNotFoundError, NotADirectoryError):
        return []
    removed = [f"{STATE_DIR}/{name}" for name in sorted(names) if _LEFTOVER_NAME.match(name)]
    for name in removed:
        atomicfs.remove(root.join(name))
    return removed


@dataclass(frozen=True)
class Transaction:
    """An update that started and has not finished: re-running it converges."""

    old: Mapping[str, Any] | None
    new: Mapping[str, Any]
    phase: str  # "apply" | "rollback"
    mode: str  # "legacy" | "policy"
    # `new` as JSON text when the caller has it (the config as read): written without encoding
    new_text: bytes | None = field(default=None, compare=False, repr=False)
    # what the update may create that was not there before it (deepest first): a rollback,
    # also one after a restart, removes those directories it leaves empty
    created: tuple[str, ...] = ()
    # `new_text` written ahead (`stage`): renamed onto `pendingconfig` if it holds that text
    staged: Staged | None = field(default=None, compare=False, repr=False)


def _dump(obj: Any) -> bytes:
    # compact and unsorted: rendered configs are megabytes and this is on the update path
    return (json.dumps(obj, separators=(",", ":")) + "\n").encode()


def _load_json(root: HostRoot, path: str) -> Any:
    return _read_json(root, path)[0]


def _read_json(root: HostRoot, path: str) -> tuple[Any, bytes]:
    """A record's JSON value and text (None and b"" when there is no record)."""
    data = atomicfs.read_bytes_nofollow(root.join(path))
    if data is None:
        return None, b""
    try:
        return json.loads(data), data
    except ValueError as exc:
        raise StateError(f"cannot parse {path}: {exc}") from None


def read_current_config(root: HostRoot) -> Mapping[str, Any] | None:
    """The MachineConfig object last applied, or None on a node that never had one."""
    obj = _load_json(root, CURRENT_CONFIG)
    if obj is not None and not isinstance(obj, Mapping):
        raise StateError(f"{CURRENT_CONFIG} does not hold a MachineConfig object")
    return obj


def begin(root: HostRoot, txn: Transaction) -> None:
    """Record the update before the first host change.

    The new config goes to `pendingconfig` (so the commit is one rename onto `currentconfig`),
    the small `txn.json` says an update is under way; the old config is `currentconfig`, which
    does not change before the commit. A rollback only rewrites `txn.json`.

    Both renames are made durable by one fsync of their directory, before this returns (so
    before the first host change): a power cut before it leaves the host unchanged, and either
    record alone is harmless (`pending` takes a `txn.json` without `pendingconfig` as finished).
    A staged file of the same text (already fsynced) is renamed instead of writing it again.
    """
    batch = dirsync.DirSync()
    with batch.deferred():
        if txn.phase == "apply":
            text = txn.new_text if txn.new_text is not None else _dump(txn.new)
            staged = txn.staged.take(text) if txn.staged is not None else None
            if staged is None:
                _write_record(root, "writing the update record", PENDING_CONFIG, text, 0o644, batch=batch)
            else:
                _rename_staged(root, staged, batch)
        record = {"phase": txn.phase, "mode": txn.mode, "version": 2, "created": list(txn.created)}
        _write_record(root, "writing the update record", TRANSACTION, _dump(record), 0o600, batch=batch)


def _rename_staged(root: HostRoot, staged: Path, batch: dirsync.DirSync) -> None:
    pending_path = root.join(PENDING_CONFIG)
    try:
        os.rename(staged, pending_path)
    except OSError as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(staged)
        raise StepError(f"writing the update record {PENDING_CONFIG}: {os_error_text(exc)}") from exc
    failpoints.hit("staged record renamed, directory not synced")
    atomicfs.fsync_dir(pending_path.parent, dirsync=batch)


def pending(root: HostRoot) -> Transaction | None:
    """The interrupted update, if any (None also when it was interrupted after its commit)."""
    obj = _load_json(root, TRANSACTION)
    if obj is None:
        return None
    if not isinstance(obj, Mapping):
        raise StateError(f"{TRANSACTION} is not a valid transaction record")
    new, text = _read_json(root, PENDING_CONFIG)
    if new is None:
        # killed between the commit's rename and the removal of the record: it is done
        atomicfs.remove(root.join(TRANSACTION))
        return None
    if not isinstance(new, Mapping):
        raise StateError(f"{PENDING_CONFIG} does not hold a MachineConfig object")
    return Transaction(
        old=read_current_config(root),
        new=new,
        phase=str(obj.get("phase", "apply")),
        mode=str(obj.get("mode", "legacy")),
        new_text=text,
        created=_paths(obj.get("created")),
    )


def _paths(value: object) -> tuple[str, ...]:
    """A record's list of config paths; anything else (an older record) is no paths."""
    if not isinstance(value, list):
        return ()
    return tuple(p for p in value if isinstance(p, str) and p.startswith("/"))


def commit(root: HostRoot, image: str = "", *, drop_record: bool = True) -> None:
    """The update is applied: `pendingconfig` becomes `currentconfig` (one rename), record dropped.

    `drop_record` False leaves `txn.json` to the caller (`drop_finished_record`): without
    `pendingconfig` it is a finished update's, and removing it right after the commit's
    directory fsync waits for that journal commit (milliseconds, on the agent's path to Done).
    """
    _write_record(root, "committing the update: writing", CURRENT_IMAGE, image.encode(), 0o644)
    pending_path, current_path = root.join(PENDING_CONFIG), root.join(CURRENT_CONFIG)
    failpoints.hit("before the commit rename")
    try:
        os.rename(pending_path, current_path)
        atomicfs.fsync_dir(current_path.parent)
    except OSError as exc:
        raise StepError(
            f"committing the update: renaming onto {CURRENT_CONFIG}: {os_error_text(exc)}"
        ) from exc
    failpoints.hit("committed, record not removed")
    if drop_record:
        drop_finished_record(root)


def drop_finished_record(root: HostRoot) -> None:
    """Remove `txn.json` if it is a finished update's (no `pendingconfig`: see `pending`)."""
    if atomicfs.lstat_or_none(root.join(PENDING_CONFIG)) is not None:
        return
    # not fsynced: a record that outlives a power cut is known as finished (`pending`), and the
    # next update's record syncs the directory anyway
    with contextlib.suppress(FileNotFoundError):
        os.unlink(root.join(TRANSACTION))


def finish(root: HostRoot) -> None:
    """The update was rolled back completely: drop the pending config, then the record."""
    atomicfs.remove(root.join(PENDING_CONFIG))
    atomicfs.remove(root.join(TRANSACTION))


@dataclass(frozen=True)
class PendingReboot:
    """A config applied that only takes full effect after a reboot which has not happened yet."""

    config: str
    reason: str


def _boot_id(root: HostRoot) -> str | None:
    try:
        data = atomicfs.read_bytes_nofollow(root.join(BOOT_ID, follow_final=True))
    except (OSError, ValueError):
        return None
    if data is None:
        return None
    return data.decode(errors="replace").strip() or None


def boot_id(root: HostRoot) -> str | None:
    """The running kernel's boot id as the root shows it; None on a directory root."""
    return _boot_id(root)


def mark_reboot(root: HostRoot, config: str, reason: str) -> None:
    """Record that `config` needs a reboot (part of the commit): cleared once the node has booted again.

    The boot id of the running kernel says when that happened. A root without one (a directory,
    not a running system: the node's disk before its first boot, a sandbox) records none: the
    reboot is owed until that root runs with a boot id (see `rebooted_since`), or until a later
    update replaces or clears the record.
    """
    record = {"config": config, "reason": reason, "bootID": _boot_id(root)}
    _write_record(root, "recording the reboot owed in", REBOOT_PENDING, _dump(record), 0o644)


def rebooted_since(recorded: object, now: str | None) -> bool:
    """Whether the node has booted since a reboot record with boot id `recorded` was written.

    A record written without a boot id (None) was written on a root that was not running, such
    as the installer's `--once-from` on the node's disk: once the root runs with a boot id, it
    has booted since. Without a boot id now (a sandbox), no boot can be told apart.
    """
    return now is not None and recorded != now


def clear_reboot(root: HostRoot) -> None:
    atomicfs.remove(root.join(REBOOT_PENDING))


def pending_reboot(root: HostRoot) -> PendingReboot | None:
    """The reboot still owed to the applied config, or None (none needed, or the node rebooted since)."""
    obj = _load_json(root, REBOOT_PENDING)
    if obj is None:
        return None
    if not isinstance(obj, Mapping):
        raise StateError(f"{REBOOT_PENDING} is not a valid reboot record")
    recorded, now = obj.get("bootID"), _boot_id(root)
    if rebooted_since(recorded, now):
        LOG.info("node rebooted since %s was applied: the pending reboot is done", obj.get("config"))
        clear_reboot(root)
        return None
    return PendingReboot(config=str(obj.get("config", "")), reason=str(obj.get("reason", "")))


def forcefile_present(root: HostRoot) -> bool:
    return atomicfs.lstat_or_none(root.join(FORCEFILE)) is not None


def remove_forcefile(root: HostRoot) -> None:
    atomicfs.remove(root.join(FORCEFILE))
