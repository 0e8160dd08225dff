"""Units on disk: unit files, dropins and masks (with their originals), and the unit writer.

`UnitFiles` writes and removes the files of units under /etc/systemd/system, recording every
original first (`mcd.host.originals`); `UnitWriter` applies an Ignition unit list in the order
upstream's writeUnits uses, asking a `SystemdManager` for enablement. The executor runs the
`UnitFiles` operations one step at a time; a rollback applies the old config back through
`UnitWriter`, with `keep_unrecorded` so paths the failed update never reached stay as they are.

Masking is done by hand (remove the path, link it to /dev/null) as upstream does:
`systemctl mask` refuses when a unit file already exists in /etc/systemd/system.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Protocol

from mcd.config.ignition import Unit
from mcd.host import atomicfs, batchwrite
from mcd.host.dirsync import DirSync
from mcd.host.errors import HostError
from mcd.host.originals import FILE_DIR_MODE, Originals, failing_as, noorig_path, orig_path
from mcd.host.root import HostRoot, PathEscapeError
from mcd.host.systemd import SystemdError, SystemdManager, enabled_among
from mcd.planner.managed_paths import (
    DEV_NULL,
    INSTALL_HEADER,
    UNIT_DIR,
    UNIT_FILE_MODE,
    dropin_path,
    install_section,
    unit_path,
)

log = logging.getLogger(__name__)


class UnitFileOps(Protocol):
    """The file operations the unit writer needs (config paths); True when the path changed."""

    def write_unit_files(self, items: Sequence[tuple[str, str | bytes, int]]) -> list[bool]:
        """Write (path, contents, mode) as one batch; element i False when item i was already so."""
        ...

    def remove_unit_path(self, path: str, *, keep_unrecorded: bool = False) -> bool:
        """Remove a unit file or dropin the config dropped."""
        ...

    def remove_empty_dropin(self, path: str, *, keep_unrecorded: bool = False) -> bool:
        """Delete a dropin the config declares empty (a backup is not restored)."""
        ...

    def mask_unit_path(self, path: str) -> bool:
        """Make the unit's path a link to /dev/null."""
        ...

    def unmask_unit_path(self, path: str) -> bool:
        """Undo a mask."""
        ...


class PlainUnitFiles:
    """Crash-safe unit file operations that keep no originals (a root the daemon does not manage)."""

    def __init__(self, root: HostRoot, dirsync: DirSync | None = None) -> None:
        self._root = root
        self._sync = dirsync

    def write_unit_files(self, items: Sequence[tuple[str, str | bytes, int]]) -> list[bool]:
        """One atomic batch."""
        writes = [
            batchwrite.Write(self._root.join(p), d.encode() if isinstance(d, str) else d, m)
            for p, d, m in items
        ]
        return batchwrite.atomic_write_many(writes, sync=self._sync)

    def remove_unit_path(self, path: str, *, keep_unrecorded: bool = False) -> bool:
        """Delete the path (nothing is recorded, so nothing is kept)."""
        return atomicfs.remove(self._root.join(path), dirsync=self._sync)

    def remove_empty_dropin(self, path: str, *, keep_unrecorded: bool = False) -> bool:
        """Delete the path (nothing is recorded, so nothing is kept)."""
        return atomicfs.remove(self._root.join(path), dirsync=self._sync)

    def mask_unit_path(self, path: str) -> bool:
        """Link to /dev/null; a directory in the way goes first (a rename replaces anything else)."""
        host = self._root.join(path)
        st = atomicfs.lstat_or_none(host)
        is_dir = st is not None and stat.S_ISDIR(st.st_mode)
        removed_dir = is_dir and atomicfs.remove_tree(host, dirsync=self._sync)
        return atomicfs.atomic_symlink(host, DEV_NULL, dirsync=self._sync) or removed_dir

    def unmask_unit_path(self, path: str) -> bool:
        """Remove the mask link."""
        return atomicfs.remove_tree(self._root.join(path), dirsync=self._sync)


