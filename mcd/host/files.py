"""Ignition files on disk: owners, exact modes, `.mcdorig` backups, `.mcdnoorig` stamps, stale-data pruning.

Before the daemon first replaces a path it records what was there: a copy of whatever existed
(`/etc/machine-config-daemon/orig/<path>.mcdorig`), or an empty stamp saying nothing was there
(`/etc/machine-config-daemon/noorig/<path>.mcdnoorig`). When a later config drops the path, the
original is restored from its backup or, with a stamp, the file is deleted. A restored original
keeps its backup until the update is committed; `collect_restored` then drops it.

Crash safety: every step is one atomic fsops call and the bookkeeping is ordered so that a kill
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
from collections.abc import Callable, Collection, Iterator, Sequence
from functools import partial
from pathlib import Path

from mcd.config.ignition import File, IgnitionConfig, Unit
from mcd.host import fsops
from mcd.host.accounts import Accounts, UnknownGroup, UnknownUser
from mcd.host.errors import HostError
from mcd.host.root import HostRoot, PathEscapeError
from mcd.paths import (
    DEV_NULL,
    LEAKED_SYMLINKS,
    dropin_path,
    never_deleted,
    path_in_dropins,
    unit_path,
)

log = logging.getLogger(__name__)

ORIG_DIR = "/etc/machine-config-daemon/orig"
NOORIG_DIR = "/etc/machine-config-daemon/noorig"
FILE_DIR_MODE = 0o755
UNIT_FILE_MODE = 0o644

APPEND_UNSUPPORTED = "found an append section when writing files. Append is not supported"

ORIG_SUFFIX = ".mcdorig"


def orig_path(path: str) -> str:
    """Config path of the backup of `path`'s original."""
    return f"{ORIG_DIR}{path}{ORIG_SUFFIX}"


def noorig_path(path: str) -> str:
    """Config path of the stamp saying `path` had no original worth keeping."""
    return f"{NOORIG_DIR}{path}.mcdnoorig"


@contextlib.contextmanager
def _failing_as(what: str) -> Iterator[None]:
    """Turn OSErrors of one host operation into a HostError saying what was being done."""
    try:
        yield
    except OSError as exc:
        raise HostError(f"{what}: {exc}") from exc


