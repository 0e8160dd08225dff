"""The originals of replaced paths: `.mcdorig` backups, `.mcdnoorig` stamps, restores, pruning.

Before the daemon first replaces a path it records what was there: a copy of whatever existed
(`/etc/machine-config-daemon/orig/<path>.mcdorig`), or an empty stamp saying nothing was there
(`/etc/machine-config-daemon/noorig/<path>.mcdnoorig`). When a later config drops the path, the
original is restored from its backup or, with a stamp, the file is deleted. A restored original
keeps its backup until the update is committed; `collect_restored` then drops it.

Crash safety: every step is one atomic `atomicfs` call and the bookkeeping is ordered so that a kill
between any two of them leaves a state the same call converges from. The backup or stamp is
written before the file is touched; on deletion the file goes first and its stamp last, so a
half-done deletion is still recognised as "ours" when re-run; a restore leaves its backup, so a
re-run restores again (nothing to do when the file already is the backup).

Deliberate differences from upstream (product rule: nothing is ever lost):
* every pre-existing file, unit file, dropin or symlink (dangling too) is backed up, OS-shipped
  or not, and a dropped path with a backup is always restored. Upstream backs up only OS-shipped
  files (rpm-owned or with a /usr/etc copy) and stamps anything else, so an admin's own file is
  deleted when the config that replaced it is dropped; it also restores only while the file is
  still OS-shipped. Nothing here asks rpm. Accepted consequence: a bogus backup of daemon-written
  content left by very old upstream daemons (BZ 1814397) is restored rather than deleted.
* the one exception, on CoreOS: an unrecorded path holding exactly what the new config, or the
  config it replaces, declares was written from a config by Ignition at install time. It gets a
  stamp, as upstream gives it, so a later drop deletes it (with a /usr/etc copy, that copy is the
  original backed up).
* a mask keeps the unit file it replaces (upstream removes it without a copy); the file comes
  back when the mask is dropped or explicitly undone (`mask: false`).
* a restore keeps the backup (upstream deletes it). An interrupted update is re-run whole; the
  re-run must find the backup again, or it would see an unrecorded file and delete the original
  it had just put back. `collect_restored` drops such backups once no re-run can follow.
* an existing stamp always wins. Upstream takes a backup of an OS-shipped path even when a
  stamp exists, but then the "original" it saves is content the daemon wrote itself; the stamp
  already says the file was not there before the daemon.
Unchanged from upstream: a unit file's CoreOS /usr/etc copy is what its backup is taken from,
and a dropped path with neither backup nor stamp (e.g. a file Ignition wrote at first boot that
no update has touched since) is deleted.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from mcd.config.ignition import File, IgnitionConfig, Unit
from mcd.host import atomicfs
from mcd.host.dirsync import DirSync
from mcd.host.errors import HostError
from mcd.host.root import HostRoot, PathEscapeError
from mcd.planner.managed_paths import DEV_NULL, UNIT_FILE_MODE, dropin_path, path_in_dropins, unit_path

log = logging.getLogger(__name__)

ORIG_DIR = "/etc/machine-config-daemon/orig"
NOORIG_DIR = "/etc/machine-config-daemon/noorig"
ORIG_SUFFIX = ".mcdorig"
FILE_DIR_MODE = 0o755


def orig_path(path: str) -> str:
    """Config path of the backup of `path`'s original."""
    return f"{ORIG_DIR}{path}{ORIG_SUFFIX}"


def noorig_path(path: str) -> str:
    """Config path of the stamp saying `path` had no original worth keeping."""
    return f"{NOORIG_DIR}{path}.mcdnoorig"


@contextlib.contextmanager
def failing_as(what: str) -> Iterator[None]:
    """Turn OSErrors of one host operation into a HostError saying what was being done."""
    try:
        yield
    except OSError as exc:
        raise HostError(f"{what}: {exc}") from exc