class UnitFiles:
    """Unit files, dropins and masks under one root, every original kept (`Originals`)."""

    def __init__(self, originals: Originals) -> None:
        self.originals = originals
        self.coreos = originals.coreos

    def write_unit_files(self, items: Sequence[tuple[str, str | bytes, int]]) -> list[bool]:
        """Write unit files and dropins (path, contents, mode; dirs 0755), backing up originals first.

        Element i of the result is False when item i already had exactly these contents. Any
        unit file already there is backed up (from the CoreOS /usr/etc copy when there is one);
        every backup is durable before the first file is replaced.
        """
        writes: list[batchwrite.Write] = []
        for path, contents, mode in items:
            host = self.originals.join(path)
            st = atomicfs.lstat_or_none(host)
            if st is not None and stat.S_ISDIR(st.st_mode):
                raise HostError(f'cannot write unit file "{path}": it is a directory')
            data = contents.encode() if isinstance(contents, str) else contents
            writes.append(batchwrite.Write(host, data, mode, dir_mode=FILE_DIR_MODE))
        for (path, _, _), w in zip(items, writes, strict=True):
            # any unit file already there is an original too (upstream: only CoreOS /usr/etc copies)
            source = "/usr" + path if self.coreos and self.originals.exists("/usr" + path) else None
            self.originals.backup(
                path, source, declared=partial(atomicfs.is_exactly, w.path, w.data, w.mode), unit=True
            )
        try:
            return batchwrite.atomic_write_many(writes, sync=self.originals.dirsync)
        except batchwrite.BatchWriteError as exc:
            raise HostError(f'failed to write systemd unit file "{items[exc.index][0]}": {exc}') from exc

    def mask_unit_path(self, path: str) -> bool:
        """Mask a unit: `path` becomes a link to /dev/null, what was there kept as its original.

        The unit file replaced by the mask is backed up like any other (upstream removes it with
        no copy) and comes back when the config drops the mask. A directory in the way cannot be
        kept: it is removed, as upstream does. True when the path changed.
        """
        host = self.originals.join(path)
        st = atomicfs.lstat_or_none(host)
        removed_dir = False
        if st is not None and stat.S_ISDIR(st.st_mode):
            with failing_as(f'removing directory "{path}" to mask the unit'):
                removed_dir = atomicfs.remove_tree(host, dirsync=self.originals.dirsync)
        source = "/usr" + path if self.coreos and self.originals.exists("/usr" + path) else None
        self.originals.backup(path, source, declared=partial(atomicfs.is_link_to, host, DEV_NULL), unit=True)
        with failing_as(f'masking "{path}"'):
            return atomicfs.atomic_symlink(host, DEV_NULL, dirsync=self.originals.dirsync) or removed_dir

    def unmask_unit_path(self, path: str) -> bool:
        """Undo a mask (`mask: false` and no contents): the original comes back, or the link goes.

        With a backup the original is restored; with a stamp, or with no record at all (a mask
        made by Ignition or by hand), the path is removed as upstream does. True when it changed.
        """
        if atomicfs.lstat_or_none(self.originals.join(noorig_path(path))) is None and self.originals.lexists(
            orig_path(path)
        ):
            return self.originals.restore(path)
        host = self.originals.join(path)
        with failing_as(f'unmasking "{path}"'):
            removed = atomicfs.remove_tree(host, dirsync=self.originals.dirsync)
            atomicfs.remove(self.originals.join(noorig_path(path)), dirsync=self.originals.dirsync)
        if removed:
            log.info("Removed %s to unmask it", path)
        return removed

    def remove_unit_path(self, path: str, *, keep_unrecorded: bool = False) -> bool:
        """Remove a unit file or dropin the config no longer wants, with backup semantics.

        A backup (and no stamp) is restored and kept until `collect_restored`; otherwise the file
        (or mask link) is deleted and its stamp dropped; with `keep_unrecorded` (a rollback) a
        path with neither is left alone. True when the path changed.
        """
        return self.originals.prune_unit_path(path, keep_unrecorded=keep_unrecorded)

    def remove_empty_dropin(self, path: str, *, keep_unrecorded: bool = False) -> bool:
        """Delete a dropin declared empty, as upstream: its backup is kept, not restored.

        The original comes back only when a config drops the dropin (`remove_unit_path`). With
        `keep_unrecorded` (a rollback) a path with neither backup nor stamp is left alone.
        """
        if keep_unrecorded and not (
            self.originals.lexists(noorig_path(path)) or self.originals.lexists(orig_path(path))
        ):
            return False
        return self.originals.remove_path(path)


@dataclass(frozen=True)
class UnitResult:
    """What a UnitWriter pass changed (config paths and unit names, in processing order)."""

    written: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    masked: tuple[str, ...] = ()
    disabled_before_write: tuple[str, ...] = ()
    enabled: tuple[str, ...] = ()
    disabled: tuple[str, ...] = ()
    preset: tuple[str, ...] = ()
    preset_failed: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()

    @property
    def files_changed(self) -> bool:
        """True when any unit file, dropin or mask link was created, changed or removed."""
        return bool(self.written or self.removed or self.masked)


