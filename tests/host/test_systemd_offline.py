"""mcd.host.systemd offline: the systemctl backends' command lines, and real `systemctl --root` runs."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from recording import RecordingRunner

from mcd.config.ignition import Dropin, Unit
from mcd.host.root import HostRoot
from mcd.host.runner import SubprocessRunner
from mcd.host.systemd import LiveSystemctl, OfflineSystemctl, SystemdError, make_manager
from mcd.host.units import UnitWriter

# --- command lines (recorded, no process) -------------------------------------------------------


def test_offline_commands_carry_the_root(tmp_path: Path) -> None:
    root = HostRoot(tmp_path)
    runner = RecordingRunner().expect(["systemctl"])
    manager = OfflineSystemctl(root, runner)
    manager.enable(["a.service", "b.service"])
    manager.disable(["c.service"])
    manager.preset("d.service")
    flag = f"--root={tmp_path.resolve()}"
    assert runner.commands == [
        ("systemctl", flag, "enable", "a.service", "b.service"),
        ("systemctl", flag, "disable", "c.service"),
        ("systemctl", flag, "preset", "d.service"),
    ]


def test_empty_enable_and_disable_run_nothing(tmp_path: Path) -> None:
    runner = RecordingRunner()  # no expectation: any command would raise
    manager = OfflineSystemctl(HostRoot(tmp_path), runner)
    manager.enable([])
    manager.disable([])
    assert runner.commands == []


def test_offline_reloads_and_restarts_are_skipped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    runner = RecordingRunner()
    manager = OfflineSystemctl(HostRoot(tmp_path), runner)
    with caplog.at_level("INFO", logger="mcd.host.systemd"):
        manager.daemon_reload()
        manager.reload("crio.service")
        manager.restart("kubelet.service")
    assert runner.commands == []
    assert "restart of kubelet.service skipped" in caplog.text


def test_live_systemctl_commands() -> None:
    runner = RecordingRunner().expect(["systemctl"])
    manager = LiveSystemctl(runner)
    manager.enable(["a.service"])
    manager.daemon_reload()
    manager.reload("crio.service")
    manager.restart("kubelet.service")
    assert runner.commands == [
        ("systemctl", "enable", "a.service"),
        ("systemctl", "daemon-reload"),
        ("systemctl", "reload", "crio.service"),
        ("systemctl", "restart", "kubelet.service"),
    ]


def test_failure_raises_with_the_combined_output() -> None:
    runner = RecordingRunner().expect(
        ["systemctl", "enable"], returncode=1, stdout="out\n", stderr="Failed: x\n"
    )
    with pytest.raises(SystemdError) as info:
        LiveSystemctl(runner).enable(["a.service"])
    assert info.value.output == "out\nFailed: x"


def test_is_enabled_maps_one_line_per_unit_despite_a_non_zero_exit() -> None:
    runner = RecordingRunner().expect(
        ["systemctl", "is-enabled"], returncode=1, stdout="enabled\nstatic\ndisabled\n"
    )
    states = LiveSystemctl(runner).is_enabled(["a.service", "b.service", "c.service"])
    assert states == {"a.service": "enabled", "b.service": "static", "c.service": "disabled"}
    assert len(runner.commands) == 1


def test_is_enabled_resumes_after_a_unit_without_file() -> None:
    runner = (
        RecordingRunner()
        .expect(
            ["systemctl", "is-enabled"],
            returncode=1,
            stdout="enabled\n",
            stderr="Failed to get unit file state for nope.service: No such file or directory\n",
            times=1,
        )
        .expect(["systemctl", "is-enabled"], stdout="static\n", times=1)
    )
    states = LiveSystemctl(runner).is_enabled(["a.service", "nope.service", "b.service"])
    assert states == {"a.service": "enabled", "nope.service": "not-found", "b.service": "static"}
    assert runner.commands[1] == ("systemctl", "is-enabled", "b.service")


def test_is_enabled_raises_on_other_errors() -> None:
    runner = RecordingRunner().expect(["systemctl", "is-enabled"], returncode=1, stderr="Access denied\n")
    with pytest.raises(SystemdError, match="Access denied"):
        LiveSystemctl(runner).is_enabled(["a.service"])


def test_unit_file_known_matches_the_exact_name_and_escapes_globs() -> None:
    runner = RecordingRunner().expect(
        ["systemctl", "list-unit-files"], stdout="foo[1].service disabled enabled\n"
    )
    manager = LiveSystemctl(runner)
    assert manager.unit_file_known("foo[1].service")
    assert runner.commands[0][-1] == "foo\\[1].service"


def test_a_unit_pass_on_a_directory_root_asks_nothing_the_links_settle(tmp_path: Path) -> None:
    """A changed enabled unit and a changed disabled one: one disable before writing, one enable.

    The enabled unit's link says it is enabled (no is-enabled), and the disabled unit has no link
    for a disable to remove (no disable after writing).
    """
    units = tmp_path / "etc/systemd/system"
    (units / "multi-user.target.wants").mkdir(parents=True)
    (units / "on.service").write_text("old\n")
    (units / "multi-user.target.wants/on.service").symlink_to("/etc/systemd/system/on.service")
    (units / "off.service").write_text("old\n")
    root = HostRoot(tmp_path)
    runner = RecordingRunner().expect(["systemctl"])
    result = UnitWriter(root, OfflineSystemctl(root, runner)).write_units(
        [
            Unit("on.service", enabled=True, contents="[Install]\nWantedBy=multi-user.target\n"),
            Unit("off.service", enabled=False, contents="[Install]\nWantedBy=multi-user.target\n"),
            Unit("new.service", enabled=False, contents="[Install]\nWantedBy=multi-user.target\n"),
        ]
    )
    flag = f"--root={tmp_path.resolve()}"
    assert runner.commands == [
        ("systemctl", flag, "disable", "on.service"),
        ("systemctl", flag, "enable", "on.service"),
    ]
    assert result.disabled_before_write == ("on.service",)
    assert result.disabled == ("off.service", "new.service")


def test_make_manager_is_offline_for_a_directory_root(tmp_path: Path) -> None:
    assert isinstance(make_manager(HostRoot(tmp_path), RecordingRunner()), OfflineSystemctl)


# --- real systemctl on a directory root ---------------------------------------------------------

needs_systemctl = pytest.mark.skipif(shutil.which("systemctl") is None, reason="systemctl is not installed")

SERVICE = "[Unit]\nDescription=test\n[Service]\nExecStart=/bin/true\n[Install]\nWantedBy={target}\n"
UNIT_DIR = "etc/systemd/system"


@pytest.fixture
def root(tmp_path: Path) -> HostRoot:
    (tmp_path / UNIT_DIR).mkdir(parents=True)
    return HostRoot(tmp_path)


@pytest.fixture
def writer(root: HostRoot) -> UnitWriter:
    return UnitWriter(root, OfflineSystemctl(root, SubprocessRunner()))


def service(target: str = "multi-user.target") -> str:
    return SERVICE.format(target=target)


def wants(root: HostRoot, target: str, name: str) -> Path:
    return root.prefix / UNIT_DIR / f"{target}.wants" / name


def tree(base: Path) -> dict[str, tuple[int, int, str | None]]:
    out: dict[str, tuple[int, int, str | None]] = {}
    for dirpath, dirnames, filenames in os.walk(base):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            out[p] = (st.st_ino, st.st_mtime_ns, os.readlink(p) if os.path.islink(p) else None)
    return out


@needs_systemctl
@pytest.mark.allow_commands
def test_enable_then_disable_manage_the_wants_link(root: HostRoot, writer: UnitWriter) -> None:
    writer.write_units([Unit("t.service", enabled=True, contents=service())])
    link = wants(root, "multi-user.target", "t.service")
    assert os.readlink(link) == "/etc/systemd/system/t.service"
    writer.write_units([Unit("t.service", enabled=False, contents=service())])
    assert not os.path.lexists(link)


@needs_systemctl
@pytest.mark.allow_commands
def test_changed_install_section_leaks_no_old_link(root: HostRoot, writer: UnitWriter) -> None:
    writer.write_units([Unit("t.service", enabled=True, contents=service())])
    result = writer.write_units([Unit("t.service", enabled=True, contents=service("graphical.target"))])
    assert result.disabled_before_write == ("t.service",)
    assert not os.path.lexists(wants(root, "multi-user.target", "t.service"))
    assert os.readlink(wants(root, "graphical.target", "t.service")) == "/etc/systemd/system/t.service"


@needs_systemctl
@pytest.mark.allow_commands
def test_mask_and_unmask(root: HostRoot, writer: UnitWriter) -> None:
    manager = OfflineSystemctl(root, SubprocessRunner())
    writer.write_units([Unit("t.service", enabled=True, contents=service())])
    writer.write_units([Unit("t.service", mask=True)])
    path = root.prefix / UNIT_DIR / "t.service"
    assert os.readlink(path) == "/dev/null"
    assert manager.is_enabled(["t.service"]) == {"t.service": "masked"}
    writer.write_units([Unit("t.service", mask=False)])
    assert not os.path.lexists(path)
    assert manager.is_enabled(["t.service"]) == {"t.service": "not-found"}


@needs_systemctl
@pytest.mark.allow_commands
def test_dropins_written_and_removed(root: HostRoot, writer: UnitWriter) -> None:
    dropin = root.prefix / UNIT_DIR / "t.service.d" / "10-nice.conf"
    writer.write_units(
        [Unit("t.service", contents=service(), dropins=(Dropin("10-nice.conf", "[Service]\nNice=5\n"),))]
    )
    assert dropin.read_text() == "[Service]\nNice=5\n"
    writer.write_units([Unit("t.service", contents=service(), dropins=(Dropin("10-nice.conf", ""),))])
    assert not dropin.exists()


@needs_systemctl
@pytest.mark.allow_commands
def test_is_enabled_and_unit_file_known(root: HostRoot, writer: UnitWriter) -> None:
    writer.write_units(
        [
            Unit("on.service", enabled=True, contents=service()),
            Unit("off.service", enabled=False, contents=service()),
            Unit("static.service", contents="[Service]\nExecStart=/bin/true\n"),
        ]
    )
    vendor = root.prefix / "usr/lib/systemd/system/vendor.service"
    vendor.parent.mkdir(parents=True)
    vendor.write_text(service())
    manager = OfflineSystemctl(root, SubprocessRunner())
    names = ["on.service", "nope.service", "off.service", "static.service", "vendor.service"]
    assert manager.is_enabled(names) == {
        "on.service": "enabled",
        "nope.service": "not-found",
        "off.service": "disabled",
        "static.service": "static",
        "vendor.service": "disabled",
    }
    assert manager.unit_file_known("vendor.service")
    assert manager.unit_file_known("on.service")
    assert not manager.unit_file_known("nope.service")
    # a content-less unit systemd knows can be enabled, one it does not know is skipped
    result = writer.write_units([Unit("vendor.service", enabled=True), Unit("nope.service", enabled=True)])
    assert result.enabled == ("vendor.service",)
    assert result.skipped == ("nope.service",)
    assert (
        os.readlink(wants(root, "multi-user.target", "vendor.service"))
        == "/usr/lib/systemd/system/vendor.service"
    )


@needs_systemctl
@pytest.mark.allow_commands
def test_unset_enabled_follows_the_preset_policy(root: HostRoot, writer: UnitWriter) -> None:
    presets = root.prefix / "etc/systemd/system-preset/90-test.preset"
    presets.parent.mkdir(parents=True)
    presets.write_text("enable wanted.service\ndisable *\n")
    writer.write_units([Unit("unwanted.service", enabled=True, contents=service())])
    result = writer.write_units(
        [Unit("wanted.service", contents=service()), Unit("unwanted.service", contents=service())]
    )
    assert result.preset == ("wanted.service", "unwanted.service")
    assert os.path.lexists(wants(root, "multi-user.target", "wanted.service"))
    assert not os.path.lexists(wants(root, "multi-user.target", "unwanted.service"))


@needs_systemctl
@pytest.mark.allow_commands
def test_second_run_changes_nothing(root: HostRoot, writer: UnitWriter) -> None:
    units = [
        Unit("a.service", enabled=True, contents=service(), dropins=(Dropin("x.conf", "[Unit]\n"),)),
        Unit("b.service", enabled=False, contents=service()),
        Unit("c.service", mask=True),
        Unit("d.service", contents=service()),
    ]
    writer.write_units(units)
    before = tree(root.prefix)
    second = writer.write_units(units)
    assert not second.files_changed
    assert second.disabled_before_write == ()
    assert tree(root.prefix) == before


@needs_systemctl
@pytest.mark.allow_commands
def test_removed_unit_leaves_no_file_and_no_link(root: HostRoot, writer: UnitWriter) -> None:
    old = [Unit("gone.service", enabled=True, contents=service(), dropins=(Dropin("x.conf", "[Unit]\n"),))]
    writer.write_units(old)
    assert os.path.lexists(wants(root, "multi-user.target", "gone.service"))
    writer.remove_units(old, [])
    assert not os.path.lexists(wants(root, "multi-user.target", "gone.service"))
    assert not os.path.lexists(root.prefix / UNIT_DIR / "gone.service")
    assert not os.path.lexists(root.prefix / UNIT_DIR / "gone.service.d" / "x.conf")


@needs_systemctl
@pytest.mark.allow_commands
def test_enable_failure_carries_systemctl_output(writer: UnitWriter) -> None:
    # As upstream: a masked unit with contents and enabled: true is still enabled, which fails.
    with pytest.raises(SystemdError, match=r"^error enabling units: .*masked"):
        writer.write_units([Unit("m.service", enabled=True, mask=True, contents=service())])
