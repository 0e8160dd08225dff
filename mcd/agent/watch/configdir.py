"""MachineConfigs from a mounted directory (`mcd start --config-dir DIR`): a ConfigMap volume or a
git-sync checkout instead of the API server.

The kubelet's AtomicWriter writes each version of a ConfigMap into a new hidden directory
(`..2024_01_02_03_04_05.123456789`), points the `..data` symlink at it with one rename, then
deletes the old directory; the visible keys are links through `..data`. A reader that opens
`DIR/a.yaml` and then `DIR/b.yaml` may get them from two versions. So a snapshot resolves
`..data` once and reads every file through that directory; a version deleted under the reader
makes it start again from the new link. git-sync swaps a link to a worktree the same way
(give that link as DIR). A plain directory is read as it is (no atomicity).

What a snapshot holds: every MachineConfig in the `*.yaml`/`*.yml`/`*.json` files, the
`MachineConfiguration` (node disruption policies, storage overrides) if one is there, and the desired config's
name from the file `desiredConfig` (or the only MachineConfig). Its checksum covers every file,
so an unchanged set causes nothing.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcd import policy
from mcd.agent.watch.inotify import DirectoryWatch
from mcd.config.findings import InputError
from mcd.config.load import load_objects, machineconfig_at
from mcd.config.machineconfig import MachineConfig

LOG = logging.getLogger(__name__)

DATA_LINK = "..data"
DESIRED_KEY = "desiredConfig"
_CONFIG_SUFFIXES = (".yaml", ".yml", ".json")
READ_ATTEMPTS = 50
MAX_DELAY_FACTOR = 6


class ConfigDirError(RuntimeError):
    """The directory's content cannot be used (the node reports it as Degraded)."""


@dataclass(frozen=True)
class Snapshot:
    """One consistent version of the directory."""

    source: str  # the directory the files were read through
    files: Mapping[str, bytes] = field(repr=False)
    checksum: str

    def parse(self) -> ParsedSnapshot:
        """The MachineConfigs, policies and desired name in it; ConfigDirError when unusable."""
        mcs: dict[str, MachineConfig] = {}
        objects: dict[str, Mapping[str, Any]] = {}
        mcfg: Mapping[str, Any] | None = None
        for name in sorted(self.files):
            if not name.endswith(_CONFIG_SUFFIXES):
                continue
            try:
                for path, obj in load_objects(self.files[name], name):
                    if obj.get("kind") == "MachineConfiguration":
                        mcfg = obj
                        continue
                    mc = machineconfig_at(path, obj, name)
                    mcs[mc.name] = mc
                    objects[mc.name] = obj
            except InputError as exc:
                raise ConfigDirError("; ".join(exc.lines())) from None
        desired = self.files.get(DESIRED_KEY, b"").decode(errors="replace").strip()
        if not desired:
            if len(mcs) != 1:
                raise ConfigDirError(
                    f"{self.source}: no {DESIRED_KEY} file and {len(mcs)} MachineConfigs: which one to apply?"
                )
            desired = next(iter(mcs))
        if desired not in mcs:
            raise ConfigDirError(f'{self.source}: desired config "{desired}" is not among its MachineConfigs')
        try:
            policies, overrides = policy.settings_from_machineconfiguration(mcfg)
        except policy.PolicyError as exc:
            raise ConfigDirError(f"{self.source}: {exc}") from None
        return ParsedSnapshot(self, desired, mcs, policies, objects, mcfg, overrides)


@dataclass(frozen=True)
class ParsedSnapshot:
    snapshot: Snapshot
    desired: str
    machineconfigs: Mapping[str, MachineConfig]
    policies: policy.ClusterPolicies
    objects: Mapping[str, Mapping[str, Any]] = field(repr=False, default_factory=dict)
    machineconfiguration: Mapping[str, Any] | None = None
    storage_overrides: tuple[str, ...] = ()  # the MachineConfiguration's, as `policies`


class DirConfigApi:
    """The cluster agent's `ConfigApi` answered from the last snapshot applied (`--config-dir`
    with a cluster): MachineConfigs and the MachineConfiguration come from the directory; a
    config it does not hold (an older current config) is asked of the API server."""

    def __init__(self, fallback: Any) -> None:
        self.fallback = fallback
        self.parsed: ParsedSnapshot | None = None

    def get_machineconfig_json(self, name: str) -> tuple[dict[str, Any], bytes | None]:
        if self.parsed is not None and name in self.parsed.objects:
            return dict(self.parsed.objects[name]), None
        obj, text = self.fallback.get_machineconfig_json(name)
        return dict(obj), text

    def get_machineconfiguration(self, name: str = "cluster") -> dict[str, Any] | None:
        if self.parsed is not None and self.parsed.machineconfiguration is not None:
            return dict(self.parsed.machineconfiguration)
        return None


