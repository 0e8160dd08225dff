"""systemd units on the node: unit files, dropins, mask/unmask and enablement.

Two parts. A SystemdManager does what only systemd's own code should do (enable, disable,
preset, state queries, reloads and restarts); there are three: `systemctl --root=<prefix>`
when the root is a directory (systemd's install logic works offline), the D-Bus client on the
live host, and plain `systemctl` on the live host when the bus is unreachable. A UnitWriter
applies an Ignition unit list on top of one, in the order upstream's writeUnits uses.

Offline, each systemctl call is a process; the offline manager reads the root's links (see
mcd.host.unitlinks) to skip the `is-enabled` questions and the `disable` runs whose answer or
effect the files already settle, and hands everything else to systemctl unchanged.

Masking is done by hand (remove the path, link it to /dev/null) as upstream does:
`systemctl mask` refuses when a unit file already exists in /etc/systemd/system.
"""

from __future__ import annotations

import logging
import os
import re
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from mcd.config.ignition import Unit
from mcd.host import fsops
from mcd.host.files import UNIT_FILE_MODE
from mcd.host.root import HostRoot, PathEscapeError
from mcd.host.runner import CommandResult, Runner
from mcd.host.systemd_dbus import BusUnavailable, DbusSystemd, SystemdError
from mcd.host.unitlinks import UnitLinks, enabled_from_links
from mcd.paths import (
    DEV_NULL,
    INSTALL_HEADER,
    LEAKED_SYMLINKS,
    UNIT_DIR,
    dropin_path,
    install_section,
    unit_path,
)

log = logging.getLogger(__name__)


__all__ = [
    "DEV_NULL",
    "LEAKED_SYMLINKS",
    "UNIT_DIR",
    "BusUnavailable",
    "LiveSystemctl",
    "MaskFile",
    "OfflineSystemctl",
    "RemoveFile",
    "SystemdError",
    "SystemdManager",
    "UnitResult",
    "UnitWriter",
    "WriteFiles",
    "dropin_path",
    "enabled_among",
    "make_manager",
    "unit_path",
]


class SystemdManager(Protocol):
    """What the daemon asks of systemd; failures raise SystemdError with systemd's output."""

    def enable(self, names: Sequence[str]) -> None:
        """Enable all `names` in one operation."""
        ...

    def disable(self, names: Sequence[str]) -> None:
        """Disable all `names` in one operation."""
        ...

    def preset(self, name: str) -> None:
        """Reset `name`'s enablement to the preset policy."""
        ...

    def is_enabled(self, names: Sequence[str]) -> dict[str, str]:
        """Unit-file state of each name, `not-found` for names systemd has no file for."""
        ...

    def daemon_reload(self) -> None:
        """Make the running manager re-read unit files."""
        ...

    def reload(self, unit: str) -> None:
        """Reload a running unit."""
        ...

    def restart(self, unit: str) -> None:
        """Restart a unit and wait for it."""
        ...

    def unit_file_known(self, name: str) -> bool:
        """Whether systemd has a unit file of that name anywhere on its search path."""
        ...


# where systemd looks for unit files (system instance), most specific first
UNIT_SEARCH_PATH = (
    "/etc/systemd/system",
    "/run/systemd/system",
    "/usr/local/lib/systemd/system",
    "/usr/lib/systemd/system",
    "/lib/systemd/system",
)


def _output(result: CommandResult) -> str:
    # Upstream quotes systemctl's combined output; ours keeps both streams, stdout first.
    return "".join(part for part in (result.stdout, result.stderr) if part).strip()


def _glob_escape(name: str) -> str:
    # list-unit-files takes fnmatch patterns; unit names may contain `[` (escaped instances).
    return re.sub(r"([*?\[\\])", r"\\\1", name)


_NOT_FOUND_MARKERS = ("No such file or directory", "not found", "does not exist")


