"""mcd.host.systemd_dbus: the D-Bus client against a fake systemd on a private dbus-daemon.

Each test starts its own `dbus-daemon` (milliseconds: the fixture waits for the address line
it prints, never for a fixed time) and a fake `org.freedesktop.systemd1` written with jeepney,
served from a thread of the test process. The fake records every method call it receives.
"""

from __future__ import annotations

import fnmatch
import posixpath
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from jeepney import HeaderFields, Message, MessageType, new_error, new_method_return
from jeepney.bus_messages import message_bus
from jeepney.io.blocking import DBusConnection, open_dbus_connection
from recording import RecordingRunner

from mcd.config.ignition import Unit
from mcd.host.root import HostRoot
from mcd.host.systemd import LiveSystemctl, OfflineSystemctl, make_manager
from mcd.host.systemd_dbus import (
    JOB_IFACE,
    MANAGER_IFACE,
    PROPERTIES_IFACE,
    SYSTEMD_BUS_NAME,
    SYSTEMD_PATH,
    UNIT_IFACE,
    BusUnavailable,
    DbusSystemd,
    SystemdError,
)
from mcd.host.units import UnitWriter

pytestmark = [
    pytest.mark.allow_commands,
    pytest.mark.skipif(shutil.which("dbus-daemon") is None, reason="dbus-daemon is not installed"),
]

BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>mcd-test</type>
  <listen>unix:dir={dir}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
    <allow own="*"/>
  </policy>
