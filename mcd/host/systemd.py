"""systemd on the node: enablement, state queries, reloads and restarts (the unit files: `units`).

A SystemdManager does what only systemd's own code should do (enable, disable, preset, state
queries, reloads and restarts); there are three: `systemctl --root=<prefix>` when the root is
a directory (systemd's install logic works offline), the D-Bus client on the live host, and
plain `systemctl` on the live host when the bus is unreachable. `mcd.host.units` writes the
unit files and applies an Ignition unit list on top of a manager.

Offline, each systemctl call is a process; the offline manager reads the root's links (see
mcd.host.unitlinks) to skip the `is-enabled` questions and the `disable` runs whose answer or
effect the files already settle, and hands everything else to systemctl unchanged.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Protocol

from mcd.host import atomicfs
from mcd.host.root import HostRoot, PathEscapeError
from mcd.host.runner import CommandResult, Runner
from mcd.host.systemd_dbus import BusUnavailable, DbusSystemd, SystemdError
from mcd.host.unitdirs import escapes
from mcd.host.unitlinks import UnitLinks, enabled_from_links
from mcd.planner.managed_paths import (
    DEV_NULL,
    LEAKED_SYMLINKS,
    UNIT_DIR,
    dropin_path,
    unit_path,
)

log = logging.getLogger(__name__)


__all__ = [
    "DEV_NULL",
    "LEAKED_SYMLINKS",
    "UNIT_DIR",
    "BusUnavailable",
    "LiveSystemctl",
    "OfflineSystemctl",
    "SystemdError",
    "SystemdManager",
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

    def stop(self, unit: str) -> None:
        """Stop a unit and wait for it."""
        ...

    def start(self, unit: str) -> None:
        """Start a unit and wait for it."""
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

    def _guard(self) -> None:
        # systemctl --root follows links as the kernel does: refuse before it writes outside
        problems = escapes(self._root)
        if problems:
            raise SystemdError("; ".join(problems))

    def enable(self, names: Sequence[str]) -> None:
        """`systemctl enable <names…>`, once every directory it may write to is inside the root."""
        if names:
            self._guard()
            super().enable(names)

    def preset(self, name: str) -> None:
        """`systemctl preset <name>`, once every directory it may touch is inside the root."""
        self._guard()
        super().preset(name)

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
                self._guard()
                super().disable(rest)

    def _has_unit_file(self, name: str) -> bool:
        base, at, rest = name.partition("@")
        candidates = [name] if not at else [name, f"{base}@{rest[rest.rfind('.') :]}"]
        for directory in UNIT_SEARCH_PATH:
            for candidate in candidates:
                try:
                    if atomicfs.lstat_or_none(self._root.join(f"{directory}/{candidate}")) is not None:
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

    def stop(self, unit: str) -> None:
        """Not possible offline: logged and skipped."""
        log.info("stop of %s skipped: no running systemd under %s", unit, self._root.prefix)

    def start(self, unit: str) -> None:
        """Not possible offline: logged and skipped."""
        log.info("start of %s skipped: no running systemd under %s", unit, self._root.prefix)


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

    def stop(self, unit: str) -> None:
        """`systemctl stop <unit>`."""
        self._checked("stop", unit)

    def start(self, unit: str) -> None:
        """`systemctl start <unit>`."""
        self._checked("start", unit)


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
