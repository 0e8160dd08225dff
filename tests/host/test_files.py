"""mcd.host.files: Ignition files with exact mode/owner, .mcdorig/.mcdnoorig bookkeeping, stale pruning."""

from __future__ import annotations

import base64
import gzip
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from casefiles import case_params, load_cases
from killing import assert_converges_after_any_kill
from recording import RecordingRunner
from trees import CORE_GROUP, CORE_PASSWD, put

from mcd.config.ignition import Dropin, File, IgnitionConfig, NodeRef, Resource, Unit, parse_ignition
from mcd.host.accounts import Accounts
from mcd.host.errors import HostError
from mcd.host.files import FileWriter
from mcd.host.originals import noorig_path, orig_path
from mcd.host.root import HostRoot
from mcd.host.units import UnitFiles
from mcd.planner.managed_paths import LEAKED_SYMLINKS, path_in_dropins

# names of atomicfs temp files a SIGKILL may leave behind (harmless garbage, never read)
TEMP_NAME = re.compile(r"^\..*\.[0-9a-f]{16}\.tmp$")


# --- helpers ---------------------------------------------------------------------------------------


def make_base(base: Path) -> Path:
    put(base, "/etc/passwd", CORE_PASSWD)
    put(base, "/etc/group", CORE_GROUP)
    return base


def writer(base: Path, runner: RecordingRunner | None = None, coreos: bool = True) -> FileWriter:
    """A FileWriter on `base`; its default runner answers nothing, so any command would fail the test."""
    root = HostRoot(base)
    return FileWriter(root, Accounts.load(root), coreos)


def ign(path: str, text: str = "", mode: int | None = None, **kw: Any) -> File:
    return File(path=path, mode=mode, data=text.encode(), **kw)


def cfg(files: tuple[File, ...] = (), units: tuple[Unit, ...] = ()) -> IgnitionConfig:
    return IgnitionConfig(version="3.5.0", files=files, units=units)


def snapshot(base: Path) -> dict[str, tuple[Any, ...]]:
    """Everything under `base`: type, mode, owner, bytes or link target (not times)."""
    out: dict[str, tuple[Any, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(base):
        for name in dirnames + filenames:
            if TEMP_NAME.match(name):
                continue
            p = Path(dirpath) / name
            st = os.lstat(p)
            rel = str(p.relative_to(base))
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(p), st.st_uid, st.st_gid)
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid)
            else:
                out[rel] = ("file", stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid, p.read_bytes())
    return out


def non_dirs(snap: dict[str, tuple[Any, ...]]) -> dict[str, tuple[Any, ...]]:
    return {k: v for k, v in snap.items() if v[0] != "dir"}


def mode_of(p: Path) -> int:
    return stat.S_IMODE(os.lstat(p).st_mode)


def at(base: Path, path: str) -> Path:
    """Host path of config path `path` under `base`."""
    return base / path.lstrip("/")


def bookkeeping(base: Path) -> list[str]:
    """Config paths of every `.mcdorig` backup and `.mcdnoorig` stamp under `base`, sorted."""
    top = base / "etc/machine-config-daemon"
    if not top.exists():
        return []
    names = (p for p in top.rglob("*") if p.name.endswith((".mcdorig", ".mcdnoorig")))
    return sorted("/" + str(p.relative_to(base)) for p in names)


# --- writing files -----------------------------------------------------------------------------------


def test_new_file_gets_exact_mode_owner_by_name_and_a_stamp(tmp_path: Path) -> None:
    w = writer(make_base(tmp_path))
    f = ign("/etc/app/conf", "secret\n", 0o600, user=NodeRef(name="core"), group=NodeRef(name="core"))
    assert w.write_files([f]) == ["/etc/app/conf"]
    target = tmp_path / "etc/app/conf"
    assert target.read_text() == "secret\n"
    st = os.lstat(target)
    assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o600, 1000, 1000)
    assert mode_of(tmp_path / "etc/app") == 0o755
    stamp = tmp_path / noorig_path("/etc/app/conf").lstrip("/")
    assert stamp.read_bytes() == b""
    assert not (tmp_path / orig_path("/etc/app/conf").lstrip("/")).exists()


def test_owner_ids_win_over_names(tmp_path: Path) -> None:
    w = writer(make_base(tmp_path))
    f = ign("/etc/x", user=NodeRef(id=4242, name="nosuchuser"), group=NodeRef(id=4343, name="nosuchgroup"))
    assert w.owner_of(f) == (4242, 4343)
    assert w.owner_of(ign("/etc/x")) == (0, 0)


def test_files_are_always_chowned_to_root_by_default(tmp_path: Path) -> None:
    target = put(make_base(tmp_path), "/etc/owned-by-core", "old")
    os.chown(target, 1000, 1000)
    writer(tmp_path).write_files([ign("/etc/owned-by-core", "old")])
    st = os.lstat(target)
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (0, 0, 0o644)


def test_existing_parent_directory_mode_is_left_alone(tmp_path: Path) -> None:
    (make_base(tmp_path) / "etc/private").mkdir(mode=0o700)
    os.chmod(tmp_path / "etc/private", 0o700)
    writer(tmp_path).write_files([ign("/etc/private/x", "x")])
    assert mode_of(tmp_path / "etc/private") == 0o700


def test_identical_file_is_not_rewritten(tmp_path: Path) -> None:
    w = writer(make_base(tmp_path))
    f = ign("/etc/same", "same\n", 0o640)
    assert w.write_files([f]) == ["/etc/same"]
    inode = os.lstat(tmp_path / "etc/same").st_ino
    assert w.write_files([f]) == []
    assert os.lstat(tmp_path / "etc/same").st_ino == inode


def test_skipped_paths_are_not_written(tmp_path: Path) -> None:
    w = writer(make_base(tmp_path))
    written = w.write_files(
        [ign("/etc/kubernetes/kubelet-ca.crt", "ca"), ign("/etc/y", "y")],
        skip={"/etc/kubernetes/kubelet-ca.crt"},
    )
    assert written == ["/etc/y"]
    assert not (tmp_path / "etc/kubernetes").exists()


WRITE_CASES = load_cases("misc.json", kind="write_files")