class Originals:
    """What was at each path before the daemon first replaced it, and putting it back.

    `matches(file)` says whether an Ignition file is exactly on disk (the file writer knows the
    owners); it recognises content a config put there at install time.
    """

    def __init__(
        self,
        root: HostRoot,
        coreos: bool,
        matches: Callable[[File], bool],
        *,
        dirsync: DirSync | None = None,
    ) -> None:
        self.root = root
        # the update's deferred directory syncs (its `Host`'s); syncs at once when not in one
        self.dirsync = dirsync or DirSync()
        self.coreos = coreos
        self._matches = matches
        self._stamp: Path | None = None
        # what the config being replaced declared, per path (see `replacing`)
        self._previous: dict[str, File | bytes | None] = {}

    @contextlib.contextmanager
    def replacing(self, old: IgnitionConfig) -> Iterator[None]:
        """Within the block, writes replace `old`: an unrecorded path holding exactly what `old`
        declared for it came from that config too (see `backup`)."""
        previous: dict[str, File | bytes | None] = {f.path: f for f in old.files}
        for u in old.units:
            for d in u.dropins:
                if d.contents:
                    previous[dropin_path(u.name, d.name)] = d.contents.encode()
            if u.mask:
                previous[unit_path(u.name)] = None  # a link to /dev/null
            elif u.contents:
                previous[unit_path(u.name)] = u.contents.encode()
        saved, self._previous = self._previous, previous
        try:
            yield
        finally:
            self._previous = saved

    def _as_previously_declared(self, path: str) -> bool:
        if path not in self._previous:
            return False
        declared = self._previous[path]
        host = self.join(path)
        if declared is None:
            return atomicfs.is_link_to(host, DEV_NULL)
        if isinstance(declared, bytes):
            return atomicfs.is_exactly(host, declared, UNIT_FILE_MODE)
        return self._matches(declared)  # False too when its owner is gone

    # --- paths ---

    def join(self, path: str, *, follow_final: bool = False) -> Path:
        try:
            return self.root.join(path, follow_final=follow_final)
        except PathEscapeError as exc:
            raise HostError(f'cannot use path "{path}": {exc}') from exc

    def exists(self, path: str) -> bool:
        """Whether `path` exists, following symlinks (Go's os.Stat succeeding)."""
        return atomicfs.lstat_or_none(self.join(path, follow_final=True)) is not None

    def lexists(self, path: str) -> bool:
        """Whether there is an entry at `path`; a symlink counts even when it dangles."""
        return atomicfs.lstat_or_none(self.join(path)) is not None

    # --- recording what was there ---

    def backup(
        self,
        path: str,
        source: str | None = None,
        *,
        declared: Callable[[], bool] | None = None,
        unit: bool = False,
    ) -> None:
        """Record what is at `path` before the daemon first replaces it (upstream createOrigFile).

        Nothing to do when a stamp exists. Any entry at `path` (file or symlink, dangling too) is
        copied (from `source`, default `path`) to its `.mcdorig` unless a backup already exists;
        an absent path gets an empty `.mcdnoorig` stamp and loses a stale backup. Idempotent.

        On CoreOS, an unrecorded entry that already is exactly what the new config declares
        (`declared()` says so) or what the config being replaced declared (`replacing`) was put
        there from a config, by Ignition at install time: it is no original to keep, so it gets
        a stamp (and goes when a later config drops it, as upstream does for every file the OS
        does not ship), unless the OS ships a copy in /usr/etc, which is then the original.
        A `unit` file, dropin or mask so declared is stamped off CoreOS too: upstream backs up
        units only from CoreOS's /usr/etc, so one it wrote anywhere else is deleted when dropped.
        """
        orig = self.join(orig_path(path))
        stamp = self.join(noorig_path(path))
        if atomicfs.lstat_or_none(stamp) is not None:
            return
        if self.lexists(path):
            # An existing backup (even a dangling symlink) is the real original: the daemon has
            # replaced the path before, so what is there now may be its own content.
            if atomicfs.lstat_or_none(orig) is not None:
                return
            if (self.coreos or unit) and (
                self._as_previously_declared(path) or (declared is not None and declared())
            ):
                shipped = "/usr" + path
                if not self.coreos or not self.exists(shipped):
                    self._stamp_absent(path, orig, stamp)
                    return
                source = shipped
            with failing_as(f'creating orig file for "{path}"'):
                atomicfs.copy_preserving(
                    self.join(source or path), orig, FILE_DIR_MODE, dirsync=self.dirsync
                )
            log.info("backed up original %s", path)
            return
        self._stamp_absent(path, orig, stamp)

    def _stamp_absent(self, path: str, orig: Path, stamp: Path) -> None:
        with failing_as(f'creating noorig stamp for "{path}"'):
            if atomicfs.lstat_or_none(orig) is not None and atomicfs.remove(orig, dirsync=self.dirsync):
                log.info("removed stale backup of absent %s", path)
            # every stamp after the first is a hard link to an earlier one: one link(2) instead of
            # creating a file (much cheaper when a config brings thousands of new files)
            if atomicfs.create_empty(
                stamp, 0o644, dir_mode=FILE_DIR_MODE, link_from=self._stamp, dirsync=self.dirsync
            ):
                self._stamp = stamp

    def holds_backup(self, path: str) -> bool:
        """Whether `path` is an exact copy of its backup: same type, bytes or link target, mode, owner."""
        orig, host = self.join(orig_path(path)), self.join(path)
        with failing_as(f'comparing "{path}" with its orig file'):
            want, have = atomicfs.lstat_or_none(orig), atomicfs.lstat_or_none(host)
            if want is None or have is None or stat.S_IFMT(want.st_mode) != stat.S_IFMT(have.st_mode):
                return False
            if (want.st_uid, want.st_gid) != (have.st_uid, have.st_gid):
                return False
            if stat.S_ISLNK(want.st_mode):
                return os.readlink(orig) == os.readlink(host)
            if not stat.S_ISREG(want.st_mode) or want.st_size != have.st_size:
                return False
            if stat.S_IMODE(want.st_mode) != stat.S_IMODE(have.st_mode):
                return False
            return atomicfs.read_bytes_nofollow(orig) == atomicfs.read_bytes_nofollow(host)

    def has_backup(self, path: str) -> bool:
        """Whether dropping `path` restores an original: a `.mcdorig` backup and no stamp."""
        try:
            stamp, orig = self.join(noorig_path(path)), self.join(orig_path(path))
        except HostError:
            return False  # the removal reports the bad path
        return atomicfs.lstat_or_none(stamp) is None and atomicfs.lstat_or_none(orig) is not None

    # --- giving it back ---

    def restore(self, path: str) -> bool:
        """Put the backup back at `path`; False when it already is there. The backup stays.

        Keeping it makes a re-run of an interrupted update restore again instead of seeing an
        unrecorded file and deleting the original it had just put back; `collect_restored`
        drops it once the update is committed.
        """
        if self.holds_backup(path):
            log.info("%s already holds its original", path)
            return False
        with failing_as(f'restoring "{path}" from orig file "{orig_path(path)}"'):
            atomicfs.copy_preserving(
                self.join(orig_path(path)), self.join(path), FILE_DIR_MODE, dirsync=self.dirsync
            )
        log.info("restored original %s", path)
        return True

    def collect_restored(self, old: IgnitionConfig | None, new: IgnitionConfig) -> list[str]:
        """Drop the backups of originals that are back in place; return their paths.

        Call it only once an update is committed (no re-run of it can follow). A backup goes
        when `new` no longer declares its path and the path holds an exact copy of it; any other
        backup (a path still declared, a restore that did not finish, a file changed since) stays.
        Candidates are the paths `old` declared, or with `old` None every backup on the root
        (which also collects what an interrupted earlier commit or a rollback left). Idempotent.
        """
        declared = {f.path for f in new.files}
        declared |= {unit_path(u.name) for u in new.units}
        declared |= {dropin_path(u.name, d.name) for u in new.units for d in u.dropins}
        if old is None:
            candidates = self._backed_up_paths()
        else:
            candidates = [f.path for f in old.files]
            candidates += [unit_path(u.name) for u in old.units]
            candidates += [dropin_path(u.name, d.name) for u in old.units for d in u.dropins]
        dropped: list[str] = []
        for path in dict.fromkeys(candidates):
            if path in declared or not self.holds_backup(path):
                continue
            with failing_as(f'deleting orig file "{orig_path(path)}"'):
                atomicfs.remove(self.join(orig_path(path)), dirsync=self.dirsync)
            log.info("dropped the backup of restored %s", path)
            dropped.append(path)
        return dropped

    def _backed_up_paths(self) -> list[str]:
        """The paths that have a `.mcdorig` backup on the root."""
        base = self.join(ORIG_DIR)
        out: list[str] = []
        for dirpath, dirnames, names in os.walk(base):
            # backups of symlinked paths are symlinks themselves: list them, never descend
            for name in names + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
                if name.endswith(ORIG_SUFFIX):
                    rel = os.path.relpath(os.path.join(dirpath, name), base)
                    out.append("/" + rel[: -len(ORIG_SUFFIX)])
        return sorted(out)

    # --- removing a dropped path ---

    def delete(self, path: str) -> bool:
        with failing_as(f"unable to delete {path}"):
            removed = atomicfs.remove(self.join(path), dirsync=self.dirsync)
        if removed:
            log.info("removed stale %s", path)
        else:
            log.debug("%s: already absent", path)
        return removed

    def remove_path(self, path: str) -> bool:
        """Delete a dropped path, then its stamp (and an orphan backup beside a stamp); True if removed.

        The file goes first and its stamp last, so a re-run of a killed removal still finds the
        path recorded as ours.
        """
        removed = self.delete(path)
        stamp = self.join(noorig_path(path))
        if atomicfs.lstat_or_none(stamp) is not None:
            with failing_as(f'deleting noorig file stamp "{noorig_path(path)}"'):
                # an orphan left by older daemons
                atomicfs.remove(self.join(orig_path(path)), dirsync=self.dirsync)
                atomicfs.remove(stamp, dirsync=self.dirsync)
        return removed

    def prune_file(self, path: str, new_units: Sequence[Unit], *, keep_unrecorded: bool = False) -> bool:
        """Handle one file dropped from storage.files (stamp: delete, backup: restore); True on a change.

        `keep_unrecorded` (a rollback) leaves a path with neither backup nor stamp alone: the
        failed update never touched it (every write records first).
        """
        orig = self.join(orig_path(path))
        stamp = self.join(noorig_path(path))
        keep = path_in_dropins(path, new_units)
        if keep:
            log.info("not removing file %s: replaced with systemd dropin", path)
        if atomicfs.lstat_or_none(stamp) is not None:
            removed = False if keep else self.delete(path)
            with failing_as(f'deleting noorig file stamp "{noorig_path(path)}"'):
                atomicfs.remove(orig, dirsync=self.dirsync)  # an orphan left by older daemons
                atomicfs.remove(stamp, dirsync=self.dirsync)
            return removed
        if atomicfs.lstat_or_none(orig) is not None:
            # every original is restored, OS-shipped or not (upstream restores only OS files)
            return self.restore(path)
        if keep or keep_unrecorded:
            return False
        return self.delete(path)

    def prune_unit_path(self, path: str, *, keep_unrecorded: bool = False) -> bool:
        """Handle a dropped unit file or dropin: backup → restore, else delete (and drop a stamp).

        `keep_unrecorded` (a rollback) leaves a path with neither backup nor stamp alone: the
        failed update never touched it (every write records first).
        """
        orig = self.join(orig_path(path))
        stamp = self.join(noorig_path(path))
        has_stamp = atomicfs.lstat_or_none(stamp) is not None
        if not has_stamp and atomicfs.lstat_or_none(orig) is not None:
            return self.restore(path)
        if not has_stamp and keep_unrecorded:
            return False
        removed = self.delete(path)
        if has_stamp:
            with failing_as(f'deleting noorig file stamp "{noorig_path(path)}"'):
                atomicfs.remove(orig, dirsync=self.dirsync)  # an orphan left by older daemons
                atomicfs.remove(stamp, dirsync=self.dirsync)
        return removed
