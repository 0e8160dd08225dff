"""The systemd D-Bus client used on the live host: unit files, daemon reload and unit jobs.

It speaks to `org.freedesktop.systemd1` with dbus-python's blocking calls and no main loop,
so it needs no GLib and no thread. Without a main loop signals cannot be received, so a
job (restart, reload) is followed by polling its object until systemd drops it, within a
deadline. dbus-python is imported only when a connection is made: commands that never touch
the live host do not pay for it.
"""

from __future__ import annotations

import logging
import posixpath
import time
from collections.abc import Callable, Sequence
from typing import Any

log = logging.getLogger(__name__)

SYSTEMD_BUS_NAME = "org.freedesktop.systemd1"
SYSTEMD_PATH = "/org/freedesktop/systemd1"
MANAGER_IFACE = "org.freedesktop.systemd1.Manager"
JOB_IFACE = "org.freedesktop.systemd1.Job"
UNIT_IFACE = "org.freedesktop.systemd1.Unit"
PROPERTIES_IFACE = "org.freedesktop.DBus.Properties"
DBUS_NAME = "org.freedesktop.DBus"
DBUS_PATH = "/org/freedesktop/DBus"

UNKNOWN_OBJECT = "org.freedesktop.DBus.Error.UnknownObject"
UNKNOWN_INTERFACE = "org.freedesktop.DBus.Error.UnknownInterface"
UNKNOWN_METHOD = "org.freedesktop.DBus.Error.UnknownMethod"
NO_SUCH_UNIT = "org.freedesktop.systemd1.NoSuchUnit"
# What GetUnitFileState answers for a name systemd has no unit file for.
_NOT_FOUND_ERRORS = frozenset({"org.freedesktop.DBus.Error.FileNotFound", NO_SUCH_UNIT})
# A finished job's object is gone; depending on the systemd version the lookup of its path
# fails as an unknown object or as an unknown interface on a known prefix.
_JOB_GONE_ERRORS = frozenset({UNKNOWN_OBJECT, UNKNOWN_INTERFACE})

DEFAULT_JOB_TIMEOUT = 300.0
# A daemon reload re-reads every unit; on a loaded node it can exceed dbus's default 25 s.
_RELOAD_TIMEOUT = 120.0
_FIRST_POLL = 0.01
_MAX_POLL = 0.25


class SystemdError(RuntimeError):
    """A systemd operation failed; `output` is systemd's explanation, `dbus_name` the D-Bus error name."""

    def __init__(self, output: str, *, dbus_name: str | None = None) -> None:
        super().__init__(output)
        self.output = output
        self.dbus_name = dbus_name


class BusUnavailable(RuntimeError):
    """The bus (or systemd on it) cannot be reached: callers fall back to plain `systemctl`."""


def _import_dbus() -> Any:
    # Imported on first use: only the live host needs dbus-python (see the module docstring).
    import dbus  # noqa: PLC0415
    import dbus.bus  # noqa: PLC0415
    import dbus.exceptions  # noqa: PLC0415

    return dbus