def _case_file(case: dict[str, Any]) -> File:
    entry = dict(case["input"]["file"])
    entry.setdefault("path", "/etc/test-file")
    contents = entry.get("contents")
    if contents and "<gzip of" in contents["source"]:
        packed = base64.b64encode(gzip.compress(b"hello world\n")).decode()
        entry["contents"] = {**contents, "source": "data:;base64," + packed}
    result = parse_ignition({"ignition": {"version": "3.5.0"}, "storage": {"files": [entry]}})
    assert result.config is not None, result.findings
    return result.config.files[0]


@pytest.mark.parametrize("case", case_params(WRITE_CASES))
def test_write_files_cases(tmp_path: Path, case: dict[str, Any]) -> None:
    base = make_base(tmp_path)
    before = snapshot(base)
    f = _case_file(case)
    expected = case["expected"]
    w = writer(base)
    if "error" in expected:
        with pytest.raises(HostError) as err:
            w.write_files([f])
        assert str(err.value) == expected["error"]
        assert snapshot(base) == before
        return
    w.write_files([f])
    target = base / f.path.lstrip("/")
    st = os.lstat(target)
    if "written" in expected:
        assert target.read_text() == expected["written"]
    if "mode" in expected:
        assert stat.S_IMODE(st.st_mode) == int(expected["mode"], 8)
    if "uid" in expected:
        assert (st.st_uid, st.st_gid) == (expected["uid"], expected["gid"])
    if "parentDirMode" in expected:
        assert mode_of(target.parent) == int(expected["parentDirMode"].split()[0], 8)


# --- hostile input: refused before anything is written ---------------------------------------------


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (
            ign("/etc/b", user=NodeRef(name="mallory")),
            'failed to retrieve file ownership for file "/etc/b": '
            "failed to retrieve UserID for username: mallory",
        ),
        (
            ign("/etc/b", group=NodeRef(name="wheel")),
            'failed to retrieve file ownership for file "/etc/b": '
            "failed to retrieve GroupID for group: wheel",
        ),
    ],
)
def test_unknown_owner_writes_nothing_anywhere(tmp_path: Path, bad: File, message: str) -> None:
    base = make_base(tmp_path / "root")
    put(tmp_path, "/outside/keep", "x")
    before = snapshot(tmp_path)
    w = writer(base)
    with pytest.raises(HostError) as err:
        w.write_files([ign("/etc/a", "first, valid"), bad, ign("/etc/c", "after")])
    assert str(err.value) == message
    assert snapshot(tmp_path) == before


def test_check_looks_again_only_at_named_owners_of_unchanged_files(tmp_path: Path) -> None:
    """A file declared as in the applied config passed the checks then; only an owner found by
    name is looked up again (the root's accounts may have lost it since). A changed file gets
    every check."""
    base = make_base(tmp_path)
    put(base, "/etc/dir/inside", "x")  # /etc/dir is a directory: no file may be written there
    w = writer(base)
    numbered = ign("/etc/dir", user=NodeRef(id=4242), group=NodeRef(id=4242))
    gone = ign("/etc/b", user=NodeRef(name="mallory"))
    w.check([numbered, ign("/etc/c")], (), unchanged={"/etc/dir", "/etc/c"})
    with pytest.raises(HostError, match="it is a directory"):
        w.check([numbered], ())
    with pytest.raises(HostError, match="failed to retrieve UserID for username: mallory"):
        w.check([gone, numbered], (), unchanged={"/etc/b", "/etc/dir"})
    appended = ign("/etc/c", append=(Resource("data:,x"),))
    with pytest.raises(HostError, match="Append is not supported"):
        w.check([appended], (), unchanged={"/etc/c"})


def test_append_refused_before_any_write(tmp_path: Path) -> None:
    from mcd.config.ignition import Resource

    base = make_base(tmp_path)
    before = snapshot(base)
    appended = ign("/etc/b", append=(Resource("data:,x"),))
    with pytest.raises(
        HostError, match=r"^found an append section when writing files\. Append is not supported$"
    ):
        writer(base).write_files([ign("/etc/a", "a"), appended])
    assert snapshot(base) == before


def test_traversal_through_a_symlinked_parent_is_refused(tmp_path: Path) -> None:
    base = make_base(tmp_path / "root")
    (tmp_path / "outside").mkdir()
    os.symlink("../../../outside", base / "etc/evil")
    before = snapshot(tmp_path)
    with pytest.raises(HostError, match=r'"/etc/evil/payload"'):
        writer(base).write_files([ign("/etc/ok", "ok"), ign("/etc/evil/payload", "pwned")])
    assert snapshot(tmp_path) == before
    assert list((tmp_path / "outside").iterdir()) == []


def test_absolute_symlinked_parent_stays_inside_the_root(tmp_path: Path) -> None:
    base = make_base(tmp_path / "root")
    (tmp_path / "outside").mkdir()
    os.symlink(str(tmp_path / "outside"), base / "etc/abs")
    writer(base).write_files([ign("/etc/abs/payload", "data")])
    assert list((tmp_path / "outside").iterdir()) == []
    # the absolute target is read as a path inside the root
    assert (base / str(tmp_path / "outside/payload").lstrip("/")).read_text() == "data"


def test_directory_in_the_way_writes_nothing(tmp_path: Path) -> None:
    base = make_base(tmp_path)
    (base / "etc/adir").mkdir()
    before = snapshot(base)
    with pytest.raises(HostError, match=r'cannot write file "/etc/adir": it is a directory'):
        writer(base).write_files([ign("/etc/first", "1"), ign("/etc/adir", "x")])
    assert snapshot(base) == before


def test_file_below_a_regular_file_is_refused(tmp_path: Path) -> None:
    base = make_base(tmp_path)
    put(base, "/etc/plain", "p")
    before = snapshot(base)
    with pytest.raises(HostError, match=r'cannot write file "/etc/plain/sub": /etc/plain is not a directory'):
        writer(base).write_files([ign("/etc/first", "1"), ign("/etc/plain/sub", "x")])
    assert snapshot(base) == before


def test_file_below_another_file_of_the_same_batch_is_refused(tmp_path: Path) -> None:
    base = make_base(tmp_path)
    before = snapshot(base)
    with pytest.raises(HostError, match=r'"/etc/n/sub": "/etc/n" is also written as a file'):
        writer(base).write_files([ign("/etc/n", "1"), ign("/etc/n/sub", "x")])
    assert snapshot(base) == before


# --- backups: createOrigFile, restore, collect_restored ----------------------------------------------