class _Systemctl:
    """The systemctl-backed manager; `root_args` selects the offline root (or none: live)."""

    def __init__(self, runner: Runner, root_args: tuple[str, ...]) -> None:
        self._runner = runner
        self._root_args = root_args

    def _run(self, *args: str) -> CommandResult:
        return self._runner.run(["systemctl", *self._root_args, *args], check=False)

    def _checked(self, *args: str) -> None:
        result = self._run(*args)
        if result.returncode != 0:
            raise SystemdError(_output(result))

    def enable(self, names: Sequence[str]) -> None:
        """`systemctl enable <names…>`."""
        if names:
            self._checked("enable", *names)

    def disable(self, names: Sequence[str]) -> None:
        """`systemctl disable <names…>`."""
        if names:
            self._checked("disable", *names)

    def preset(self, name: str) -> None:
        """`systemctl preset <name>`."""
        self._checked("preset", name)

    def is_enabled(self, names: Sequence[str]) -> dict[str, str]:
        """`systemctl is-enabled <names…>`: one state line per name, in order.

        It exits non-zero when any unit is not enabled, and stops at the first name it has no
        file for (older systemd prints only an error for it), so a short answer is resumed
        after that name.
        """
        states: dict[str, str] = {}
        rest = list(names)
        while rest:
            result = self._run("is-enabled", *rest)
            lines = [line.strip() for line in result.stdout.splitlines() if line.strip()]
            states.update(zip(rest, lines, strict=False))
            if len(lines) >= len(rest):
                break
            missing = rest[len(lines)]
            if not any(marker in result.stderr for marker in _NOT_FOUND_MARKERS):
                raise SystemdError(_output(result))
            states[missing] = "not-found"
            rest = rest[len(lines) + 1 :]
        return {name: states[name] for name in names}

    def unit_file_known(self, name: str) -> bool:
        """`systemctl list-unit-files <name>` lists it."""
        result = self._run("list-unit-files", "--no-legend", "--no-pager", "--full", _glob_escape(name))
        return any(line.split()[0] == name for line in result.stdout.splitlines() if line.strip())


class OfflineSystemctl(_Systemctl):
    """systemctl's install logic on a root directory (`systemctl --root=<prefix>`); no running manager."""

    def __init__(self, root: HostRoot, runner: Runner) -> None:
        super().__init__(runner, (f"--root={root.prefix}",))
        self._root = root

    def is_enabled(self, names: Sequence[str]) -> dict[str, str]:
        """As systemctl answers, but names with no unit file on the root's search path are
        `not-found` without asking: offline systemctl stops at each of them, so asking about many
        new units would cost one process per unit."""
        known = [n for n in names if self._has_unit_file(n)]
        states = super().is_enabled(known) if known else {}
        return {n: states.get(n, "not-found") for n in names}

    def enabled_among(self, names: Sequence[str]) -> frozenset[str]:
        """The names whose state `is-enabled` reports as `enabled`, read from the root's links
        where they settle it; systemctl is asked about the rest only."""
        enabled, unsure = enabled_from_links(self._root, names)
        if unsure:
            states = self.is_enabled(unsure)
            enabled |= {name for name in unsure if states[name] == "enabled"}
        return enabled

    def disable(self, names: Sequence[str]) -> None:
        """`systemctl disable <names…>`, leaving out the names it would provably do nothing for.

        Disabling a unit removes links named after it or leading to it (and those of the units
        its [Install] `Also=` names). A unit whose only file is a plain one in /etc/systemd/system
        with no `Also=`, and that no link under /etc/systemd/system names or leads to, has nothing
        to remove; leaving it out saves a process and changes nothing on disk.
        """
        if names:
            rest = UnitLinks(self._root).needing_disable(names)
            if rest:
                super().disable(rest)

    def _has_unit_file(self, name: str) -> bool:
        base, at, rest = name.partition("@")
        candidates = [name] if not at else [name, f"{base}@{rest[rest.rfind('.') :]}"]
        for directory in UNIT_SEARCH_PATH:
            for candidate in candidates:
                try:
                    if fsops.lstat_or_none(self._root.join(f"{directory}/{candidate}")) is not None:
                        return True
                except PathEscapeError:
                    return True  # let systemctl itself judge an odd layout
        return False

    # Nothing runs under an offline root: there is no manager to reload and no unit to
    # (re)start. The files are in place, so the next boot of that root picks them up.
    def daemon_reload(self) -> None:
        """Not possible offline: logged and skipped."""
        log.info("daemon-reload skipped: no running systemd under %s", self._root.prefix)

    def reload(self, unit: str) -> None:
        """Not possible offline: logged and skipped."""
        log.info("reload of %s skipped: no running systemd under %s", unit, self._root.prefix)

    def restart(self, unit: str) -> None:
        """Not possible offline: logged and skipped."""
        log.info("restart of %s skipped: no running systemd under %s", unit, self._root.prefix)