class FileWriter:
    """Writes Ignition files and unit files under one root, keeping every original it replaces."""

    def __init__(self, root: HostRoot, accounts: Accounts, coreos: bool = True) -> None:
        self.root = root
        self.accounts = accounts
        self.coreos = coreos
        # Pruning deletes a dropped path that has neither backup nor stamp (a file Ignition wrote
        # at install time, as upstream). A rollback turns this off: such a path was never touched
        # by the failed update (every write records first), so it must stay as it is.
        self.delete_unrecorded = True
        self._stamp: Path | None = None
        # what the config being replaced declared, per path (see `replacing`)
        self._previous: dict[str, File | bytes | None] = {}

    @contextlib.contextmanager
    def replacing(self, old: IgnitionConfig) -> Iterator[None]:
        """Within the block, writes replace `old`: an unrecorded path holding exactly what `old`
        declared for it came from that config too (see `backup_original`)."""
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
        host = self._join(path)
        if declared is None:
            return fsops.is_link_to(host, DEV_NULL)
        if isinstance(declared, bytes):
            return fsops.is_exactly(host, declared, UNIT_FILE_MODE)
        try:
            uid, gid = self.owner_of(declared)
        except HostError:  # its owner is gone: what is there cannot be that file
            return False
        return self._on_disk(declared, uid, gid)

    # --- paths ------------------------------------------------------------------------------

    def _join(self, path: str, *, follow_final: bool = False) -> Path:
        try:
            return self.root.join(path, follow_final=follow_final)
        except PathEscapeError as exc:
            raise HostError(f'cannot use path "{path}": {exc}') from exc

    def _exists(self, path: str) -> bool:
        """Whether `path` exists, following symlinks (Go's os.Stat succeeding)."""
        return fsops.lstat_or_none(self._join(path, follow_final=True)) is not None

    def _lexists(self, path: str) -> bool:
        """Whether there is an entry at `path`; a symlink counts even when it dangles."""
        return fsops.lstat_or_none(self._join(path)) is not None

    # --- owners -----------------------------------------------------------------------------

    def owner_of(self, f: File) -> tuple[int, int]:
        """uid and gid for `f`: ids win over names, names are looked up in the root; root:root by default."""
        uid, gid = 0, 0
        try:
            if f.user.id is not None:
                uid = f.user.id
            elif f.user.name:
                uid = self.accounts.uid(f.user.name)
            if f.group.id is not None:
                gid = f.group.id
            elif f.group.name:
                gid = self.accounts.gid(f.group.name)
        except (UnknownUser, UnknownGroup) as exc:
            raise HostError(f'failed to retrieve file ownership for file "{f.path}": {exc}') from None
        return uid, gid

    # --- backups ----------------------------------------------------------------------------

    def backup_original(
        self, path: str, source: str | None = None, *, declared: Callable[[], bool] | None = None
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
        """
        orig = self._join(orig_path(path))
        stamp = self._join(noorig_path(path))
        if fsops.lstat_or_none(stamp) is not None:
            return
        if self._lexists(path):
            # An existing backup (even a dangling symlink) is the real original: the daemon has
            # replaced the path before, so what is there now may be its own content.
            if fsops.lstat_or_none(orig) is not None:
                return
            if self.coreos and (self._as_previously_declared(path) or (declared is not None and declared())):
                shipped = "/usr" + path
                if not self._exists(shipped):
                    self._stamp_absent(path, orig, stamp)
                    return
                source = shipped
            with _failing_as(f'creating orig file for "{path}"'):
                fsops.copy_preserving(self._join(source or path), orig, FILE_DIR_MODE)
            log.info("backed up original %s", path)
            return
        self._stamp_absent(path, orig, stamp)

    def _stamp_absent(self, path: str, orig: Path, stamp: Path) -> None:
        with _failing_as(f'creating noorig stamp for "{path}"'):
            if fsops.lstat_or_none(orig) is not None and fsops.remove(orig):
                log.info("removed stale backup of absent %s", path)
            # every stamp after the first is a hard link to an earlier one: one link(2) instead of
            # creating a file (much cheaper when a config brings thousands of new files)
            if fsops.create_empty(stamp, 0o644, dir_mode=FILE_DIR_MODE, link_from=self._stamp):
                self._stamp = stamp

    def _holds_backup(self, path: str) -> bool:
        """Whether `path` is an exact copy of its backup: same type, bytes or link target, mode, owner."""
        orig, host = self._join(orig_path(path)), self._join(path)
        with _failing_as(f'comparing "{path}" with its orig file'):
            want, have = fsops.lstat_or_none(orig), fsops.lstat_or_none(host)
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
            return fsops.read_bytes_nofollow(orig) == fsops.read_bytes_nofollow(host)

    def _restore(self, path: str) -> bool:
        """Put the backup back at `path`; False when it already is there. The backup stays.

        Keeping it makes a re-run of an interrupted update restore again instead of seeing an
        unrecorded file and deleting the original it had just put back; `collect_restored`
        drops it once the update is committed.
        """
        if self._holds_backup(path):
            log.info("%s already holds its original", path)
            return False
        with _failing_as(f'restoring "{path}" from orig file "{orig_path(path)}"'):
            fsops.copy_preserving(self._join(orig_path(path)), self._join(path), FILE_DIR_MODE)
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
            if path in declared or not self._holds_backup(path):
                continue
            with _failing_as(f'deleting orig file "{orig_path(path)}"'):
                fsops.remove(self._join(orig_path(path)))
            log.info("dropped the backup of restored %s", path)
            dropped.append(path)
        return dropped

    def _backed_up_paths(self) -> list[str]:
        """The paths that have a `.mcdorig` backup on the root."""
        base = self._join(ORIG_DIR)
        out: list[str] = []
        for dirpath, dirnames, names in os.walk(base):
            # backups of symlinked paths are symlinks themselves: list them, never descend
            for name in names + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
                if name.endswith(ORIG_SUFFIX):
                    rel = os.path.relpath(os.path.join(dirpath, name), base)
                    out.append("/" + rel[: -len(ORIG_SUFFIX)])
        return sorted(out)

    def restore(self, path: str) -> bool:
        """Put the original of a dropped path back from its backup (kept until `collect_restored`)."""
        return self._restore(path)

    def remove_path(self, path: str) -> bool:
        """Delete a dropped path, then its stamp (and an orphan backup beside a stamp); True if removed.

        The file goes first and its stamp last, so a re-run of a killed removal still finds the
        path recorded as ours.
        """
        removed = self._delete(path)
        stamp = self._join(noorig_path(path))
        if fsops.lstat_or_none(stamp) is not None:
            with _failing_as(f'deleting noorig file stamp "{noorig_path(path)}"'):
                fsops.remove(self._join(orig_path(path)))  # an orphan left by older daemons
                fsops.remove(stamp)
        return removed

    def _delete(self, path: str) -> bool:
        with _failing_as(f"unable to delete {path}"):
            removed = fsops.remove(self._join(path))
        if removed:
            log.info("removed stale %s", path)
        else:
            log.debug("%s: already absent", path)
        return removed

    # --- Ignition files ---------------------------------------------------------------------

    def _check_target(self, path: str, batch: Collection[str]) -> None:
        """Refuse a path where a directory sits, or under a non-directory, before anything is written."""
        host = self._join(path)
        st = fsops.lstat_or_none(host)
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise HostError(f'cannot write file "{path}": it is a directory')
        for parent in host.parents:
            if parent == self.root.prefix:
                break
            pst = fsops.lstat_or_none(parent)
            if pst is None:
                continue
            if not stat.S_ISDIR(pst.st_mode):
                where = self.root.relative(parent)
                raise HostError(f'cannot write file "{path}": {where} is not a directory')
            break
        ancestor = path.rpartition("/")[0]
        while ancestor:
            if ancestor in batch:
                raise HostError(f'cannot write file "{path}": "{ancestor}" is also written as a file')
            ancestor = ancestor.rpartition("/")[0]
        # the bookkeeping paths must be usable too
        self._join(orig_path(path))
        self._join(noorig_path(path))

    def write_files(
        self,
        files: Sequence[File],
        skip: Collection[str] = (),
        unchanged: Collection[str] = (),
        *,
        checked: bool = False,
    ) -> list[str]:
        """Write `files` (minus `skip`) with exact mode and owner; return the paths actually changed.

        `unchanged` names paths declared exactly as in the config already applied: when such a
        file is still exactly right on disk it is not looked at further (no record, no write).
        Everything is validated first (no append, owners known, paths inside the root, no
        directory in the way), so bad input writes nothing at all; `checked` says `check` already
        did that for this config. The originals' records (backups, stamps) are all durable before
        the first file is replaced; the files themselves are one `fsops.atomic_write_many` batch.
        """
        owners = self._owners(files, skip)
        if unchanged:
            owners = [o for o in owners if o[0].path not in unchanged or not self._on_disk(*o)]
        if not checked:
            paths = {f.path for f, _, _ in owners}
            for f, _, _ in owners:
                self._check_target(f.path, paths)
        for f, uid, gid in owners:
            self.backup_original(f.path, declared=partial(self._on_disk, f, uid, gid))
        writes = [
            fsops.Write(self._join(f.path), f.data, f.effective_mode, uid, gid, FILE_DIR_MODE)
            for f, uid, gid in owners
        ]
        try:
            changed = fsops.atomic_write_many(writes)
        except fsops.BatchWriteError as exc:
            raise HostError(f'writing file "{owners[exc.index][0].path}": {exc}') from exc
        written = [f.path for (f, _, _), done in zip(owners, changed, strict=True) if done]
        for path in written:
            log.info("wrote %s", path)
        return written

    def _owners(self, files: Sequence[File], skip: Collection[str]) -> list[tuple[File, int, int]]:
        owners: list[tuple[File, int, int]] = []
        for f in files:
            if f.path in skip:
                continue
            if f.append:
                raise HostError(APPEND_UNSUPPORTED)
            uid, gid = self.owner_of(f)
            owners.append((f, uid, gid))
        return owners

    def check(
        self,
        files: Sequence[File],
        units: Sequence[Unit],
        skip: Collection[str] = (),
        unchanged: Collection[str] = (),
    ) -> None:
        """Every check `write_files` and the unit writes make before writing, without writing.

        Owners resolvable in the root, no append, every file, unit file and dropin path (and its
        bookkeeping paths) inside the root with no directory or file in the way: run before an
        update records anything, so a config the host cannot take changes nothing at all. Paths in
        `unchanged` (declared as in the config already applied) only get the owner check.
        """
        owners = self._owners(files, skip)
        paths = {f.path for f, _, _ in owners}
        for f, _, _ in owners:
            # a path declared as in the applied config passed these checks when it was applied
            if f.path not in unchanged:
                self._check_target(f.path, paths)
        for u in units:
            unit_paths = [unit_path(u.name), *(dropin_path(u.name, d.name) for d in u.dropins)]
            for path in unit_paths:
                try:
                    self.root.join(path)
                    self._join(orig_path(path))
                    self._join(noorig_path(path))
                except PathEscapeError as exc:
                    raise HostError(str(exc)) from None

    def matches(self, f: File) -> bool:
        """Whether `f` is exactly on disk already; False when its owner cannot be resolved."""
        try:
            uid, gid = self.owner_of(f)
        except HostError:
            return False
        return self._on_disk(f, uid, gid)

    def has_backup(self, path: str) -> bool:
        """Whether dropping `path` restores an original: a `.mcdorig` backup and no stamp."""
        try:
            stamp, orig = self._join(noorig_path(path)), self._join(orig_path(path))
        except HostError:
            return False  # the removal reports the bad path
        return fsops.lstat_or_none(stamp) is None and fsops.lstat_or_none(orig) is not None

    def _on_disk(self, f: File, uid: int, gid: int) -> bool:
        """Whether `f` is exactly on disk already (type, mode, owner, bytes)."""
        try:
            host = self._join(f.path)
        except HostError:
            return False  # let the full path report it
        st = fsops.lstat_or_none(host)
        if st is None or not stat.S_ISREG(st.st_mode) or st.st_size != len(f.data):
            return False
        if stat.S_IMODE(st.st_mode) != f.effective_mode or (st.st_uid, st.st_gid) != (uid, gid):
            return False
        return fsops.holds_bytes(host, st, f.data)

    # --- unit files -------------------------------------------------------------------------

    def write_unit_files(self, items: Sequence[tuple[str, str | bytes, int]]) -> list[bool]:
        """Write unit files and dropins (path, contents, mode; dirs 0755), backing up originals first.

        Element i of the result is False when item i already had exactly these contents. Any
        unit file already there is backed up (from the CoreOS /usr/etc copy when there is one);
        every backup is durable before the first file is replaced. The systemd module's
        `write_files` hook.
        """
        writes: list[fsops.Write] = []
        for path, contents, mode in items:
            host = self._join(path)
            st = fsops.lstat_or_none(host)
            if st is not None and stat.S_ISDIR(st.st_mode):
                raise HostError(f'cannot write unit file "{path}": it is a directory')
            data = contents.encode() if isinstance(contents, str) else contents
            writes.append(fsops.Write(host, data, mode, dir_mode=FILE_DIR_MODE))
        for (path, _, _), w in zip(items, writes, strict=True):
            # any unit file already there is an original too (upstream: only CoreOS /usr/etc copies)
            source = "/usr" + path if self.coreos and self._exists("/usr" + path) else None
            self.backup_original(path, source, declared=partial(fsops.is_exactly, w.path, w.data, w.mode))
        try:
            return fsops.atomic_write_many(writes)
        except fsops.BatchWriteError as exc:
            raise HostError(f'failed to write systemd unit file "{items[exc.index][0]}": {exc}') from exc

    def mask_unit_path(self, path: str) -> bool:
        """Mask a unit: `path` becomes a link to /dev/null, what was there kept as its original.

        The unit file replaced by the mask is backed up like any other (upstream removes it with
        no copy) and comes back when the config drops the mask. A directory in the way cannot be
        kept: it is removed, as upstream does. True when the path changed. The systemd module's
        `mask_file` hook.
        """
        host = self._join(path)
        st = fsops.lstat_or_none(host)
        removed_dir = False
        if st is not None and stat.S_ISDIR(st.st_mode):
            with _failing_as(f'removing directory "{path}" to mask the unit'):
                removed_dir = fsops.remove_tree(host)
        source = "/usr" + path if self.coreos and self._exists("/usr" + path) else None
        self.backup_original(path, source, declared=partial(fsops.is_link_to, host, DEV_NULL))
        with _failing_as(f'masking "{path}"'):
            return fsops.atomic_symlink(host, DEV_NULL) or removed_dir

    def unmask_unit_path(self, path: str) -> bool:
        """Undo a mask (`mask: false` and no contents): the original comes back, or the link goes.

        With a backup the original is restored; with a stamp, or with no record at all (a mask
        made by Ignition or by hand), the path is removed as upstream does. True when it changed.
        The systemd module's `unmask_file` hook.
        """
        if fsops.lstat_or_none(self._join(noorig_path(path))) is None and self._lexists(orig_path(path)):
            return self._restore(path)
        host = self._join(path)
        with _failing_as(f'unmasking "{path}"'):
            removed = fsops.remove_tree(host)
            fsops.remove(self._join(noorig_path(path)))
        if removed:
            log.info("Removed %s to unmask it", path)
        return removed

    def remove_unit_path(self, path: str) -> bool:
        """Remove a unit file or dropin the config no longer wants, with backup semantics.

        A backup (and no stamp) is restored and kept until `collect_restored`; otherwise the file
        (or mask link) is deleted and its stamp dropped. True when the path changed. The systemd
        module's `remove_file` hook.
        """
        return self._prune_unit_path(path)

    # --- stale data -------------------------------------------------------------------------

    def _prune_file(self, path: str, new_units: Sequence[Unit]) -> bool:
        """Handle one file dropped from storage.files (stamp: delete, backup: restore); True on a change."""
        orig = self._join(orig_path(path))
        stamp = self._join(noorig_path(path))
        keep = path_in_dropins(path, new_units)
        if keep:
            log.info("not removing file %s: replaced with systemd dropin", path)
        if fsops.lstat_or_none(stamp) is not None:
            removed = False if keep else self._delete(path)
            with _failing_as(f'deleting noorig file stamp "{noorig_path(path)}"'):
                fsops.remove(orig)  # an orphan left by older daemons
                fsops.remove(stamp)
            return removed
        if fsops.lstat_or_none(orig) is not None:
            # every original is restored, OS-shipped or not (upstream restores only OS files)
            return self._restore(path)
        if keep or not self.delete_unrecorded:
            return False
        return self._delete(path)

    def _prune_unit_path(self, path: str) -> bool:
        """Handle a dropped unit file or dropin: backup → restore, else delete (and drop a stamp)."""
        orig = self._join(orig_path(path))
        stamp = self._join(noorig_path(path))
        has_stamp = fsops.lstat_or_none(stamp) is not None
        if not has_stamp and fsops.lstat_or_none(orig) is not None:
            return self._restore(path)
        if not has_stamp and not self.delete_unrecorded:
            return False
        removed = self._delete(path)
        if has_stamp:
            with _failing_as(f'deleting noorig file stamp "{noorig_path(path)}"'):
                fsops.remove(orig)  # an orphan left by older daemons
                fsops.remove(stamp)
        return removed

    def delete_stale(self, old: IgnitionConfig, new: IgnitionConfig) -> list[str]:
        """Remove or restore what `old` declared and `new` does not (upstream deleteStaleData).

        Only files on disk: running `systemctl preset` for removed units is the caller's job,
        done before this. Returns the paths changed (removed, or restored over other content).
        The backups of restored originals stay for a re-run; `collect_restored` drops them.
        """
        changed: list[str] = []
        new_files = {f.path for f in new.files}
        for f in old.files:
            if f.path in new_files or never_deleted(f.path):
                continue
            if self._prune_file(f.path, new.units):
                changed.append(f.path)

        new_unit_paths = {unit_path(u.name) for u in new.units}
        new_dropin_paths = {dropin_path(u.name, d.name) for u in new.units for d in u.dropins}
        for u in old.units:
            for d in u.dropins:
                path = dropin_path(u.name, d.name)
                if path not in new_dropin_paths and self._prune_unit_path(path):
                    changed.append(path)
            path = unit_path(u.name)
            if path not in new_unit_paths and self._prune_unit_path(path):
                changed.append(path)

        for link in LEAKED_SYMLINKS:
            try:
                host = self.root.join(link)
            except PathEscapeError as exc:  # nothing of ours can be there: leave it be
                log.warning("not removing %s: %s", link, exc)
                continue
            with _failing_as(f'error deleting "{link}"'):
                if fsops.remove(host):
                    log.info("removed stale symlink %s", link)
                    changed.append(link)
        return changed