def test_os_shipped_file_round_trip_via_usr_etc(tmp_path: Path) -> None:
    base = make_base(tmp_path)
    put(base, "/usr/etc/chrony.conf", "pool default\n")
    original = put(base, "/etc/chrony.conf", "pool default\n", 0o640)
    os.chown(original, 0, 1000)
    config_a = cfg((ign("/etc/chrony.conf", "server mine\n"),))
    w = writer(base)

    assert w.write_files(config_a.files) == ["/etc/chrony.conf"]
    backup = at(base, orig_path("/etc/chrony.conf"))
    assert backup.read_text() == "pool default\n"
    assert (mode_of(backup), os.lstat(backup).st_gid) == (0o640, 1000)  # cp -a: mode and owner kept
    assert (base / "etc/chrony.conf").read_text() == "server mine\n"
    assert not at(base, noorig_path("/etc/chrony.conf")).exists()

    assert w.delete_stale(config_a, cfg()) == ["/etc/chrony.conf"]
    restored = base / "etc/chrony.conf"
    assert restored.read_text() == "pool default\n"
    assert (mode_of(restored), os.lstat(restored).st_gid) == (0o640, 1000)
    assert backup.read_text() == "pool default\n"  # kept for a re-run until the update is committed

    assert w.originals.collect_restored(config_a, cfg()) == ["/etc/chrony.conf"]
    assert not backup.exists()
    assert restored.read_text() == "pool default\n"


def test_file_outside_etc_is_backed_up_and_restored(tmp_path: Path) -> None:
    base = make_base(tmp_path)
    put(base, "/var/lib/pkg/conf", "shipped")
    w = writer(base)
    config_a = cfg((ign("/var/lib/pkg/conf", "mine"),))
    w.write_files(config_a.files)
    assert at(base, orig_path("/var/lib/pkg/conf")).read_text() == "shipped"
    assert w.delete_stale(config_a, cfg()) == ["/var/lib/pkg/conf"]
    assert (base / "var/lib/pkg/conf").read_text() == "shipped"


def test_new_file_round_trip_stamp_then_delete(tmp_path: Path) -> None:
    base = make_base(tmp_path)
    w = writer(base)
    config_a = cfg((ign("/etc/new.conf", "hello"),))
    w.write_files(config_a.files)
    stamp = at(base, noorig_path("/etc/new.conf"))
    assert stamp.exists()
    assert not at(base, orig_path("/etc/new.conf")).exists()
    assert w.delete_stale(config_a, cfg()) == ["/etc/new.conf"]
    assert not (base / "etc/new.conf").exists()
    assert not stamp.exists()
    assert w.originals.collect_restored(config_a, cfg()) == []


def test_existing_file_not_shipped_is_backed_up_and_restored_on_drop(tmp_path: Path) -> None:
    # upstream stamps an admin's own file and deletes it when the config drops it; mcd keeps it
    base = make_base(tmp_path)
    original = put(base, "/etc/local.conf", "admin\n", 0o600)
    os.chown(original, 1000, 1000)
    before = non_dirs(snapshot(base))
    config_a = cfg((ign("/etc/local.conf", "mc\n"),))
    w = writer(base)

    w.write_files(config_a.files)
    backup = at(base, orig_path("/etc/local.conf"))
    assert backup.read_text() == "admin\n"
    st = os.lstat(backup)
    assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o600, 1000, 1000)
    assert not at(base, noorig_path("/etc/local.conf")).exists()
    assert original.read_text() == "mc\n"

    assert w.delete_stale(config_a, cfg()) == ["/etc/local.conf"]
    assert w.originals.collect_restored(config_a, cfg()) == ["/etc/local.conf"]
    assert non_dirs(snapshot(base)) == before


def test_stale_backup_of_an_absent_path_gives_way_to_a_stamp(tmp_path: Path) -> None:
    # nothing was there when the daemon first writes the path: the backup cannot be its original
    base = make_base(tmp_path)
    stale = put(base, orig_path("/etc/local.conf"), "wrongly preserved")
    w = writer(base)
    config_a = cfg((ign("/etc/local.conf", "mc"),))
    w.write_files(config_a.files)
    assert not stale.exists()
    assert at(base, noorig_path("/etc/local.conf")).exists()
    assert w.delete_stale(config_a, cfg()) == ["/etc/local.conf"]
    assert not (base / "etc/local.conf").exists()


@pytest.mark.parametrize(
    "runner",
    [
        pytest.param(None, id="runner is None"),
        pytest.param(RecordingRunner().expect(["rpm"], raises=FileNotFoundError("rpm")), id="no rpm binary"),
        pytest.param(
            RecordingRunner().expect(["rpm"], 2, stderr="error: rpmdb: BDB0113 Thread died\n"),
            id="broken rpm database",
        ),
    ],
)
def test_pre_existing_file_is_backed_up_without_asking_rpm(
    tmp_path: Path, runner: RecordingRunner | None
) -> None:
    base = make_base(tmp_path)
    put(base, "/etc/admin.conf", "mine before mcd\n")
    root = HostRoot(base)
    w = FileWriter(root, Accounts.load(root))
    config_a = cfg((ign("/etc/admin.conf", "mc"),))
    w.write_files(config_a.files)
    assert at(base, orig_path("/etc/admin.conf")).read_text() == "mine before mcd\n"
    assert not at(base, noorig_path("/etc/admin.conf")).exists()
    assert w.delete_stale(config_a, cfg()) == ["/etc/admin.conf"]
    assert (base / "etc/admin.conf").read_text() == "mine before mcd\n"
    assert runner is None or runner.commands == []


def test_existing_backup_is_kept(tmp_path: Path) -> None:
    base = make_base(tmp_path)
    put(base, "/usr/etc/a.conf", "shipped")
    put(base, "/etc/a.conf", "shipped")
    w = writer(base)
    w.write_files([ign("/etc/a.conf", "v1")])
    w.write_files([ign("/etc/a.conf", "v2")])
    assert at(base, orig_path("/etc/a.conf")).read_text() == "shipped"


def test_existing_dangling_symlink_backup_is_kept(tmp_path: Path) -> None:
    base = make_base(tmp_path)
    put(base, "/usr/etc/b.conf", "shipped")
    put(base, "/etc/b.conf", "shipped")
    backup = at(base, orig_path("/etc/b.conf"))
    backup.parent.mkdir(parents=True)
    os.symlink("../nowhere", backup)
    writer(base).write_files([ign("/etc/b.conf", "v1")])
    assert os.readlink(backup) == "../nowhere"