class LiveSystemctl(_Systemctl):
    """Plain `systemctl` against the running manager: the fallback when the bus is unreachable."""

    def __init__(self, runner: Runner) -> None:
        super().__init__(runner, ())

    def daemon_reload(self) -> None:
        """`systemctl daemon-reload`."""
        self._checked("daemon-reload")

    def reload(self, unit: str) -> None:
        """`systemctl reload <unit>`."""
        self._checked("reload", unit)

    def restart(self, unit: str) -> None:
        """`systemctl restart <unit>`."""
        self._checked("restart", unit)


def enabled_among(manager: SystemdManager, names: Sequence[str]) -> frozenset[str]:
    """The names whose unit-file state is exactly `enabled` (offline mostly read from the links;
    other managers answer through is_enabled, which is cheap over D-Bus)."""
    if isinstance(manager, OfflineSystemctl):
        return manager.enabled_among(names)
    states = manager.is_enabled(names)
    return frozenset(name for name in names if states.get(name) == "enabled")


def make_manager(
    root: HostRoot, runner: Runner, *, live: bool | None = None, bus_address: str | None = None
) -> SystemdManager:
    """The manager for `root`: offline systemctl, else D-Bus, else plain systemctl.

    `live` defaults to whether the root is `/`; `bus_address` None means the system bus.
    """
    if not (root.is_live if live is None else live):
        return OfflineSystemctl(root, runner)
    try:
        return DbusSystemd.connect(bus_address)
    except BusUnavailable as e:
        log.warning("systemd D-Bus unavailable (%s); using systemctl", e)
        return LiveSystemctl(runner)


