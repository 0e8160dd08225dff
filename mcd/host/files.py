"""Ignition files on disk: owners, exact modes and contents, the checks before writing, stale data.

Every path is recorded before it is first replaced (`mcd.host.originals`: a backup of what was
there, or a stamp saying nothing was), so dropping it later restores the original or deletes
it. Writes are crash-safe (`atomicfs`): files are one atomic batch, and the records of the
originals are durable before the first file is replaced.
"""

from __future__ import annotations

import logging
import posixpath
import stat
from collections.abc import Callable, Collection, Sequence
from functools import partial
from pathlib import Path

from mcd.config.ignition import File, IgnitionConfig, Unit
from mcd.host import atomicfs, batchwrite
from mcd.host.accounts import Accounts, UnknownGroup, UnknownUser
from mcd.host.dirsync import DirSync
from mcd.host.errors import HostError
from mcd.host.originals import FILE_DIR_MODE, Originals, failing_as, noorig_path, orig_path
from mcd.host.root import HostRoot, PathEscapeError
from mcd.host.streamdata import contents
from mcd.planner.managed_paths import LEAKED_SYMLINKS, dropin_path, never_deleted, unit_path

log = logging.getLogger(__name__)

APPEND_UNSUPPORTED = "found an append section when writing files. Append is not supported"


def _named_owner(f: File) -> bool:
    """Whether `f`'s owner or group is found by name in the root (ids win over names)."""
    return bool((f.user.id is None and f.user.name) or (f.group.id is None and f.group.name))


class FileWriter:
    """Writes Ignition files under one root; `originals` keeps every original it replaces."""

    def __init__(
        self, root: HostRoot, accounts: Accounts, coreos: bool = True, *, dirsync: DirSync | None = None
    ) -> None:
        self.root = root
        self.accounts = accounts
        self.coreos = coreos
        # the directory syncs the update transaction defers (`Host.for_root` hands the same object
        # to every writer of the update): syncs at once outside its block
        self.dirsync = dirsync or DirSync()
        self.originals = Originals(root, coreos, self.matches, dirsync=self.dirsync)

    def _join(self, path: str, *, follow_final: bool = False) -> Path:
        try:
            return self.root.join(path, follow_final=follow_final)
        except PathEscapeError as exc:
            raise HostError(f'cannot use path "{path}": {exc}') from exc

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

    def _check_target(self, path: str, batch: Collection[str]) -> None:
        """Refuse a path where a directory sits, or under a non-directory, before anything is written."""
        try:
            host = self.root.join_str(path)  # a string: checked for thousands of paths
        except PathEscapeError as exc:
            raise HostError(f'cannot use path "{path}": {exc}') from exc
        st = atomicfs.lstat_or_none(host)
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise HostError(f'cannot write file "{path}": it is a directory')
        prefix = str(self.root.prefix)
        parent = posixpath.dirname(host)
        # the nearest existing ancestor decides (joined paths lie under the prefix)
        while parent not in (prefix, "/"):
            pst = atomicfs.lstat_or_none(parent)
            if pst is None:
                parent = posixpath.dirname(parent)
                continue
            if not stat.S_ISDIR(pst.st_mode):
                where = self.root.relative(Path(parent))
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
        the first file is replaced; the files themselves are one `batchwrite.atomic_write_many` batch.
        """
        owners = self._owners(files, skip)
        if unchanged:
            owners = [o for o in owners if o[0].path not in unchanged or not self._on_disk(*o)]
        if not checked:
            paths = {f.path for f, _, _ in owners}
            for f, _, _ in owners:
                self._check_target(f.path, paths)
        for f, uid, gid in owners:
            self.originals.backup(f.path, declared=partial(self._on_disk, f, uid, gid))
        writes = [
            batchwrite.Write(self._join(f.path), contents(f), f.effective_mode, uid, gid, FILE_DIR_MODE)
            for f, uid, gid in owners
        ]
        try:
            changed = batchwrite.atomic_write_many(writes, sync=self.dirsync)
        except batchwrite.BatchWriteError as exc:
            raise HostError(f'writing file "{owners[exc.index][0].path}": {exc}') from exc
        written = [f.path for (f, _, _), done in zip(owners, changed, strict=True) if done]
        for path in written:
            log.info("wrote %s", path)
        return written

    def _owners(
        self, files: Sequence[File], skip: Collection[str], resolve: Callable[[File], bool] | None = None
    ) -> list[tuple[File, int, int]]:
        """(file, uid, gid) of each file not skipped (of those `resolve` asks for), in order; the
        first file with an append section or an owner not found fails it."""
        owners: list[tuple[File, int, int]] = []
        for f in files:
            if f.path in skip:
                continue
            if f.append:
                raise HostError(APPEND_UNSUPPORTED)
            if resolve is not None and not resolve(f):
                continue
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
        `unchanged` (declared as in the config already applied) only get the owner check, when
        their owner is named.
        """
        paths = {f.path for f in files if f.path not in skip}
        # a file declared as in the applied config passed these checks when it was applied; only
        # an owner named (not numbered) is looked up again: the root's accounts may have changed
        owners = self._owners(files, skip, lambda f: f.path not in unchanged or _named_owner(f))
        for f, _, _ in owners:
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

    def _on_disk(self, f: File, uid: int, gid: int) -> bool:
        """Whether `f` is exactly on disk already (type, mode, owner, bytes)."""
        try:
            host = self.root.join_str(f.path)
        except PathEscapeError:
            return False  # let the full path report it
        st = atomicfs.lstat_or_none(host)
        if st is None or not stat.S_ISREG(st.st_mode) or st.st_size != f.size:
            return False
        if stat.S_IMODE(st.st_mode) != f.effective_mode or (st.st_uid, st.st_gid) != (uid, gid):
            return False
        return atomicfs.holds_bytes(host, st, contents(f))

    def delete_stale(
        self, old: IgnitionConfig, new: IgnitionConfig, *, keep_unrecorded: bool = False
    ) -> list[str]:
        """Remove or restore what `old` declared and `new` does not (upstream deleteStaleData).

        Only files on disk: running `systemctl preset` for removed units is the caller's job,
        done before this. Returns the paths changed (removed, or restored over other content).
        The backups of restored originals stay for a re-run; `collect_restored` drops them.
        `keep_unrecorded` (a rollback) leaves paths with neither backup nor stamp alone.
        """
        changed: list[str] = []
        new_files = {f.path for f in new.files}
        for f in old.files:
            if f.path in new_files or never_deleted(f.path):
                continue
            if self.originals.prune_file(f.path, new.units, keep_unrecorded=keep_unrecorded):
                changed.append(f.path)

        prune = self.originals.prune_unit_path
        new_unit_paths = {unit_path(u.name) for u in new.units}
        new_dropin_paths = {dropin_path(u.name, d.name) for u in new.units for d in u.dropins}
        for u in old.units:
            for d in u.dropins:
                path = dropin_path(u.name, d.name)
                if path not in new_dropin_paths and prune(path, keep_unrecorded=keep_unrecorded):
                    changed.append(path)
            path = unit_path(u.name)
            if path not in new_unit_paths and prune(path, keep_unrecorded=keep_unrecorded):
                changed.append(path)

        for link in LEAKED_SYMLINKS:
            try:
                host = self.root.join(link)
            except PathEscapeError as exc:  # nothing of ours can be there: leave it be
                log.warning("not removing %s: %s", link, exc)
                continue
            with failing_as(f'error deleting "{link}"'):
                if atomicfs.remove(host, dirsync=self.dirsync):
                    log.info("removed stale symlink %s", link)
                    changed.append(link)
        return changed