def test_symlink_original_is_backed_up_restored_and_collected_as_a_symlink(tmp_path: Path) -> None:
    base = make_base(tmp_path)
    put(base, "/usr/share/zoneinfo/UTC", "TZif")
    put(base, "/usr/etc/localtime", "")
    os.symlink("../usr/share/zoneinfo/UTC", base / "etc/localtime")
    w = writer(base)
    config_a = cfg((ign("/etc/localtime", "TZif-mine"),))
    w.write_files(config_a.files)
    assert os.readlink(at(base, orig_path("/etc/localtime"))) == "../usr/share/zoneinfo/UTC"
    assert w.delete_stale(config_a, cfg()) == ["/etc/localtime"]
    assert os.readlink(base / "etc/localtime") == "../usr/share/zoneinfo/UTC"
    assert w.delete_stale(config_a, cfg()) == []  # a re-run finds the link already restored
    assert w.originals.collect_restored(config_a, cfg()) == ["/etc/localtime"]
    assert not os.path.lexists(at(base, orig_path("/etc/localtime")))
    assert os.readlink(base / "etc/localtime") == "../usr/share/zoneinfo/UTC"


def test_dangling_symlink_original_is_kept_too(tmp_path: Path) -> None:
    base = make_base(tmp_path)
    os.symlink("../nowhere", base / "etc/dangling")
    w = writer(base)
    config_a = cfg((ign("/etc/dangling", "mc"),))
    w.write_files(config_a.files)
    assert os.readlink(at(base, orig_path("/etc/dangling"))) == "../nowhere"
    assert not at(base, noorig_path("/etc/dangling")).exists()
    assert (base / "etc/dangling").read_text() == "mc"
    w.delete_stale(config_a, cfg())
    assert os.readlink(base / "etc/dangling") == "../nowhere"


def test_a_stamp_wins_over_a_later_os_shipped_copy(tmp_path: Path) -> None:
    # the file was written by the daemon (stamp) before the OS started shipping it: the current
    # content is the daemon's own, so it must not be preserved as "the original"
    base = make_base(tmp_path)
    w = writer(base)
    config_a = cfg((ign("/etc/late.conf", "mine v1"),))
    w.write_files(config_a.files)
    put(base, "/usr/etc/late.conf", "shipped later")
    w.write_files([ign("/etc/late.conf", "mine v2")])
    assert not at(base, orig_path("/etc/late.conf")).exists()
    w.delete_stale(config_a, cfg())
    assert not (base / "etc/late.conf").exists()
    assert not at(base, noorig_path("/etc/late.conf")).exists()


def test_restore_rewrites_a_file_that_differs_only_in_mode(tmp_path: Path) -> None:
    base = make_base(tmp_path)
    put(base, "/etc/m.conf", "same\n", 0o644)
    put(base, orig_path("/etc/m.conf"), "same\n", 0o600)
    old = cfg((ign("/etc/m.conf"),))
    assert writer(base).delete_stale(old, cfg()) == ["/etc/m.conf"]
    assert mode_of(base / "etc/m.conf") == 0o600
    assert writer(base).delete_stale(old, cfg()) == []


def _restored_pair(base: Path, path: str, text: str = "original\n") -> tuple[Path, Path]:
    """`path` restored from its backup (both hold `text`); returns (file, backup)."""
    return put(base, path, text), put(base, orig_path(path), text)


def _replace_by_symlink(path: Path, target: str) -> None:
    path.unlink()
    os.symlink(target, path)


def test_collect_restored_drops_backups_of_restored_files_units_and_dropins(tmp_path: Path) -> None:
    base = make_base(tmp_path)
    paths = ["/etc/a.conf", "/etc/systemd/system/u.service", "/etc/systemd/system/u.service.d/10-x.conf"]
    for path in paths:
        _restored_pair(base, path)
    old = cfg((ign("/etc/a.conf"),), (Unit("u.service", contents="x", dropins=(Dropin("10-x.conf", "x"),)),))
    assert writer(base).originals.collect_restored(old, cfg()) == paths
    assert bookkeeping(base) == []
    for path in paths:
        assert at(base, path).read_text() == "original\n"


def test_collect_restored_keeps_the_backup_of_a_path_still_declared(tmp_path: Path) -> None:
    base = make_base(tmp_path)
    for path in [
        "/etc/still.conf",
        "/etc/systemd/system/now-a-unit.service",
        "/etc/systemd/system/k.d/1.conf",
    ]:
        _restored_pair(base, path)
    old = cfg(
        (
            ign("/etc/still.conf"),
            ign("/etc/systemd/system/now-a-unit.service"),
            ign("/etc/systemd/system/k.d/1.conf"),
        )
    )
    new = cfg(
        (ign("/etc/still.conf"),),
        (Unit("now-a-unit.service", contents="x"), Unit("k", dropins=(Dropin("1.conf", "x"),))),
    )
    before = snapshot(base)
    assert writer(base).originals.collect_restored(old, new) == []
    assert snapshot(base) == before


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda f: f.write_text("daemon content\n"), id="restore not done yet"),
        pytest.param(lambda f: f.write_text("edited after the restore\n"), id="edited since"),
        pytest.param(lambda f: os.chmod(f, 0o600), id="other mode"),
        pytest.param(lambda f: os.chown(f, 1000, 1000), id="other owner"),
        pytest.param(os.unlink, id="file gone"),
        pytest.param(lambda f: _replace_by_symlink(f, "a.conf.mcdorig"), id="symlink instead"),
    ],
)
def test_collect_restored_keeps_a_backup_the_file_does_not_match(
    tmp_path: Path, change: Callable[[Path], object]
) -> None:
    base = make_base(tmp_path)
    target, backup = _restored_pair(base, "/etc/a.conf")
    change(target)
    assert writer(base).originals.collect_restored(cfg((ign("/etc/a.conf"),)), cfg()) == []
    assert backup.read_text() == "original\n"