WriteFiles = Callable[[Sequence[tuple[str, bytes, int]]], list[bool]]
"""Write config paths with data and mode, as one batch; element i True when path i was written."""
RemoveFile = Callable[[str], bool]
"""Remove a config path; True when something was removed."""
MaskFile = Callable[[str], bool]
"""Make a unit's config path a link to /dev/null, or (unmask) undo that; True when it changed."""


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

    Unit files, dropins and masks go through `write_files`/`remove_file`/`mask_file`/
    `unmask_file` (config paths), so a backup-aware file writer can be plugged in; the defaults
    are plain crash-safe fsops.
    """

    def __init__(
        self,
        root: HostRoot,
        manager: SystemdManager,
        *,
        write_files: WriteFiles | None = None,
        remove_file: RemoveFile | None = None,
        mask_file: MaskFile | None = None,
        unmask_file: MaskFile | None = None,
    ) -> None:
        self._root = root
        self._manager = manager
        self._write_files: WriteFiles = write_files or self._plain_write
        self._remove_file: RemoveFile = remove_file or self._plain_remove
        self._mask_file: MaskFile = mask_file or self._plain_mask
        self._unmask_file: MaskFile = unmask_file or self._plain_unmask

    def _plain_write(self, items: Sequence[tuple[str, bytes, int]]) -> list[bool]:
        return fsops.atomic_write_many([fsops.Write(self._root.join(p), d, m) for p, d, m in items])

    def _plain_remove(self, path: str) -> bool:
        return fsops.remove(self._root.join(path))

    def is_regular_file(self, path: str) -> bool:
        """Whether the config path is a regular file (not a link, a mask or absent)."""
        return self._is_regular_file(path)

    def _is_regular_file(self, path: str) -> bool:
        st = fsops.lstat_or_none(self._root.join(path))
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
        old = fsops.read_bytes_nofollow(self._root.join(path))
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
                data = fsops.read_bytes_nofollow(directory / entry)
            except OSError:
                return True
            if data is not None and INSTALL_HEADER in data:
                return True
        return False

    def write_units(self, units: Sequence[Unit]) -> UnitResult:
        """Write dropins, masks and unit files, then apply enablement (spec §4.4).

        Raises SystemdError (`error enabling units: …` / `error disabling unit: …`) when the
        final enable or disable fails; a failed preset is only logged.
        """
        # An enabled unit whose [Install] section is about to change is disabled first, so links
        # made from the old section do not outlive it; the final enable recreates the right
        # ones. Upstream asks for every unit with contents; asking only for units whose
        # [Install] may change gives the same links (enable makes the same ones from the same
        # section) and leaves the other units' links alone. (Offline the answer mostly comes
        # from the links, without a systemctl process.)
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

        # every file first (one batch of writes), then enablement: a preset or enable reads them
        written: list[str] = []
        removed: list[str] = []
        masked: list[str] = []
        writes: list[tuple[str, bytes, int]] = []
        for unit in units:
            self._dropins(unit, writes, removed)
            path = unit_path(unit.name)
            if unit.mask:
                if self._mask_file(path):
                    masked.append(unit.name)
            elif unit.contents:
                writes.append((path, unit.contents.encode(), UNIT_FILE_MODE))
            elif unit.mask is False and self._unmask_file(path):
                # An explicit `mask: false` without contents clears an earlier mask.
                log.info("Unmasked %s (%s)", unit.name, path)
                removed.append(path)
        if writes:
            done = self._write_files(writes)
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

    def _dropins(self, unit: Unit, writes: list[tuple[str, bytes, int]], removed: list[str]) -> None:
        """Queue the writes of `unit`'s dropins; remove the ones declared empty."""
        for dropin in unit.dropins:
            path = dropin_path(unit.name, dropin.name)
            if not dropin.contents:
                # An empty dropin means "no dropin": remove one left by an earlier config.
                if self._remove_file(path):
                    log.info("Removed %s: the dropin has no contents", path)
                    removed.append(path)
            else:
                writes.append((path, dropin.contents.encode(), UNIT_FILE_MODE))

    def _plain_mask(self, path: str) -> bool:
        host = self._root.join(path)
        st = fsops.lstat_or_none(host)
        # atomic_symlink replaces a file or link by rename; only a directory must go first.
        removed_dir = st is not None and stat.S_ISDIR(st.st_mode) and fsops.remove_tree(host)
        return fsops.atomic_symlink(host, DEV_NULL) or removed_dir

    def _plain_unmask(self, path: str) -> bool:
        return fsops.remove_tree(self._root.join(path))

    def _preset(self, name: str, failure_message: str) -> bool:
        try:
            self._manager.preset(name)
        except SystemdError as e:
            log.info(failure_message, name, e.output)
            return False
        return True

    def remove_units(self, old_units: Sequence[Unit], new_units: Sequence[Unit]) -> UnitResult:
        """Remove what `old_units` declared and `new_units` no longer does (spec §4.3, stale data).

        Dropins gone from the new config are removed. A unit gone from it is preset first (a
        failure is only logged), then, if its file in /etc/systemd/system is a regular file,
        disabled so no link made from its [Install] section is left dangling, then its file is
        removed through `remove_file`. If that restored an original file, the unit is preset
        again so the original gets its default enablement. The leaked links of OCPBUGS-33694
        are always removed.
        """
        new_names = {u.name for u in new_units}
        new_dropins = {dropin_path(u.name, d.name) for u in new_units for d in u.dropins}
        removed: list[str] = []
        for unit in old_units:
            for dropin in unit.dropins:
                path = dropin_path(unit.name, dropin.name)
                if path not in new_dropins and self._remove_file(path):
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
            if self._remove_file(path):
                log.info("Removed stale systemd unit %s", path)
                removed.append(path)
            if fsops.lstat_or_none(self._root.join(path)) is not None:
                self._preset(name, "Did not restore preset for restored unit %s: %s")

        # the leaked enablement links (LEAKED_SYMLINKS) are removed by FileWriter.delete_stale
        return UnitResult(
            removed=tuple(removed),
            disabled=tuple(owned),
            preset=tuple(preset),
            preset_failed=tuple(preset_failed),
        )
