"""The drift monitor on real inotify: every kind of hand change to a managed path is reported for
that path, and the per-path check gives upstream's text; harmless events give no drift."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from builders import ign_file, mc_object
from drifttools import Collector, laid_down

from mcd.agent.watch.drift import DriftMonitor
from mcd.host.accounts import Accounts
from mcd.host.files import FileWriter
from mcd.host.root import HostRoot

A = "/etc/mcd-test/a.conf"
MARK = "/etc/mcd-test/marker.conf"
UNIT = "/etc/systemd/system/hello.service"
WANTS = "etc/systemd/system/multi-user.target.wants/hello.service"
UNIT_TEXT = (
    "[Unit]\nDescription=hello\n[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"
)


def _config() -> dict[str, object]:
    return mc_object(
        "rendered-worker-a",
        files=[ign_file(A, "a=1\n"), ign_file(MARK, ""), ign_file("/etc/later/sub/new.conf", "new\n")],
        units=[
            {"name": "hello.service", "enabled": True, "contents": UNIT_TEXT,
             "dropins": [{"name": "10-x.conf", "contents": "[Service]\nEnvironment=X=1\n"}]},
            {"name": "gone.service", "mask": True},
        ],
    )  # fmt: skip


def _is_enabled(root: Path):  # type: ignore[no-untyped-def]
    def is_enabled(names):  # type: ignore[no-untyped-def]
        return {n: "enabled" if (root / WANTS).is_symlink() else "disabled" for n in names}

    return is_enabled


@pytest.fixture
def node(tmp_path: Path) -> Iterator[tuple[Path, DriftMonitor, Collector]]:
    root, mc = laid_down(tmp_path, _config())
    # the update ran no systemctl (recording runner): make the enablement link and the mask by hand
    (root / WANTS).parent.mkdir(parents=True, exist_ok=True)
    os.symlink("/etc/systemd/system/hello.service", root / WANTS)
    if not (root / "etc/systemd/system/gone.service").is_symlink():
        os.symlink("/dev/null", root / "etc/systemd/system/gone.service")
    shutil.rmtree(root / "etc/later")  # a managed path that does not exist when the monitor starts
    hr = HostRoot(root)
    files = FileWriter(hr, Accounts.load(hr))
    collector = Collector()
    assert mc.config is not None
    monitor = DriftMonitor(hr, mc.config, collector.on_change, is_enabled=_is_enabled(root),
                           owners=files.owner_of)  # fmt: skip
    monitor.start()
    yield root, monitor, collector
    monitor.stop()


def _host(root: Path, path: str) -> Path:
    return root / path.lstrip("/")


def test_the_clean_node_has_no_drift_but_the_missing_path(node: tuple[Path, DriftMonitor, Collector]) -> None:
    _, monitor, _ = node
    drift = {path: err for path in monitor.managed if (err := monitor.check(path)) is not None}
    assert drift == {
        "/etc/later/sub/new.conf": 'could not stat file "/etc/later/sub/new.conf": '
        "lstat /etc/later/sub/new.conf: no such file or directory"
    }


def test_hand_edit_in_place(node: tuple[Path, DriftMonitor, Collector]) -> None:
    root, monitor, seen = node
    with _host(root, A).open("a") as f:
        f.write("extra\n")
    seen.wait(monitor, A)
    assert monitor.check(A) == f'content mismatch for file "{A}"'


@pytest.mark.allow_commands
def test_sed_in_place(node: tuple[Path, DriftMonitor, Collector]) -> None:
    root, monitor, seen = node
    if shutil.which("sed") is None:
        pytest.skip("no sed")
    subprocess.run(["sed", "-i", "s/a=1/a=2/", str(_host(root, A))], check=True)
    seen.wait(monitor, A)
    assert monitor.check(A) == f'content mismatch for file "{A}"'


def test_editor_write_temp_and_rename(node: tuple[Path, DriftMonitor, Collector]) -> None:
    root, monitor, seen = node
    tmp = _host(root, "/etc/mcd-test/.a.conf.swp")
    tmp.write_text("a=3\n")
    tmp.chmod(0o644)
    os.rename(tmp, _host(root, A))
    seen.wait(monitor, A)
    assert monitor.check(A) == f'content mismatch for file "{A}"'


def test_chmod(node: tuple[Path, DriftMonitor, Collector]) -> None:
    root, monitor, seen = node
    _host(root, A).chmod(0o755)
    seen.wait(monitor, A)
    assert monitor.check(A) == (
        f'mode mismatch for file: "{A}"; expected: -rw-r--r--/420/0644; received: -rwxr-xr-x/493/0755'
    )


def test_chown(node: tuple[Path, DriftMonitor, Collector]) -> None:
    root, monitor, seen = node
    os.chown(_host(root, A), 1000, 1000)
    seen.wait(monitor, A)
    assert monitor.check(A) == f'owner mismatch for file: "{A}"; expected: 0:0; received: 1000:1000'


def test_delete(node: tuple[Path, DriftMonitor, Collector]) -> None:
    root, monitor, seen = node
    _host(root, A).unlink()
    seen.wait(monitor, A)
    assert monitor.check(A) == f'could not stat file "{A}": lstat {A}: no such file or directory'


def test_parent_directory_deleted_then_recreated(node: tuple[Path, DriftMonitor, Collector]) -> None:
    root, monitor, seen = node
    shutil.rmtree(_host(root, "/etc/mcd-test"))
    seen.wait(monitor, A)
    assert monitor.check(A) == f'could not stat file "{A}": lstat {A}: no such file or directory'
    seen.seen.clear()
    _host(root, "/etc/mcd-test").mkdir()
    # the new directory is watched again: a file put back in it is seen
    _host(root, A).write_text("a=1\n")
    seen.wait(monitor, A)
    assert monitor.check(A) is None
    assert "/etc/mcd-test" in monitor.watched_dirs


def test_parent_directory_moved_away_and_back(
    node: tuple[Path, DriftMonitor, Collector], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    root, monitor, seen = node
    os.rename(_host(root, "/etc/mcd-test"), tmp_path / "moved")
    seen.wait(monitor, A)
    assert monitor.check(A) == f'could not stat file "{A}": lstat {A}: no such file or directory'
    seen.seen.clear()
    os.rename(tmp_path / "moved", _host(root, "/etc/mcd-test"))
    seen.wait(monitor, A)
    assert monitor.check(A) is None
    seen.seen.clear()
    _host(root, A).write_text("a=2\n")
    seen.wait(monitor, A)
    assert monitor.check(A) == f'content mismatch for file "{A}"'
    assert capfd.readouterr().err == ""  # pyinotify's own complaint about the move is not printed


def test_path_missing_at_start_is_followed_when_created(node: tuple[Path, DriftMonitor, Collector]) -> None:
    root, monitor, seen = node
    new = "/etc/later/sub/new.conf"
    _host(root, "/etc/later/sub").mkdir(parents=True)
    _host(root, new).write_text("new\n")
    _host(root, new).chmod(0o644)
    seen.wait(monitor, new)
    assert monitor.check(new) is None
    seen.seen.clear()
    _host(root, new).write_text("changed\n")
    seen.wait(monitor, new)
    assert monitor.check(new) == f'content mismatch for file "{new}"'


GONE = "/etc/systemd/system/gone.service"


@pytest.mark.parametrize(
    ("path", "target", "message"),
    [
        pytest.param(
            UNIT,
            "/dev/null",
            f'mode mismatch for file: "{UNIT}"; expected: -rw-r--r--/420/0644; '
            "received: Lrwxrwxrwx/134218239/01000000777",
            id="unit-masked-by-hand",
        ),
        pytest.param(
            GONE,
            "/usr/lib/systemd/system/gone.service",
            f'state validation: invalid unit masked setting. path: "{GONE}"; '
            "expected: /dev/null; received: /usr/lib/systemd/system/gone.service",
            id="mask-link-changed",
        ),
    ],
)
def test_a_unit_path_replaced_by_a_link(
    node: tuple[Path, DriftMonitor, Collector], path: str, target: str, message: str
) -> None:
    root, monitor, seen = node
    _host(root, path).unlink()
    os.symlink(target, _host(root, path))
    seen.wait(monitor, path)
    assert monitor.check(path) == message


def test_enablement_link_removed(node: tuple[Path, DriftMonitor, Collector]) -> None:
    root, monitor, seen = node
    (root / WANTS).unlink()
    seen.wait(monitor, UNIT)
    assert monitor.check(UNIT) == 'unit "hello.service" expected enabled=true, but systemd reports "disabled"'


def test_dropin_edited(node: tuple[Path, DriftMonitor, Collector]) -> None:
    root, monitor, seen = node
    dropin = "/etc/systemd/system/hello.service.d/10-x.conf"
    _host(root, dropin).write_text("[Service]\n")
    seen.wait(monitor, dropin)
    assert monitor.check(dropin) == f'content mismatch for file "{dropin}"'


def test_touch_and_unrelated_files_are_no_drift(node: tuple[Path, DriftMonitor, Collector]) -> None:
    root, monitor, seen = node
    _host(root, A).touch()
    _host(root, "/etc/mcd-test/unrelated.conf").write_text("x")
    seen.settle(monitor, _host(root, MARK))
    assert "/etc/mcd-test/unrelated.conf" not in seen.seen
    assert [p for p in seen.seen if monitor.check(p) is not None] == []


def test_stop_drops_watches_and_pending_paths(node: tuple[Path, DriftMonitor, Collector]) -> None:
    root, monitor, _ = node
    monitor.stop()
    assert not monitor.running
    _host(root, A).write_text("x\n")
    assert monitor.ordered(monitor.take()) == []
    assert monitor.watched_dirs == []