def test_collect_restored_is_idempotent(tmp_path: Path) -> None:
    base = make_base(tmp_path)
    _restored_pair(base, "/etc/a.conf")
    _restored_pair(base, "/etc/b.conf")
    put(base, "/etc/b.conf", "changed")
    old = cfg((ign("/etc/a.conf"), ign("/etc/b.conf")))
    w = writer(base)
    assert w.originals.collect_restored(old, cfg()) == ["/etc/a.conf"]
    after = snapshot(base)
    assert w.originals.collect_restored(old, cfg()) == []
    assert snapshot(base) == after
    assert bookkeeping(base) == [orig_path("/etc/b.conf")]


# --- deleteStaleData ------------------------------------------------------------------------------


def test_a_backup_is_restored_whether_or_not_the_os_ships_the_file(tmp_path: Path) -> None:
    # upstream deletes both the file and the backup when the OS no longer ships the path
    base = make_base(tmp_path)
    put(base, "/etc/gone.conf", "mc")
    backup = put(base, orig_path("/etc/gone.conf"), "old")
    old = cfg((ign("/etc/gone.conf"),))
    w = writer(base)
    assert w.delete_stale(old, cfg()) == ["/etc/gone.conf"]
    assert (base / "etc/gone.conf").read_text() == "old"
    assert backup.read_text() == "old"
    assert w.originals.collect_restored(old, cfg()) == ["/etc/gone.conf"]
    assert not backup.exists()


def test_never_deleted_paths_survive(tmp_path: Path) -> None:
    base = make_base(tmp_path)
    kept = [
        "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt",
        "/etc/kubernetes/kubelet-ca.crt",
        "/etc/kubernetes/static-pod-resources/configmaps/cloud-config/ca-bundle.pem",
        "/etc/docker/certs.d/registry.example.com/ca.crt",
    ]
    for p in kept:
        put(base, p, "cert")
    put(base, "/etc/other", "x")
    old = cfg(tuple(ign(p) for p in [*kept, "/etc/other"]))
    assert writer(base).delete_stale(old, cfg()) == ["/etc/other"]
    for p in kept:
        assert (base / p.lstrip("/")).read_text() == "cert"


def test_file_now_declared_as_a_dropin_is_kept(tmp_path: Path) -> None:
    base = make_base(tmp_path)
    path = "/etc/systemd/system/kubelet.service.d/10-foo.conf"
    w = writer(base)
    old = cfg((ign(path, "[Service]\n"),))
    w.write_files(old.files)
    new = cfg(units=(Unit("kubelet.service", dropins=(Dropin("10-foo.conf", "[Service]\n"),)),))
    assert w.delete_stale(old, new) == []
    assert (base / path.lstrip("/")).read_text() == "[Service]\n"
    # as upstream: the stamp goes even though the file stays
    assert not (base / noorig_path(path).lstrip("/")).exists()


def test_missing_stale_file_is_only_a_warning(tmp_path: Path) -> None:
    base = make_base(tmp_path)
    assert writer(base).delete_stale(cfg((ign("/etc/never-written"),)), cfg()) == []


def test_files_still_declared_are_untouched(tmp_path: Path) -> None:
    base = make_base(tmp_path)
    put(base, "/etc/stays", "x")
    both = cfg((ign("/etc/stays", "x"),))
    assert writer(base, RecordingRunner()).delete_stale(both, both) == []
    assert (base / "etc/stays").exists()