class UnitWriter:
    """Applies Ignition units to a root (upstream's writeUnits) and cleans up removed ones.

    Unit files, dropins and masks go through `files` (config paths): `UnitFiles` keeps every
    original it replaces; without one, `PlainUnitFiles` writes crash-safe but keeps nothing.
    """

    def __init__(self, root: HostRoot, manager: SystemdManager, files: UnitFileOps | None = None) -> None:
        self._root = root
        self._manager = manager
        self.files: UnitFileOps = files if files is not None else PlainUnitFiles(root)

    def is_regular_file(self, path: str) -> bool:
        """Whether the config path is a regular file (not a link, a mask or absent)."""
        return self._is_regular_file(path)

    def _is_regular_file(self, path: str) -> bool:
        st = atomicfs.lstat_or_none(self._root.join(path))
        return st is not None and stat.S_ISREG(st.st_mode)

    def install_may_change(self, unit: Unit) -> bool:
        """Whether rewriting `unit`'s file could change the links its enablement makes.

        False when the file already holds the new contents, or when its [Install] section is
        the same text as the new one and no dropin of the unit in /etc/systemd/system (on disk
        or in the config) has an [Install] section: then `enable` makes the same links from the
        new file as from the old one, and no link of the old can leak.
        """
        path = unit_path(unit.name)
        if not self._is_regular_file(path):
            return True
        new = (unit.contents or "").encode()
        old = atomicfs.read_bytes_nofollow(self._root.join(path))
        if old == new:
            return False
        if old is None or install_section(old) != install_section(new):
            return True
        if any(d.contents and INSTALL_HEADER in d.contents.encode() for d in unit.dropins):
            return True
        return self._dropins_on_disk_mention_install(unit.name)

    def _dropins_on_disk_mention_install(self, name: str) -> bool:
        try:
            directory = self._root.join(f"{UNIT_DIR}/{name}.d", follow_final=True)
            entries = os.listdir(directory)
        except (FileNotFoundError, NotADirectoryError):
            return False
        except (OSError, PathEscapeError):
            return True  # cannot tell: keep the disable
        for entry in entries:
            try:
                data = atomicfs.read_bytes_nofollow(directory / entry)
            except OSError:
                return True
            if data is not None and INSTALL_HEADER in data:
                return True
        return False

    def write_units(self, units: Sequence[Unit], *, keep_unrecorded: bool = False) -> UnitResult:
        """Write dropins, masks and unit files, then apply enablement (spec §4.4).

        Raises SystemdError (`error enabling units: …` / `error disabling unit: …`) when the
        final enable or disable fails; a failed preset is only logged.
        """
        disabled_first = self._disable_changing(units)

        # every file first (one batch of writes), then enablement: a preset or enable reads them
        written: list[str] = []
        removed: list[str] = []
        masked: list[str] = []
        writes: list[tuple[str, bytes, int]] = []
        for unit in units:
            self._dropins(unit, writes, removed, keep_unrecorded=keep_unrecorded)
            path = unit_path(unit.name)
            if unit.mask:
                if self.files.mask_unit_path(path):
                    masked.append(unit.name)
            elif unit.contents:
                writes.append((path, unit.contents.encode(), UNIT_FILE_MODE))
            elif unit.mask is False and self.files.unmask_unit_path(path):
                # An explicit `mask: false` without contents clears an earlier mask.
                log.info("Unmasked %s (%s)", unit.name, path)
                removed.append(path)
        if writes:
            done = self.files.write_unit_files(writes)
            written = [path for (path, _, _), changed in zip(writes, done, strict=True) if changed]

        to_enable: list[str] = []
        to_disable: list[str] = []
        preset: list[str] = []
        preset_failed: list[str] = []
        skipped: list[str] = []
        for unit in units:
            if unit.enabled is None:
                # Presets one by one: one failing (e.g. a dropin for a unit that does not exist)
                # must not stop the others.
                if self._preset(unit.name, "Could not reset unit preset for %s, skipping. (Error msg: %s)"):
                    preset.append(unit.name)
                else:
                    preset_failed.append(unit.name)
            elif unit.contents or self._manager.unit_file_known(unit.name):
                (to_enable if unit.enabled else to_disable).append(unit.name)
            else:
                action = "enable" if unit.enabled else "disable"
                log.info('Could not %s unit "%s", because it has no contents, skipping', action, unit.name)
                skipped.append(unit.name)

        if to_enable:
            try:
                self._manager.enable(to_enable)
            except SystemdError as e:
                raise SystemdError(f"error enabling units: {e.output}", dbus_name=e.dbus_name) from e
            log.info("Enabled systemd units: %s", " ".join(to_enable))
        if to_disable:
            try:
                self._manager.disable(to_disable)
            except SystemdError as e:
                raise SystemdError(f"error disabling unit: {e.output}", dbus_name=e.dbus_name) from e
            log.info("Disabled systemd units: %s", " ".join(to_disable))
        return UnitResult(
            written=tuple(written),
            removed=tuple(removed),
            masked=tuple(masked),
            disabled_before_write=tuple(disabled_first),
            enabled=tuple(to_enable),
            disabled=tuple(to_disable),
            preset=tuple(preset),
            preset_failed=tuple(preset_failed),
            skipped=tuple(skipped),
        )

    def _disable_changing(self, units: Sequence[Unit]) -> list[str]:
        """Disable the enabled units whose [Install] section is about to change; their names.

        Links made from the old section must not outlive it; the final enable recreates the
        right ones. Upstream asks for every unit with contents; asking only for units whose
        [Install] may change gives the same links (enable makes the same ones from the same
        section) and leaves the other units' links alone. (Offline the answer mostly comes from
        the links, without a systemctl process.)
        """
        changing = [u.name for u in units if not u.mask and u.contents and self.install_may_change(u)]
        disabled_first: list[str] = []
        if changing:
            enabled_now = enabled_among(self._manager, changing)
            disabled_first = [name for name in changing if name in enabled_now]
        if disabled_first:
            log.info("Disabling systemd units %s before re-writing them", " ".join(disabled_first))
            try:
                self._manager.disable(disabled_first)
            except SystemdError as e:
                raise SystemdError(
                    f"disabling {' '.join(disabled_first)} failed: {e.output}", dbus_name=e.dbus_name
                ) from e
        return disabled_first

    def _dropins(
        self, unit: Unit, writes: list[tuple[str, bytes, int]], removed: list[str], *, keep_unrecorded: bool
    ) -> None:
        """Queue the writes of `unit`'s dropins; remove the ones declared empty."""
        for dropin in unit.dropins:
            path = dropin_path(unit.name, dropin.name)
            if not dropin.contents:
                # An empty dropin means "no dropin": remove one left by an earlier config.
                if self.files.remove_empty_dropin(path, keep_unrecorded=keep_unrecorded):
                    log.info("Removed %s: the dropin has no contents", path)
                    removed.append(path)
            else:
                writes.append((path, dropin.contents.encode(), UNIT_FILE_MODE))

    def _preset(self, name: str, failure_message: str) -> bool:
        try:
            self._manager.preset(name)
        except SystemdError as e:
            log.info(failure_message, name, e.output)
            return False
        return True

    def remove_units(
        self, old_units: Sequence[Unit], new_units: Sequence[Unit], *, keep_unrecorded: bool = False
    ) -> UnitResult:
        """Remove what `old_units` declared and `new_units` no longer does (spec §4.3, stale data).

        Dropins gone from the new config are removed. A unit gone from it is preset first (a
        failure is only logged), then, if its file in /etc/systemd/system is a regular file,
        disabled so no link made from its [Install] section is left dangling, then its file is
        removed through `remove_file` (a restored original is not preset again, as upstream).
        """
        new_names = {u.name for u in new_units}
        new_dropins = {dropin_path(u.name, d.name) for u in new_units for d in u.dropins}
        removed: list[str] = []
        for unit in old_units:
            for dropin in unit.dropins:
                path = dropin_path(unit.name, dropin.name)
                if path not in new_dropins and self.files.remove_unit_path(
                    path, keep_unrecorded=keep_unrecorded
                ):
                    log.info("Removed stale systemd dropin %s", path)
                    removed.append(path)

        stale = list(dict.fromkeys(u.name for u in old_units if u.name not in new_names))
        preset: list[str] = []
        preset_failed: list[str] = []
        for name in stale:
            ok = self._preset(name, "Did not restore preset for %s (may not exist): %s")
            (preset if ok else preset_failed).append(name)
        owned = [name for name in stale if self._is_regular_file(unit_path(name))]
        if owned:
            try:
                self._manager.disable(owned)
            except SystemdError as e:
                raise SystemdError(f"error disabling unit: {e.output}", dbus_name=e.dbus_name) from e
        for name in stale:
            path = unit_path(name)
            if self.files.remove_unit_path(path, keep_unrecorded=keep_unrecorded):
                log.info("Removed stale systemd unit %s", path)
                removed.append(path)

        # the leaked enablement links (LEAKED_SYMLINKS) are removed by FileWriter.delete_stale
        return UnitResult(
            removed=tuple(removed),
            disabled=tuple(owned),
            preset=tuple(preset),
            preset_failed=tuple(preset_failed),
        )