</busconfig>
"""

CHANGE = ("symlink", "/etc/systemd/system/multi-user.target.wants/a.service", "/etc/systemd/system/a.service")


@dataclass(frozen=True)
class Call:
    path: str
    interface: str | None
    member: str
    signature: str
    body: tuple[Any, ...]


class FakeSystemd:
    """Owns org.freedesktop.systemd1 on a bus and answers like systemd, recording each call."""

    def __init__(self, address: str) -> None:
        self.conn: DBusConnection = open_dbus_connection(address)
        reply = self.conn.send_and_get_reply(message_bus.RequestName(SYSTEMD_BUS_NAME))
        assert reply.body == (1,), "the fake could not own the systemd name"
        self.calls: list[Call] = []
        self.errors: dict[str, tuple[str, str]] = {}  # member -> (D-Bus error name, message)
        self.file_states: dict[str, str] = {}
        self.unit_files: list[tuple[str, str]] = []
        self.changes: list[tuple[str, str, str]] = [CHANGE]
        self.patterns_supported = True
        self.job_polls = 0  # State answers a job gives before it vanishes
        self.active_state = "active"
        self.loaded_units: set[str] | None = None  # None: every unit is loaded
        self._jobs: dict[str, int] = {}
        self._unit_paths: dict[str, str] = {}
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        # Shutting the socket down wakes the blocked receive() in the serving thread at once.
        self.conn.sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(timeout=5)
        self.conn.close()

    def members(self) -> list[str]:
        return [c.member for c in self.calls]

    def _serve(self) -> None:
        while True:
            try:
                msg = self.conn.receive()
            except (OSError, EOFError, ValueError):
                return
            if msg.header.message_type is not MessageType.method_call:
                continue
            fields = msg.header.fields
            call = Call(
                path=fields[HeaderFields.path],
                interface=fields.get(HeaderFields.interface),
                member=fields[HeaderFields.member],
                signature=fields.get(HeaderFields.signature, ""),
                body=tuple(msg.body),
            )
            self.calls.append(call)
            try:
                reply = self._answer(msg, call)
            except Exception as e:  # a bug in the fake must show up as a failed call, not a hang
                reply = new_error(msg, "org.mcd.test.FakeBroken", "s", (repr(e),))
            self.conn.send(reply)

    def _error(self, msg: Message, name: str, text: str) -> Message:
        return new_error(msg, name, "s", (text,))

    def _answer(self, msg: Message, call: Call) -> Message:
        if call.member in self.errors:
            return self._error(msg, *self.errors[call.member])
        if call.interface == PROPERTIES_IFACE and call.member == "Get":
            return self._get_property(msg, call)
        if call.interface != MANAGER_IFACE or call.path != SYSTEMD_PATH:
            return self._error(
                msg, "org.freedesktop.DBus.Error.UnknownObject", f"Unknown object '{call.path}'."
            )
        member, body = call.member, call.body
        if member in ("EnableUnitFiles", "PresetUnitFiles"):
            return new_method_return(msg, "ba(sss)", (True, self.changes))
        if member == "DisableUnitFiles":
            return new_method_return(msg, "a(sss)", (self.changes,))
        if member == "GetUnitFileState":
            if body[0] not in self.file_states:
                return self._error(
                    msg, "org.freedesktop.DBus.Error.FileNotFound", "No such file or directory"
                )
            return new_method_return(msg, "s", (self.file_states[body[0]],))
        if member == "ListUnitFilesByPatterns" and self.patterns_supported:
            patterns = body[1]
            found = [
                f
                for f in self.unit_files
                if any(fnmatch.fnmatch(posixpath.basename(f[0]), p) for p in patterns)
            ]
            return new_method_return(msg, "a(ss)", (found,))
        if member == "ListUnitFiles":
            return new_method_return(msg, "a(ss)", (self.unit_files,))
        if member == "Reload":
            return new_method_return(msg)
        if member in ("RestartUnit", "ReloadUnit"):
            job = f"{SYSTEMD_PATH}/job/{len(self._jobs) + 1}"
            self._jobs[job] = self.job_polls
            return new_method_return(msg, "o", (job,))
        if member == "GetUnit":
            if self.loaded_units is not None and body[0] not in self.loaded_units:
                return self._error(msg, "org.freedesktop.systemd1.NoSuchUnit", f"Unit {body[0]} not loaded.")
            path = f"{SYSTEMD_PATH}/unit/{len(self._unit_paths) + 1}"
            self._unit_paths[path] = body[0]
            return new_method_return(msg, "o", (path,))
        return self._error(msg, "org.freedesktop.DBus.Error.UnknownMethod", f"Unknown method {member}")

    def _get_property(self, msg: Message, call: Call) -> Message:
        interface, prop = call.body
        if interface == JOB_IFACE and prop == "State" and self._jobs.get(call.path, 0) > 0:
            self._jobs[call.path] -= 1
            return new_method_return(msg, "v", (("s", "running"),))
        if interface == UNIT_IFACE and prop == "ActiveState" and call.path in self._unit_paths:
            return new_method_return(msg, "v", (("s", self.active_state),))
        return self._error(msg, "org.freedesktop.DBus.Error.UnknownObject", f"Unknown object '{call.path}'.")


class FakeClock:
    """A monotonic clock that only moves when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def bus_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A private dbus-daemon; yields its address once it has printed it."""
    workdir = tmp_path_factory.mktemp("bus")
    config = workdir / "bus.conf"
    config.write_text(BUS_CONFIG.format(dir=workdir))
    with (workdir / "stderr").open("wb") as stderr:
        proc = subprocess.Popen(
            ["dbus-daemon", f"--config-file={config}", "--print-address", "--nofork", "--nopidfile"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    try:
        assert proc.stdout is not None
        address = proc.stdout.readline().strip()  # printed once the bus listens
        if not address:
            proc.wait(timeout=5)
            pytest.fail(f"dbus-daemon did not start: {(workdir / 'stderr').read_text()}")
        yield address
    finally:
        proc.terminate()
        proc.wait(timeout=5)
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.fixture
def fake(bus_address: str) -> Iterator[FakeSystemd]:
    service = FakeSystemd(bus_address)
    yield service
    service.stop()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def systemd(fake: FakeSystemd, bus_address: str, clock: FakeClock) -> Iterator[DbusSystemd]:
    client = DbusSystemd.connect(bus_address, job_timeout=30.0, clock=clock, sleep=clock.sleep)
    yield client
    client.close()


def manager_calls(fake: FakeSystemd) -> list[tuple[str, str, tuple[Any, ...]]]:
    return [(c.member, c.signature, c.body) for c in fake.calls if c.interface == MANAGER_IFACE]


# --- connecting ---------------------------------------------------------------------------------


def test_connect_fails_cleanly_without_a_bus(tmp_path: Path) -> None:
    with pytest.raises(BusUnavailable, match="cannot connect to unix:path="):
        DbusSystemd.connect(f"unix:path={tmp_path}/no-such-socket")


def test_connect_fails_when_systemd_is_not_on_the_bus(bus_address: str) -> None:
    with pytest.raises(BusUnavailable, match="systemd is not on"):
        DbusSystemd.connect(bus_address)


def test_make_manager_prefers_dbus_on_a_live_root(
    fake: FakeSystemd, bus_address: str, tmp_path: Path
) -> None:
    manager = make_manager(HostRoot(tmp_path), RecordingRunner(), live=True, bus_address=bus_address)
    assert isinstance(manager, DbusSystemd)
    manager.close()


def test_make_manager_falls_back_to_systemctl_without_a_bus(tmp_path: Path) -> None:
    manager = make_manager(
        HostRoot(tmp_path), RecordingRunner(), live=True, bus_address=f"unix:path={tmp_path}/none"
    )
    assert isinstance(manager, LiveSystemctl)
    assert isinstance(make_manager(HostRoot(tmp_path), RecordingRunner()), OfflineSystemctl)


# --- unit files ---------------------------------------------------------------------------------


def test_enable_sends_one_call_without_force_then_reloads(fake: FakeSystemd, systemd: DbusSystemd) -> None:
    """`systemctl enable a b` as upstream runs it: persistent (runtime=false), force=false."""
    systemd.enable(["a.service", "b.service"])
    assert manager_calls(fake) == [
        ("EnableUnitFiles", "asbb", (["a.service", "b.service"], False, False)),
        ("Reload", "", ()),
    ]


def test_no_reload_when_nothing_changed(fake: FakeSystemd, systemd: DbusSystemd) -> None:
    fake.changes = []
    systemd.enable(["a.service"])
    systemd.disable(["a.service"])
    systemd.preset("a.service")
    assert fake.members() == ["EnableUnitFiles", "DisableUnitFiles", "PresetUnitFiles"]


def test_disable_and_preset_calls(fake: FakeSystemd, systemd: DbusSystemd) -> None:
    systemd.disable(["a.service"])
    systemd.preset("b.service")
    assert manager_calls(fake) == [
        ("DisableUnitFiles", "asb", (["a.service"], False)),
        ("Reload", "", ()),
        ("PresetUnitFiles", "asbb", (["b.service"], False, False)),  # `systemctl preset b`
        ("Reload", "", ()),
    ]


def test_empty_enable_and_disable_send_nothing(fake: FakeSystemd, systemd: DbusSystemd) -> None:
    systemd.enable([])
    systemd.disable([])
    assert fake.calls == []


def test_errors_carry_the_dbus_name(fake: FakeSystemd, systemd: DbusSystemd) -> None:
    fake.errors["EnableUnitFiles"] = (
        "org.freedesktop.systemd1.NoSuchUnit",
        "Unit file x.service does not exist.",
    )
    with pytest.raises(SystemdError) as info:
        systemd.enable(["x.service"])
    assert info.value.dbus_name == "org.freedesktop.systemd1.NoSuchUnit"
    assert info.value.output == "Unit file x.service does not exist."


def test_unit_writer_over_dbus_reports_upstream_text(
    fake: FakeSystemd, systemd: DbusSystemd, tmp_path: Path
) -> None:
    fake.errors["EnableUnitFiles"] = ("org.freedesktop.DBus.Error.AccessDenied", "Access denied")
    writer = UnitWriter(HostRoot(tmp_path), systemd)
    with pytest.raises(SystemdError, match=r"^error enabling units: Access denied$"):
        writer.write_units([Unit("a.service", enabled=True, contents="[Service]\n")])
    assert fake.members() == ["GetUnitFileState", "EnableUnitFiles"]


def test_is_enabled_maps_missing_files_to_not_found(fake: FakeSystemd, systemd: DbusSystemd) -> None:
    fake.file_states = {"a.service": "enabled", "b.service": "masked"}
    assert systemd.is_enabled(["a.service", "nope.service", "b.service"]) == {
        "a.service": "enabled",
        "nope.service": "not-found",
        "b.service": "masked",
    }
    assert [c.body for c in fake.calls] == [("a.service",), ("nope.service",), ("b.service",)]


def test_is_enabled_raises_other_errors(fake: FakeSystemd, systemd: DbusSystemd) -> None:
    fake.errors["GetUnitFileState"] = ("org.freedesktop.DBus.Error.AccessDenied", "denied")
    with pytest.raises(SystemdError, match="denied"):
        systemd.is_enabled(["a.service"])


def test_unit_file_known_by_pattern(fake: FakeSystemd, systemd: DbusSystemd) -> None:
    fake.unit_files = [("/usr/lib/systemd/system/chronyd.service", "enabled")]
    assert systemd.unit_file_known("chronyd.service")
    assert not systemd.unit_file_known("chrony.service")
    assert manager_calls(fake)[0] == ("ListUnitFilesByPatterns", "asas", ([], ["chronyd.service"]))


def test_unit_file_known_falls_back_to_the_full_listing(fake: FakeSystemd, systemd: DbusSystemd) -> None:
    fake.patterns_supported = False
    fake.unit_files = [("/etc/systemd/system/x.service", "disabled")]
    assert systemd.unit_file_known("x.service")
    assert not systemd.unit_file_known("y.service")
    assert fake.members() == ["ListUnitFilesByPatterns", "ListUnitFiles"] * 2


# --- reloads and jobs ---------------------------------------------------------------------------


def test_daemon_reload(fake: FakeSystemd, systemd: DbusSystemd) -> None:
    systemd.daemon_reload()
    assert manager_calls(fake) == [("Reload", "", ())]


@pytest.mark.parametrize(("verb", "member"), [("restart", "RestartUnit"), ("reload", "ReloadUnit")])
def test_job_is_followed_until_it_is_gone(
    fake: FakeSystemd, systemd: DbusSystemd, clock: FakeClock, verb: str, member: str
) -> None:
    fake.job_polls = 3
    getattr(systemd, verb)("crio.service")
    job = f"{SYSTEMD_PATH}/job/1"
    assert fake.calls[0].member == member
    assert (fake.calls[0].signature, fake.calls[0].body) == ("ss", ("crio.service", "replace"))
    polls = [c for c in fake.calls if c.path == job]
    assert len(polls) == 4  # three "running" answers, then the job is gone
    assert all((c.member, c.body) == ("Get", (JOB_IFACE, "State")) for c in polls)
    assert clock.sleeps == sorted(clock.sleeps) and len(clock.sleeps) == 3
    assert fake.members()[-2:] == ["GetUnit", "Get"]


def test_finished_job_with_a_failed_unit_raises(fake: FakeSystemd, systemd: DbusSystemd) -> None:
    fake.active_state = "failed"
    with pytest.raises(SystemdError, match=r"^restart of kubelet\.service failed"):
        systemd.restart("kubelet.service")


def test_job_of_a_unit_no_longer_loaded_is_success(fake: FakeSystemd, systemd: DbusSystemd) -> None:
    fake.loaded_units = set()
    systemd.restart("oneshot.service")
    assert fake.members() == ["RestartUnit", "Get", "GetUnit"]


def test_job_wait_times_out(fake: FakeSystemd, systemd: DbusSystemd, clock: FakeClock) -> None:
    fake.job_polls = 10**6
    with pytest.raises(
        SystemdError, match=r"timed out after 30s waiting for the restart job of slow\.service"
    ):
        systemd.restart("slow.service")
    assert clock.now >= 30.0
    # the poll interval backs off, so a long job costs few calls
    assert len(fake.calls) < 200


def test_restart_error_is_mapped(fake: FakeSystemd, systemd: DbusSystemd) -> None:
    fake.errors["RestartUnit"] = ("org.freedesktop.systemd1.NoSuchUnit", "Unit nope.service not found.")
    with pytest.raises(SystemdError) as info:
        systemd.restart("nope.service")
    assert info.value.dbus_name == "org.freedesktop.systemd1.NoSuchUnit"