def test_leaked_symlinks_are_always_removed(tmp_path: Path) -> None:
    base = make_base(tmp_path)
    for link in LEAKED_SYMLINKS:
        (base / link.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        os.symlink("/usr/lib/systemd/system/x.service", base / link.lstrip("/"))
    assert writer(base).delete_stale(cfg(), cfg()) == list(LEAKED_SYMLINKS)
    assert writer(base).delete_stale(cfg(), cfg()) == []


# --- units and dropins -----------------------------------------------------------------------------


def test_unit_file_with_coreos_usr_etc_copy_is_backed_up_from_it(tmp_path: Path) -> None:
    base = make_base(tmp_path)
    put(base, "/usr/etc/systemd/system/foo.service", "[Unit]\nDescription=shipped\n")
    put(base, "/etc/systemd/system/foo.service", "[Unit]\nDescription=local edit\n")
    w = writer(base)
    assert write_unit_file(w, "/etc/systemd/system/foo.service", "[Unit]\nDescription=mc\n") is True
    backup = base / orig_path("/etc/systemd/system/foo.service").lstrip("/")
    assert backup.read_text() == "[Unit]\nDescription=shipped\n"
    unit = base / "etc/systemd/system/foo.service"
    assert (unit.read_text(), mode_of(unit)) == ("[Unit]\nDescription=mc\n", 0o644)
    assert write_unit_file(w, "/etc/systemd/system/foo.service", "[Unit]\nDescription=mc\n") is False

    old = cfg(units=(Unit("foo.service", contents="[Unit]\nDescription=mc\n"),))
    assert w.delete_stale(old, cfg()) == ["/etc/systemd/system/foo.service"]
    assert unit.read_text() == "[Unit]\nDescription=shipped\n"
    assert backup.exists()
    assert w.originals.collect_restored(old, cfg()) == ["/etc/systemd/system/foo.service"]
    assert not backup.exists()
    assert unit.read_text() == "[Unit]\nDescription=shipped\n"


@pytest.mark.parametrize("coreos", [True, False])
def test_a_unit_file_already_there_is_backed_up_and_restored(tmp_path: Path, coreos: bool) -> None:
    """Nothing is lost: an existing unit file (no CoreOS /usr/etc copy to take it from) is kept."""
    base = make_base(tmp_path)
    if not coreos:
        put(base, "/usr/etc/systemd/system/bar.service", "from usr/etc")  # only used on CoreOS
    put(base, "/etc/systemd/system/bar.service", "admin's own")
    w = writer(base, RecordingRunner(), coreos=coreos)  # no command expected
    write_unit_file(w, "/etc/systemd/system/bar.service", "mine")
    backup = base / "etc/machine-config-daemon/orig/etc/systemd/system/bar.service.mcdorig"
    assert backup.read_text() == "admin's own"
    old = cfg(units=(Unit("bar.service", contents="mine"),))
    assert w.delete_stale(old, cfg()) == ["/etc/systemd/system/bar.service"]
    assert (base / "etc/systemd/system/bar.service").read_text() == "admin's own"
    assert w.originals.collect_restored(old, cfg()) == ["/etc/systemd/system/bar.service"]
    assert not backup.exists()


def test_removed_units_and_dropins_are_pruned(tmp_path: Path) -> None:
    base = make_base(tmp_path)
    w = writer(base)
    sysd = "/etc/systemd/system"
    # a unit the daemon created (stamp), a masked unit, a dropin of a unit that stays
    put(base, f"{sysd}/new.service", "[Unit]\n")
    put(base, noorig_path(f"{sysd}/new.service"), "")
    os.symlink("/dev/null", base / f"{sysd}/masked.service".lstrip("/"))
    put(base, f"{sysd}/kept.service.d/10-old.conf", "[Service]\n")
    put(base, f"{sysd}/kept.service.d/20-new.conf", "[Service]\n")
    put(base, f"{sysd}/kept.service", "[Unit]\n")
    old = cfg(
        units=(
            Unit("new.service", contents="[Unit]\n"),
            Unit("masked.service", mask=True),
            Unit("kept.service", contents="[Unit]\n", dropins=(Dropin("10-old.conf", "[Service]\n"),)),
        )
    )
    new = cfg(
        units=(Unit("kept.service", contents="[Unit]\n", dropins=(Dropin("20-new.conf", "[Service]\n"),)),)
    )
    assert sorted(w.delete_stale(old, new)) == sorted(
        [f"{sysd}/new.service", f"{sysd}/masked.service", f"{sysd}/kept.service.d/10-old.conf"]
    )
    assert not (base / f"{sysd}/new.service".lstrip("/")).exists()
    assert not (base / noorig_path(f"{sysd}/new.service").lstrip("/")).exists()
    assert not os.path.lexists(base / f"{sysd}/masked.service".lstrip("/"))
    assert not (base / f"{sysd}/kept.service.d/10-old.conf".lstrip("/")).exists()
    assert (base / f"{sysd}/kept.service.d/20-new.conf".lstrip("/")).exists()
    assert (base / f"{sysd}/kept.service".lstrip("/")).exists()


def test_remove_unit_path_has_backup_semantics(tmp_path: Path) -> None:
    base = make_base(tmp_path)
    w = writer(base)
    sysd = "/etc/systemd/system"
    put(base, "/usr" + f"{sysd}/shipped.service", "[Unit]\nshipped\n")
    put(base, f"{sysd}/shipped.service", "[Unit]\nshipped\n")
    write_unit_file(w, f"{sysd}/shipped.service", b"[Unit]\nmine\n", 0o644)
    write_unit_file(w, f"{sysd}/x.service.d/10-a.conf", "[Service]\n")
    os.symlink("/dev/null", base / f"{sysd}/m.service".lstrip("/"))

    assert UnitFiles(w.originals).remove_unit_path(f"{sysd}/shipped.service") is True  # restored
    assert (base / f"{sysd}/shipped.service".lstrip("/")).read_text() == "[Unit]\nshipped\n"
    assert (
        UnitFiles(w.originals).remove_unit_path(f"{sysd}/shipped.service") is False
    )  # a re-run keeps the restored file
    assert (base / f"{sysd}/shipped.service".lstrip("/")).exists()
    assert (
        UnitFiles(w.originals).remove_unit_path(f"{sysd}/x.service.d/10-a.conf") is True
    )  # no original: deleted
    assert UnitFiles(w.originals).remove_unit_path(f"{sysd}/m.service") is True  # a mask link goes too
    assert UnitFiles(w.originals).remove_unit_path(f"{sysd}/m.service") is False
    assert not os.path.lexists(base / f"{sysd}/m.service".lstrip("/"))
    # the dropin's stamp is gone; the restored unit's backup stays until collect_restored
    assert bookkeeping(base) == [orig_path(f"{sysd}/shipped.service")]


def test_remove_unit_path_refuses_a_directory(tmp_path: Path) -> None:
    base = make_base(tmp_path)
    put(base, "/etc/systemd/system/d.service/inner", "x")
    with pytest.raises(HostError, match=r"unable to delete /etc/systemd/system/d\.service"):
        UnitFiles(writer(base).originals).remove_unit_path("/etc/systemd/system/d.service")
    assert (base / "etc/systemd/system/d.service/inner").exists()


DROPIN_CASES = load_cases("misc.json", kind="is_path_in_dropins")


def _units(raw: list[dict[str, Any]]) -> tuple[Unit, ...]:
    return tuple(
        Unit(u["name"], dropins=tuple(Dropin(d["name"], d.get("contents")) for d in u.get("dropins", ())))
        for u in raw
    )


@pytest.mark.parametrize("case", case_params(DROPIN_CASES))
def test_path_in_dropins_cases(case: dict[str, Any]) -> None:
    units = _units(case["input"]["units"])
    assert path_in_dropins(case["input"]["path"], units) is case["expected"]["inDropins"]


@pytest.mark.parametrize(
    "path",
    [
        "/etc/systemd/system/kubelet.service.d/10-foo.txt",  # not .conf
        "/etc/systemd/system/kubelet.service/10-foo.conf",  # directory not .d
        "/etc/kubelet.service.d/10-foo.conf",  # not under /etc/systemd/system
    ],
)
def test_path_in_dropins_refuses_non_dropin_paths(path: str) -> None:
    units = (Unit("kubelet.service", dropins=(Dropin("10-foo.conf", "x"), Dropin("10-foo.txt", "x"))),)
    assert path_in_dropins(path, units) is False


# --- crash safety: SIGKILL at every failpoint, then re-run the same call -----------------------------


A_FILES = (
    ign("/etc/chrony.conf", "server mine\n"),  # OS-shipped original
    ign("/etc/new.conf", "new\n", 0o600, user=NodeRef(name="core")),  # nothing there before
    ign("/etc/admin.conf", "mc\n"),  # an admin's own file
    ign("/etc/localtime", "TZif-mc"),  # a symlink original
)
UNIT = "/etc/systemd/system/foo.service"
DROPIN = "/etc/systemd/system/foo.service.d/10-mc.conf"
A_UNITS = (
    Unit("foo.service", contents="[Unit]\nDescription=mc\n", dropins=(Dropin("10-mc.conf", "[Unit]\n"),)),
)


def _initial(base: Path) -> None:
    make_base(base)
    put(base, "/usr/etc/chrony.conf", "pool default\n")
    put(base, "/etc/chrony.conf", "pool default\n")
    put(base, "/usr" + UNIT, "[Unit]\nDescription=shipped\n")
    put(base, UNIT, "[Unit]\nDescription=shipped\n")
    os.chown(put(base, "/etc/admin.conf", "admin\n", 0o640), 1000, 1000)
    os.symlink("../usr/share/zoneinfo/UTC", base / "etc/localtime")


def _apply_a(base: Path) -> None:
    w = writer(base)
    w.write_files(A_FILES)
    write_unit_file(w, UNIT, "[Unit]\nDescription=mc\n")
    write_unit_file(w, DROPIN, "[Unit]\n")


def _after_a(base: Path) -> None:
    _initial(base)
    _apply_a(base)


def _drop_a(base: Path) -> None:
    writer(base).delete_stale(cfg(A_FILES, A_UNITS), cfg())


def _collect_a(base: Path) -> None:
    writer(base).originals.collect_restored(cfg(A_FILES, A_UNITS), cfg())


def _after_drop_a(base: Path) -> None:
    _after_a(base)
    _drop_a(base)


def test_write_converges_after_a_kill_anywhere(tmp_path: Path) -> None:
    assert assert_converges_after_any_kill(tmp_path, snapshot, _initial, _apply_a) >= 10


def test_delete_stale_converges_after_a_kill_anywhere(tmp_path: Path) -> None:
    assert assert_converges_after_any_kill(tmp_path, snapshot, _after_a, _drop_a, finish=_collect_a) >= 8
    # committed and collected, the tree is the one before A (bar empty directories): originals
    # back, no backups, no stamps, no temp files
    before = tmp_path / "before"
    _initial(before)
    clean = tmp_path / "clean"
    assert non_dirs(snapshot(clean)) == non_dirs(snapshot(before))
    assert bookkeeping(clean) == []
    assert [p for p in clean.rglob("*") if TEMP_NAME.match(p.name)] == []


def test_collect_restored_converges_after_a_kill_anywhere(tmp_path: Path) -> None:
    assert assert_converges_after_any_kill(tmp_path, snapshot, _after_drop_a, _collect_a) >= 4
    before = tmp_path / "before"
    _initial(before)
    assert non_dirs(snapshot(tmp_path / "clean")) == non_dirs(snapshot(before))


def test_rerun_after_a_completed_restore_keeps_the_restored_files(tmp_path: Path) -> None:
    base = tmp_path
    _after_a(base)
    _drop_a(base)
    restored = snapshot(base)
    # the backups are still there, so the re-run restores (finding nothing to do) instead of deleting
    originals = ["/etc/admin.conf", "/etc/chrony.conf", "/etc/localtime", UNIT]
    assert bookkeeping(base) == sorted(orig_path(p) for p in originals)
    assert writer(base).delete_stale(cfg(A_FILES, A_UNITS), cfg()) == []
    assert snapshot(base) == restored
    assert (base / "etc/chrony.conf").read_text() == "pool default\n"
    assert (base / "etc/admin.conf").read_text() == "admin\n"
    assert (base / UNIT.lstrip("/")).read_text() == "[Unit]\nDescription=shipped\n"


def test_dropped_mask_of_a_shipped_unit_is_removed(tmp_path: Path) -> None:
    base = make_base(tmp_path)
    put(base, "/usr" + UNIT, "[Unit]\n")
    (base / UNIT.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
    os.symlink("/dev/null", base / UNIT.lstrip("/"))
    assert writer(base).delete_stale(cfg(units=(Unit("foo.service", mask=True),)), cfg()) == [UNIT]
    assert not os.path.lexists(base / UNIT.lstrip("/"))


# --- what Ignition wrote from the config is no original (CoreOS) -----------------------------------


def test_coreos_file_already_as_declared_is_stamped_and_deleted_when_dropped(tmp_path: Path) -> None:
    """Ignition wrote it at install from this config: upstream stamps it, so a later drop deletes it."""
    base = make_base(tmp_path)
    put(base, "/etc/ign.conf", "from the config\n")
    config_a = cfg((ign("/etc/ign.conf", "from the config\n"),))
    w = writer(base)
    assert w.write_files(config_a.files) == []  # nothing to write either
    assert at(base, noorig_path("/etc/ign.conf")).exists()
    assert not at(base, orig_path("/etc/ign.conf")).exists()
    assert w.delete_stale(config_a, cfg()) == ["/etc/ign.conf"]
    assert not (base / "etc/ign.conf").exists()


def test_coreos_file_already_as_declared_is_backed_up_from_the_os_copy(tmp_path: Path) -> None:
    base = make_base(tmp_path)
    put(base, "/usr/etc/chrony.conf", "pool default\n")
    put(base, "/etc/chrony.conf", "server mine\n")
    config_a = cfg((ign("/etc/chrony.conf", "server mine\n"),))
    w = writer(base)
    w.write_files(config_a.files)
    assert at(base, orig_path("/etc/chrony.conf")).read_text() == "pool default\n"
    assert w.delete_stale(config_a, cfg()) == ["/etc/chrony.conf"]
    assert (base / "etc/chrony.conf").read_text() == "pool default\n"


@pytest.mark.parametrize(
    ("existing", "mode"),
    [("other text\n", 0o644), ("from the config\n", 0o600)],
    ids=["other-contents", "other-mode"],
)
def test_coreos_file_differing_from_the_declaration_is_still_an_original(
    tmp_path: Path, existing: str, mode: int
) -> None:
    base = make_base(tmp_path)
    put(base, "/etc/ign.conf", existing, mode)
    writer(base).write_files((ign("/etc/ign.conf", "from the config\n"),))
    assert at(base, orig_path("/etc/ign.conf")).read_text() == existing


def test_elsewhere_a_file_already_as_declared_is_kept_as_an_original(tmp_path: Path) -> None:
    """Off CoreOS no installer wrote it from the config: nothing is lost, it comes back on drop."""
    base = make_base(tmp_path)
    put(base, "/etc/same.conf", "same\n")
    config_a = cfg((ign("/etc/same.conf", "same\n"),))
    w = writer(base, coreos=False)
    w.write_files(config_a.files)
    assert at(base, orig_path("/etc/same.conf")).read_text() == "same\n"
    assert w.delete_stale(config_a, cfg()) == []  # restored: it already is the original
    assert (base / "etc/same.conf").read_text() == "same\n"


@pytest.mark.parametrize("coreos", [True, False])
def test_unit_file_already_as_declared_is_stamped(tmp_path: Path, coreos: bool) -> None:
    """Upstream backs up unit files only from CoreOS's /usr/etc: one a config wrote is deleted."""
    base = make_base(tmp_path)
    put(base, "/etc/systemd/system/ign.service", "[Unit]\n")
    w = writer(base, coreos=coreos)
    assert write_unit_file(w, "/etc/systemd/system/ign.service", "[Unit]\n") is False
    assert at(base, noorig_path("/etc/systemd/system/ign.service")).exists()
    old = cfg(units=(Unit("ign.service", contents="[Unit]\n"),))
    assert w.delete_stale(old, cfg()) == ["/etc/systemd/system/ign.service"]
    assert not (base / "etc/systemd/system/ign.service").exists()


def test_off_coreos_a_unit_file_the_replaced_config_wrote_is_deleted_when_dropped(tmp_path: Path) -> None:
    """Taking over a node upstream managed: its unit file is no original, dropping the unit removes it."""
    base = make_base(tmp_path)
    unit = "/etc/systemd/system/old.service"
    put(base, unit, "[Unit]\nDescription=written by upstream\n")
    old = cfg(units=(Unit("old.service", contents="[Unit]\nDescription=written by upstream\n"),))
    new = cfg(units=(Unit("old.service", contents="[Unit]\nDescription=new\n"),))
    w = writer(base, coreos=False)
    with w.originals.replacing(old):
        assert write_unit_file(w, unit, "[Unit]\nDescription=new\n") is True
    assert at(base, noorig_path(unit)).exists()
    assert not at(base, orig_path(unit)).exists()
    assert w.delete_stale(new, cfg()) == [unit]
    assert not at(base, unit).exists()


# --- masks keep what they replace ------------------------------------------------------------------

MASKED = "/etc/systemd/system/m.service"


@pytest.mark.parametrize("coreos", [True, False])
def test_mask_backs_up_the_unit_file_it_replaces_and_a_drop_restores_it(tmp_path: Path, coreos: bool) -> None:
    base = make_base(tmp_path)
    put(base, MASKED, "[Unit]\nDescription=admin's\n", 0o640)
    w = writer(base, coreos=coreos)
    assert UnitFiles(w.originals).mask_unit_path(MASKED) is True
    assert os.readlink(at(base, MASKED)) == "/dev/null"
    assert at(base, orig_path(MASKED)).read_text() == "[Unit]\nDescription=admin's\n"
    assert UnitFiles(w.originals).mask_unit_path(MASKED) is False
    old = cfg(units=(Unit("m.service", mask=True),))
    assert w.delete_stale(old, cfg()) == [MASKED]
    assert at(base, MASKED).read_text() == "[Unit]\nDescription=admin's\n"
    assert mode_of(at(base, MASKED)) == 0o640


def test_mask_of_nothing_is_stamped_and_a_drop_removes_the_link(tmp_path: Path) -> None:
    base = make_base(tmp_path)
    w = writer(base)
    assert UnitFiles(w.originals).mask_unit_path(MASKED) is True
    assert at(base, noorig_path(MASKED)).exists()
    assert w.delete_stale(cfg(units=(Unit("m.service", mask=True),)), cfg()) == [MASKED]
    assert not os.path.lexists(at(base, MASKED))
    assert not at(base, noorig_path(MASKED)).exists()


def test_explicit_unmask_restores_the_original_or_removes_the_link(tmp_path: Path) -> None:
    base = make_base(tmp_path)
    put(base, MASKED, "[Unit]\n")
    w = writer(base)
    UnitFiles(w.originals).mask_unit_path(MASKED)
    assert UnitFiles(w.originals).unmask_unit_path(MASKED) is True
    assert at(base, MASKED).read_text() == "[Unit]\n"
    os.unlink(at(base, MASKED))
    os.unlink(at(base, orig_path(MASKED)))
    UnitFiles(w.originals).mask_unit_path(MASKED)  # over nothing: a stamp
    assert UnitFiles(w.originals).unmask_unit_path(MASKED) is True
    assert not os.path.lexists(at(base, MASKED))
    assert not at(base, noorig_path(MASKED)).exists()
    assert UnitFiles(w.originals).unmask_unit_path(MASKED) is False


def test_coreos_mask_already_in_place_is_stamped(tmp_path: Path) -> None:
    """Ignition masked it at install: dropping the mask later removes the link, as upstream."""
    base = make_base(tmp_path)
    at(base, MASKED).parent.mkdir(parents=True)
    os.symlink("/dev/null", at(base, MASKED))
    w = writer(base)
    assert UnitFiles(w.originals).mask_unit_path(MASKED) is False
    assert at(base, noorig_path(MASKED)).exists()
    assert w.delete_stale(cfg(units=(Unit("m.service", mask=True),)), cfg()) == [MASKED]
    assert not os.path.lexists(at(base, MASKED))


def test_coreos_file_as_the_replaced_config_declared_it_is_stamped(tmp_path: Path) -> None:
    """The first update after install: Ignition wrote config A's files, B changes them."""
    base = make_base(tmp_path)
    put(base, "/etc/a.conf", "A\n")
    put(base, "/etc/systemd/system/a.service", "[Unit]\nA\n")
    put(base, "/etc/admin.conf", "admin\n")
    old = cfg(
        (ign("/etc/a.conf", "A\n"), ign("/etc/admin.conf", "not what is there\n")),
        (Unit("a.service", contents="[Unit]\nA\n"),),
    )
    w = writer(base)
    with w.originals.replacing(old):
        w.write_files((ign("/etc/a.conf", "B\n"), ign("/etc/admin.conf", "B\n")))
        write_unit_file(w, "/etc/systemd/system/a.service", "[Unit]\nB\n")
    assert at(base, noorig_path("/etc/a.conf")).exists()
    assert at(base, noorig_path("/etc/systemd/system/a.service")).exists()
    assert at(base, orig_path("/etc/admin.conf")).read_text() == "admin\n"  # not from a config
    # outside the block the replaced config is forgotten: the same situation keeps an original
    put(base, "/etc/c.conf", "A\n")
    w.write_files((ign("/etc/c.conf", "B\n"),))
    assert at(base, orig_path("/etc/c.conf")).read_text() == "A\n"


def write_unit_file(w: FileWriter, path: str, contents: str | bytes, mode: int = 0o644) -> bool:
    """One unit file through the batch writer; False when it already held exactly this."""
    return UnitFiles(w.originals).write_unit_files([(path, contents, mode)])[0]