def _target(directory: Path) -> Path:
    """The directory to read this version through: `..data`'s target, resolved once."""
    link = directory / DATA_LINK
    try:
        return directory / os.readlink(link)
    except FileNotFoundError:
        return Path(os.path.realpath(directory))
    except OSError as exc:
        if exc.errno == 22:  # EINVAL: `..data` is a directory, not a link
            return link
        raise


def _read_all(base: Path) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    with os.scandir(base) as entries:
        names = [e.name for e in entries if not e.name.startswith(".") and e.is_file()]
    # dot entries are AtomicWriter's own and git's; is_file() follows a key's link
    for name in names:
        files[name] = Path(base, name).read_bytes()
    return files


def read_snapshot(directory: Path) -> Snapshot:
    """One consistent version: every file read through the same resolved `..data` target."""
    for _ in range(READ_ATTEMPTS):
        base = _target(directory)
        try:
            files = _read_all(base)
        except FileNotFoundError:
            continue  # the version was replaced and removed while being read: take the new one
        if _target(directory) != base:
            # swapped meanwhile: the old version may have been (partly) deleted under the listing
            continue
        digest = hashlib.sha256()
        for name in sorted(files):
            digest.update(name.encode() + b"\0" + len(files[name]).to_bytes(8, "big") + files[name])
        return Snapshot(str(base), files, digest.hexdigest())
    raise ConfigDirError(f"{directory}: its content kept changing while being read")


class ConfigDirSource:
    """Watches DIR and hands the loop a snapshot once it has been stable for `grace` seconds.

    Updates landing within the grace period replace each other, so a burst costs one update (and
    at most one reboot); a snapshot with the checksum last handed out is dropped.
    """

    def __init__(
        self,
        directory: Path,
        on_change: Callable[[], None],
        *,
        grace: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.directory = directory
        self.grace = grace
        self._clock = clock
        self._watch = DirectoryWatch(directory, on_change)
        self._lock = threading.Lock()
        self._pending: Snapshot | None = None
        self._due = 0.0
        self._first = 0.0
        self.delivered = ""  # checksum of the last snapshot handed to the loop
        self.taken = 0  # snapshots handed to the loop so far
        self._last: Snapshot | None = None

    def start(self) -> None:
        self._watch.start()

    def stop(self) -> None:
        self._watch.stop()

    def changed(self) -> None:
        """The directory changed (loop thread): read it now, deliver it after the grace period."""
        snap = read_snapshot(self.directory)
        with self._lock:
            pending = self._pending.checksum if self._pending is not None else self.delivered
            if snap.checksum == pending:
                return
            if snap.checksum == self.delivered:
                self._pending = None  # changed and changed back within the grace period
                return
            LOG.info(
                "%s changed (checksum %s): applying it after %.1fs without change",
                self.directory,
                snap.checksum[:12],
                self.grace,
            )
            now = self._clock()
            if self._pending is None:
                self._first = now
            # each change restarts the grace period, but a directory that never settles is still
            # applied after MAX_DELAY_FACTOR grace periods
            self._pending = snap
            self._due = min(now + self.grace, self._first + MAX_DELAY_FACTOR * self.grace)

    def due_in(self) -> float | None:
        """Seconds until the pending snapshot is due (0 when due), None when none is pending."""
        with self._lock:
            if self._pending is None:
                return None
            return max(0.0, self._due - self._clock())

    def take(self) -> Snapshot | None:
        """The pending snapshot once it is due; the caller applies it."""
        with self._lock:
            if self._pending is None or self._clock() < self._due:
                return None
            snap, self._pending = self._pending, None
            self.delivered = snap.checksum
            self.taken += 1
            self._last = snap
            return snap

    def redeliver(self, delay: float) -> None:
        """The last snapshot taken could not be reported: hand it out again in `delay` seconds
        (unless a newer one is pending)."""
        with self._lock:
            if self._pending is None and self._last is not None:
                self._pending = self._last
                self._first = self._clock()
                self._due = self._first + delay