class DbusSystemd:
    """The systemd manager reached over D-Bus; `bus` is a connected dbus-python connection.

    `clock` and `sleep` pace the polling of jobs; tests replace them to run without waiting.
    """

    def __init__(
        self,
        bus: Any,
        *,
        job_timeout: float = DEFAULT_JOB_TIMEOUT,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._bus = bus
        self._dbus_exception: type[Exception] = _import_dbus().exceptions.DBusException
        self._job_timeout = job_timeout
        self._clock = clock
        self._sleep = sleep

    @classmethod
    def connect(
        cls,
        address: str | None = None,
        *,
        job_timeout: float = DEFAULT_JOB_TIMEOUT,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> DbusSystemd:
        """Connect to `address` (None: the system bus); BusUnavailable when the bus or systemd is absent."""
        where = "the system bus" if address is None else address
        try:
            dbus = _import_dbus()
        except ImportError as e:
            raise BusUnavailable(f"dbus-python is not available: {e}") from e
        try:
            bus = dbus.bus.BusConnection(dbus.bus.BUS_SYSTEM if address is None else address)
        except dbus.exceptions.DBusException as e:
            raise BusUnavailable(f"cannot connect to {where}: {e.get_dbus_message()}") from e
        try:
            # systemd is never bus-activated: if it does not own its name now, it is not running.
            owned = bool(
                bus.call_blocking(DBUS_NAME, DBUS_PATH, DBUS_NAME, "NameHasOwner", "s", [SYSTEMD_BUS_NAME])
            )
        except dbus.exceptions.DBusException as e:
            bus.close()
            raise BusUnavailable(f"cannot query {where}: {e.get_dbus_message()}") from e
        if not owned:
            bus.close()
            raise BusUnavailable(f"systemd is not on {where}")
        return cls(bus, job_timeout=job_timeout, clock=clock, sleep=sleep)

    def close(self) -> None:
        """Close the bus connection."""
        self._bus.close()

    def _call(
        self,
        method: str,
        signature: str,
        args: Sequence[Any],
        *,
        path: str = SYSTEMD_PATH,
        interface: str = MANAGER_IFACE,
        timeout: float = -1.0,
    ) -> Any:
        try:
            return self._bus.call_blocking(
                SYSTEMD_BUS_NAME, path, interface, method, signature, list(args), timeout=timeout
            )
        except self._dbus_exception as e:
            name = e.get_dbus_name()  # type: ignore[attr-defined]
            message = e.get_dbus_message() or name  # type: ignore[attr-defined]
            raise SystemdError(str(message), dbus_name=str(name) if name else None) from e

    def _reload_if_changed(self, changes: Sequence[Any]) -> None:
        # `systemctl enable|disable|preset` reload the manager after changing links; doing the
        # same keeps the live behaviour identical whichever backend ran.
        if changes:
            self.daemon_reload()

    def enable(self, names: Sequence[str]) -> None:
        """Enable unit files (EnableUnitFiles, persistent, no force: `systemctl enable` as upstream
        runs it, which fails on a conflicting link instead of replacing it)."""
        if names:
            _, changes = self._call("EnableUnitFiles", "asbb", [list(names), False, False])
            self._reload_if_changed(changes)

    def disable(self, names: Sequence[str]) -> None:
        """Disable unit files (DisableUnitFiles, persistent)."""
        if names:
            changes = self._call("DisableUnitFiles", "asb", [list(names), False])
            self._reload_if_changed(changes)

    def preset(self, name: str) -> None:
        """Reset one unit file's enablement to the preset policy (PresetUnitFiles, persistent, no
        force: `systemctl preset` as upstream runs it)."""
        _, changes = self._call("PresetUnitFiles", "asbb", [[name], False, False])
        self._reload_if_changed(changes)

    def is_enabled(self, names: Sequence[str]) -> dict[str, str]:
        """Unit-file state per name (`enabled`, `disabled`, `static`, `masked` …; `not-found` if none)."""
        states: dict[str, str] = {}
        for name in names:
            try:
                states[name] = str(self._call("GetUnitFileState", "s", [name]))
            except SystemdError as e:
                if e.dbus_name not in _NOT_FOUND_ERRORS:
                    raise
                states[name] = "not-found"
        return states

    def unit_file_known(self, name: str) -> bool:
        """Whether systemd has a unit file called `name` anywhere on its search path."""
        try:
            files = self._call("ListUnitFilesByPatterns", "asas", [[], [name]])
        except SystemdError as e:
            # systemd < 230 has only the unfiltered listing.
            if e.dbus_name != UNKNOWN_METHOD:
                raise
            files = self._call("ListUnitFiles", "", [])
        return any(posixpath.basename(str(path)) == name for path, _state in files)

    def daemon_reload(self) -> None:
        """Reload the manager configuration (Reload); returns when systemd has finished."""
        self._call("Reload", "", [], timeout=_RELOAD_TIMEOUT)

    def reload(self, unit: str) -> None:
        """Reload `unit` and wait for its job; SystemdError if it fails or times out."""
        job = self._call("ReloadUnit", "ss", [unit, "replace"])
        self._wait_for_job(str(job), unit, "reload")

    def restart(self, unit: str) -> None:
        """Restart `unit` and wait for its job; SystemdError if it fails or times out."""
        job = self._call("RestartUnit", "ss", [unit, "replace"])
        self._wait_for_job(str(job), unit, "restart")

    def stop(self, unit: str) -> None:
        """Stop `unit` and wait for its job; SystemdError if it fails or times out."""
        job = self._call("StopUnit", "ss", [unit, "replace"])
        self._wait_for_job(str(job), unit, "stop")

    def start(self, unit: str) -> None:
        """Start `unit` and wait for its job; SystemdError if it fails or times out."""
        job = self._call("StartUnit", "ss", [unit, "replace"])
        self._wait_for_job(str(job), unit, "start")

    def _wait_for_job(self, job: str, unit: str, verb: str) -> None:
        deadline = self._clock() + self._job_timeout
        delay = _FIRST_POLL
        while True:
            try:
                self._call("Get", "ss", [JOB_IFACE, "State"], path=job, interface=PROPERTIES_IFACE)
            except SystemdError as e:
                if e.dbus_name in _JOB_GONE_ERRORS:
                    break
                raise
            if self._clock() >= deadline:
                raise SystemdError(
                    f"timed out after {self._job_timeout:g}s waiting for the {verb} job of {unit}"
                )
            self._sleep(delay)
            delay = min(delay * 2, _MAX_POLL)
        # The job's own result went out in a JobRemoved signal we cannot receive without a main
        # loop; a failed start or reload leaves the unit in the "failed" state instead.
        state = self._active_state(unit)
        log.info("%s of %s finished; unit is %s", verb, unit, state or "not loaded")
        if state == "failed":
            raise SystemdError(f"{verb} of {unit} failed: the unit is in state failed")

    def _active_state(self, unit: str) -> str | None:
        try:
            path = self._call("GetUnit", "s", [unit])
        except SystemdError as e:
            if e.dbus_name == NO_SUCH_UNIT:
                return None
            raise
        state = self._call(
            "Get", "ss", [UNIT_IFACE, "ActiveState"], path=str(path), interface=PROPERTIES_IFACE
        )
        return str(state)
