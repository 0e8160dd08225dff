"""mcd.host.atomicfs: atomic, durable writes that leave the target fully old or fully new."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from mcd.host import atomicfs, batchwrite
from mcd.host.atomicfs import (
    atomic_symlink,
    atomic_write,
    copy_preserving,
    fsync_dir,
    lstat_or_none,
    make_dirs,
    read_bytes_nofollow,
    remove,
    remove_tree,
)
from mcd.host.root import HostRoot
from mcd.host.status import STATUS_RECORD, read_status, record_state


def mode_of(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def entries(directory: Path) -> list[str]:
    return sorted(os.listdir(directory))


# --- atomic_write: content, mode, owner -----------------------------------------------------------


def test_writes_content_with_default_mode(tmp_path: Path) -> None:
    target = tmp_path / "f"
    assert atomic_write(target, b"hello\n") is True
    assert target.read_bytes() == b"hello\n"
    assert mode_of(target) == 0o644
    assert entries(tmp_path) == ["f"]


@pytest.mark.parametrize("mode", [0o600, 0o755, 0o644, 0o400, 0o777, 0o1777])
def test_mode_is_exact_whatever_the_umask(tmp_path: Path, mode: int) -> None:
    old = os.umask(0o077)
    try:
        atomic_write(tmp_path / "f", b"x", mode)
    finally:
        os.umask(old)
    assert mode_of(tmp_path / "f") == mode


def test_owner_is_set(tmp_path: Path) -> None:
    target = tmp_path / "f"
    atomic_write(target, b"x", 0o600, uid=1000, gid=1000)
    st = os.stat(target)
    assert (st.st_uid, st.st_gid) == (1000, 1000)


def test_setuid_bit_survives_the_chown(tmp_path: Path) -> None:
    # chown clears setuid/setgid, so the mode must be applied after it.
    target = tmp_path / "f"
    atomic_write(target, b"x", 0o4755, uid=1000, gid=1000)
    assert mode_of(target) == 0o4755


def test_only_group_changed_when_uid_is_minus_one(tmp_path: Path) -> None:
    target = tmp_path / "f"
    atomic_write(target, b"x", gid=1000)
    st = os.stat(target)
    assert (st.st_uid, st.st_gid) == (os.geteuid(), 1000)


def test_replaces_existing_content_by_rename(tmp_path: Path) -> None:
    target = tmp_path / "f"
    target.write_bytes(b"old")
    old_inode = os.stat(target).st_ino
    assert atomic_write(target, b"new") is True
    assert target.read_bytes() == b"new"
    assert os.stat(target).st_ino != old_inode
    assert entries(tmp_path) == ["f"]


# --- atomic_write: parent directories -------------------------------------------------------------


def test_missing_parents_get_dir_mode_and_existing_ones_are_untouched(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir(mode=0o750)
    os.chmod(tmp_path / "home", 0o750)
    target = tmp_path / "home/core/.ssh/authorized_keys.d/ignition"
    old = os.umask(0o022)
    try:
        atomic_write(target, b"key\n", 0o600, dir_mode=0o700)
    finally:
        os.umask(old)
    assert mode_of(tmp_path / "home") == 0o750
    for d in ("home/core", "home/core/.ssh", "home/core/.ssh/authorized_keys.d"):
        assert mode_of(tmp_path / d) == 0o700, d
    assert mode_of(target) == 0o600


def test_default_dir_mode_is_0755(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        atomic_write(tmp_path / "a/b/f", b"x")
    finally:
        os.umask(old)
    assert mode_of(tmp_path / "a") == 0o755
    assert mode_of(tmp_path / "a/b") == 0o755


def test_parent_that_is_a_file_fails_cleanly(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"")
    with pytest.raises(NotADirectoryError):
        atomic_write(tmp_path / "a/f", b"x")
    assert entries(tmp_path) == ["a"]


def test_make_dirs_fsyncs_each_new_directorys_parent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[Path] = []
    monkeypatch.setattr(atomicfs, "fsync_dir", lambda path, **_: synced.append(path))
    make_dirs(tmp_path / "a/b/c")
    assert synced == [tmp_path, tmp_path / "a", tmp_path / "a/b"]


# --- atomic_write: no needless writes -------------------------------------------------------------


def test_identical_file_is_not_rewritten(tmp_path: Path) -> None:
    target = tmp_path / "f"
    assert atomic_write(target, b"same", 0o640, uid=1000, gid=1000) is True
    before = os.stat(target)
    assert atomic_write(target, b"same", 0o640, uid=1000, gid=1000) is False
    after = os.stat(target)
    assert (after.st_ino, after.st_mtime_ns, after.st_ctime_ns) == (
        before.st_ino,
        before.st_mtime_ns,
        before.st_ctime_ns,
    )


def test_identical_without_owner_means_owned_by_the_process(tmp_path: Path) -> None:
    target = tmp_path / "f"
    atomic_write(target, b"same")
    assert atomic_write(target, b"same") is False
    os.chown(target, 1000, 1000)
    assert atomic_write(target, b"same") is True
    assert os.stat(target).st_uid == os.geteuid()


@pytest.mark.parametrize(
    ("data", "mode", "owner"),
    [
        (b"diff", 0o644, (0, 0)),  # same size, other bytes
        (b"same!", 0o644, (0, 0)),  # other size
        (b"same", 0o600, (0, 0)),
        (b"same", 0o644, (1000, 0)),
        (b"same", 0o644, (0, 1000)),
    ],
)
def test_any_difference_rewrites(tmp_path: Path, data: bytes, mode: int, owner: tuple[int, int]) -> None:
    target = tmp_path / "f"
    atomic_write(target, b"same", 0o644, uid=0, gid=0)
    assert atomic_write(target, data, mode, uid=owner[0], gid=owner[1]) is True
    st = os.stat(target)
    assert (target.read_bytes(), stat.S_IMODE(st.st_mode), (st.st_uid, st.st_gid)) == (data, mode, owner)


# --- atomic_write: symlinks and directories -------------------------------------------------------


def test_final_symlink_is_replaced_not_written_through(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.write_bytes(b"precious")
    target = tmp_path / "link"
    os.symlink(outside, target)
    assert atomic_write(target, b"new") is True
    assert outside.read_bytes() == b"precious"
    assert stat.S_ISREG(os.lstat(target).st_mode)
    assert target.read_bytes() == b"new"


def test_symlink_to_identical_content_is_still_replaced(tmp_path: Path) -> None:
    (tmp_path / "real").write_bytes(b"same")
    os.chmod(tmp_path / "real", 0o644)
    os.symlink("real", tmp_path / "link")
    assert atomic_write(tmp_path / "link", b"same") is True
    assert stat.S_ISREG(os.lstat(tmp_path / "link").st_mode)


def test_directory_target_is_refused(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    with pytest.raises(IsADirectoryError, match="refusing to replace a directory"):
        atomic_write(tmp_path / "d", b"x")
    assert (tmp_path / "d").is_dir()
    assert entries(tmp_path) == ["d"]


# --- atomic_write: durability protocol and failures -----------------------------------------------


def test_file_fsynced_before_rename_and_directory_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[str] = []
    real_fsync, real_rename = os.fsync, os.rename

    def fsync(fd: int) -> None:
        events.append("fsync-dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "fsync-file")
        real_fsync(fd)

    def rename(src: Any, dst: Any) -> None:
        events.append("rename")
        real_rename(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "rename", rename)
    atomic_write(tmp_path / "f", b"x")
    assert events == ["fsync-file", "rename", "fsync-dir"]


@pytest.mark.parametrize("failing", ["fsync", "rename", "fchown", "fchmod", "write"])
def test_failure_leaves_target_untouched_and_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    target = tmp_path / "f"
    target.write_bytes(b"old")
    os.chmod(target, 0o644)

    def fail(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EIO, f"injected {failing} failure")

    monkeypatch.setattr(os, failing, fail)
    with pytest.raises(OSError, match=f"injected {failing} failure"):
        atomic_write(target, b"new", 0o600, uid=1000, gid=1000)
    monkeypatch.undo()
    assert target.read_bytes() == b"old"
    assert mode_of(target) == 0o644
    assert entries(tmp_path) == ["f"]


def test_temp_file_is_created_private_and_exclusive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[tuple[str, int, int]] = []
    real_open = os.open

    def spy(path: Any, flags: int, mode: int = 0o777, **kw: Any) -> int:
        opened.append((os.path.basename(path), flags, mode))
        return real_open(path, flags, mode, **kw)

    monkeypatch.setattr(os, "open", spy)
    atomic_write(tmp_path / "f", b"x", 0o755)
    name, flags, mode = next(o for o in opened if o[1] & os.O_CREAT)
    assert name.startswith(".f.") and name.endswith(".tmp")
    assert mode == 0o600
    for flag in (os.O_EXCL, os.O_NOFOLLOW):
        assert flags & flag


# --- atomic_write_many: a batch with the same guarantees -------------------------------------------


def batch(tmp_path: Path, n: int, data: bytes = b"new") -> list[batchwrite.Write]:
    return [
        batchwrite.Write(tmp_path / f"d{i % 3}" / f"f{i}", data + b"%d" % i, 0o640, dir_mode=0o750)
        for i in range(n)
    ]


def test_many_writes_each_file_like_atomic_write(tmp_path: Path) -> None:
    writes = batch(tmp_path, 20)
    assert batchwrite.atomic_write_many(writes) == [True] * 20
    for w in writes:
        assert w.path.read_bytes() == w.data
        assert mode_of(w.path) == 0o640
        assert mode_of(w.path.parent) == 0o750
    assert sorted(p.name for p in tmp_path.rglob("*") if p.name.endswith(".tmp")) == []


def test_many_skips_what_is_already_exact_and_reports_per_write(tmp_path: Path) -> None:
    writes = batch(tmp_path, 6)
    batchwrite.atomic_write_many(writes)
    writes[2].path.write_bytes(b"drifted")
    inodes = [os.lstat(w.path).st_ino for w in writes]
    assert batchwrite.atomic_write_many(writes) == [False, False, True, False, False, False]
    assert [os.lstat(w.path).st_ino == ino for w, ino in zip(writes, inodes, strict=True)] == [
        True,
        True,
        False,
        True,
        True,
        True,
    ]


def test_many_renames_in_directory_order_after_every_temp_file_is_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[str] = []
    real_fsync, real_rename = os.fsync, os.rename

    def fsync(fd: int) -> None:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            events.append("fsync-file")
        real_fsync(fd)

    def rename(src: Any, dst: Any) -> None:
        events.append(f"rename {os.path.basename(dst)}")
        real_rename(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "rename", rename)
    writes = batch(tmp_path, 10)
    batchwrite.atomic_write_many(writes)
    assert events[:10] == ["fsync-file"] * 10
    renames = events[10:]
    assert sorted(renames) == sorted(f"rename f{i}" for i in range(10))
    for d in range(3):  # in order within each directory (d0 holds f0, f3, f6, f9 …)
        mine = [r for r in renames if int(r.removeprefix("rename f")) % 3 == d]
        assert mine == [f"rename f{i}" for i in range(d, 10, 3)]


def test_many_failing_temp_file_renames_nothing_and_leaves_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes = batch(tmp_path, 8)
    for w in writes:
        w.path.parent.mkdir(exist_ok=True)
        w.path.write_bytes(b"old")
    real_fsync = os.fsync
    failing = writes[5].path.name

    def fsync(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").rsplit("/", 1)[1].startswith(f".{failing}."):
            raise OSError(errno.EIO, "injected fsync failure")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(batchwrite.BatchWriteError, match="injected fsync failure") as info:
        batchwrite.atomic_write_many(writes)
    assert info.value.index == 5
    assert [w.path.read_bytes() for w in writes] == [b"old"] * 8
    assert [p.name for p in tmp_path.rglob(".*.tmp")] == []


def test_many_failing_rename_stops_its_directory_and_leaves_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes = batch(tmp_path, 6)
    real_rename = os.rename

    def rename(src: Any, dst: Any) -> None:
        if os.path.basename(dst) == "f3":
            raise OSError(errno.EIO, "injected rename failure")
        real_rename(src, dst)

    monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(batchwrite.BatchWriteError) as info:
        batchwrite.atomic_write_many(writes)
    assert info.value.index == 3
    # f3 and what follows it in its directory (d0: f0, f3) are not written; other directories are
    assert [w.path.exists() for w in writes] == [True, True, True, False, True, True]
    assert [p.name for p in tmp_path.rglob(".*.tmp")] == []


def test_many_refuses_a_directory_before_writing_anything(tmp_path: Path) -> None:
    writes = batch(tmp_path, 4)
    writes[2].path.mkdir(parents=True)
    with pytest.raises(batchwrite.BatchWriteError, match="refusing to replace a directory") as info:
        batchwrite.atomic_write_many(writes)
    assert info.value.index == 2
    assert not writes[0].path.exists()


def test_holds_bytes_compares_the_file_the_lstat_saw(tmp_path: Path) -> None:
    target = tmp_path / "f"
    target.write_bytes(b"same")
    st = os.lstat(target)
    assert atomicfs.holds_bytes(target, st, b"same") is True
    assert atomicfs.holds_bytes(target, st, b"diff") is False
    assert atomicfs.holds_bytes(target, st, b"same, longer") is False
    target.write_bytes(b"same plus more")  # grew after the lstat
    assert atomicfs.holds_bytes(target, st, b"same") is False
    target.write_bytes(b"same")
    os.link(target, tmp_path / "keep")  # keeps the inode busy: the replacement gets another one
    (tmp_path / "other").write_bytes(b"same")
    os.rename(tmp_path / "other", target)  # another file now, same bytes
    assert atomicfs.holds_bytes(target, st, b"same") is False
    os.unlink(target)
    assert atomicfs.holds_bytes(target, st, b"same") is False


def test_create_empty_never_shows_the_marker_with_another_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kill between creating the file and its chmod must not leave a 0600 marker behind."""
    marker = tmp_path / "d" / "m"
    seen: list[bool] = []
    real_fchmod = os.fchmod

    def fchmod(fd: int, mode: int) -> None:
        seen.append(os.path.lexists(marker))  # the real name is not there while the mode is wrong
        real_fchmod(fd, mode)

    monkeypatch.setattr(os, "fchmod", fchmod)
    old_umask = os.umask(0o077)
    try:
        assert atomicfs.create_empty(marker, 0o644) is True
    finally:
        os.umask(old_umask)
    assert seen == [False]
    assert mode_of(marker) == 0o644 and marker.read_bytes() == b""
    assert entries(marker.parent) == ["m"]
    assert atomicfs.create_empty(marker, 0o644) is False
    assert atomicfs.create_empty(tmp_path / "d" / "n", 0o644, link_from=marker) is True
    assert os.lstat(tmp_path / "d" / "n").st_ino == os.lstat(marker).st_ino


# --- atomic_symlink -------------------------------------------------------------------------------


def test_atomic_symlink_creates_and_is_idempotent(tmp_path: Path) -> None:
    unit = tmp_path / "etc/systemd/system/foo.service"
    assert atomic_symlink(unit, "/dev/null") is True
    assert os.readlink(unit) == "/dev/null"
    assert atomic_symlink(unit, "/dev/null") is False
    assert atomic_symlink(unit, "/elsewhere") is True
    assert os.readlink(unit) == "/elsewhere"
    assert entries(unit.parent) == ["foo.service"]


def test_atomic_symlink_replaces_a_file(tmp_path: Path) -> None:
    (tmp_path / "u").write_bytes(b"[Unit]\n")
    assert atomic_symlink(tmp_path / "u", "/dev/null") is True
    assert os.readlink(tmp_path / "u") == "/dev/null"


def test_atomic_symlink_refuses_a_directory(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    with pytest.raises(IsADirectoryError):
        atomic_symlink(tmp_path / "d", "/dev/null")


def test_atomic_symlink_failure_leaves_no_temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args: object) -> None:
        raise OSError(errno.EIO, "injected")

    monkeypatch.setattr(os, "rename", fail)
    with pytest.raises(OSError, match="injected"):
        atomic_symlink(tmp_path / "l", "/dev/null")
    monkeypatch.undo()
    assert entries(tmp_path) == []


# --- remove / remove_tree -------------------------------------------------------------------------


def test_remove_file_symlink_and_absent(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"")
    (tmp_path / "target").write_bytes(b"keep")
    os.symlink("target", tmp_path / "l")
    assert remove(tmp_path / "f") is True
    assert remove(tmp_path / "l") is True
    assert remove(tmp_path / "f") is False
    assert remove(tmp_path / "missing/dir/f") is False
    assert entries(tmp_path) == ["target"]


def test_remove_refuses_a_directory(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    with pytest.raises(IsADirectoryError):
        remove(tmp_path / "d")
    assert (tmp_path / "d").is_dir()


def test_remove_tree(tmp_path: Path) -> None:
    (tmp_path / "keep").mkdir()
    (tmp_path / "keep/file").write_bytes(b"x")
    (tmp_path / "d/sub").mkdir(parents=True)
    (tmp_path / "d/sub/f").write_bytes(b"")
    os.symlink(tmp_path / "keep", tmp_path / "d/sub/link")
    os.symlink(tmp_path / "keep", tmp_path / "dirlink")
    assert remove_tree(tmp_path / "d") is True
    assert remove_tree(tmp_path / "dirlink") is True  # the link goes, not what it points to
    assert remove_tree(tmp_path / "d") is False
    assert entries(tmp_path) == ["keep"]
    assert (tmp_path / "keep/file").read_bytes() == b"x"


# --- copy_preserving ------------------------------------------------------------------------------


def test_copy_preserves_bytes_mode_owner_and_mtime(tmp_path: Path) -> None:
    src = tmp_path / "etc/chrony.conf"
    src.parent.mkdir()
    src.write_bytes(b"server x\n")
    os.chmod(src, 0o640)
    os.chown(src, 1000, 1001)
    os.utime(src, ns=(1_000_000_000, 2_000_000_000))
    dst = tmp_path / "etc/machine-config-daemon/orig/etc/chrony.conf.mcdorig"
    copy_preserving(src, dst)
    st = os.lstat(dst)
    assert dst.read_bytes() == b"server x\n"
    assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid, st.st_mtime_ns) == (
        0o640,
        1000,
        1001,
        2_000_000_000,
    )
    assert mode_of(tmp_path / "etc/machine-config-daemon") == 0o755
    assert entries(dst.parent) == ["chrony.conf.mcdorig"]


def test_copy_replaces_destination_atomically(tmp_path: Path) -> None:
    (tmp_path / "src").write_bytes(b"orig")
    (tmp_path / "dst").write_bytes(b"modified")
    old_inode = os.stat(tmp_path / "dst").st_ino
    copy_preserving(tmp_path / "src", tmp_path / "dst")
    assert (tmp_path / "dst").read_bytes() == b"orig"
    assert os.stat(tmp_path / "dst").st_ino != old_inode


def test_copy_of_a_symlink_is_a_symlink(tmp_path: Path) -> None:
    os.symlink("../usr/share/zoneinfo/UTC", tmp_path / "localtime")
    copy_preserving(tmp_path / "localtime", tmp_path / "backup/localtime.mcdorig")
    assert os.readlink(tmp_path / "backup/localtime.mcdorig") == "../usr/share/zoneinfo/UTC"


def test_copy_refuses_special_files_and_directory_destinations(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(OSError, match="not a regular file or symlink"):
        copy_preserving(tmp_path / "fifo", tmp_path / "dst")
    (tmp_path / "src").write_bytes(b"")
    (tmp_path / "dir").mkdir()
    with pytest.raises(IsADirectoryError):
        copy_preserving(tmp_path / "src", tmp_path / "dir")
    assert sorted(entries(tmp_path)) == ["dir", "fifo", "src"]


def test_copy_failure_leaves_destination_and_no_temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "src").write_bytes(b"orig")
    (tmp_path / "dst").write_bytes(b"current")

    def fail(*args: object) -> None:
        raise OSError(errno.EIO, "injected")

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(OSError, match="injected"):
        copy_preserving(tmp_path / "src", tmp_path / "dst")
    monkeypatch.undo()
    assert (tmp_path / "dst").read_bytes() == b"current"
    assert entries(tmp_path) == ["dst", "src"]


def test_copy_keeps_extended_attributes(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.write_bytes(b"x")
    try:
        os.setxattr(src, "user.mcd-test", b"label")
    except OSError as e:
        pytest.skip(f"no user xattrs on {tmp_path}: {e}")
    copy_preserving(src, tmp_path / "dst")
    assert os.getxattr(tmp_path / "dst", "user.mcd-test") == b"label"


# --- reading and stat -----------------------------------------------------------------------------


def test_read_bytes_nofollow(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"data")
    assert read_bytes_nofollow(tmp_path / "f") == b"data"
    assert read_bytes_nofollow(tmp_path / "missing") is None
    assert read_bytes_nofollow(tmp_path / "f/below-a-file") is None


def test_read_bytes_nofollow_refuses_symlinks(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"data")
    os.symlink("f", tmp_path / "l")
    with pytest.raises(OSError, match="refusing to read through a symlink") as info:
        read_bytes_nofollow(tmp_path / "l")
    assert info.value.errno == errno.ELOOP


@pytest.mark.parametrize("kind", ["fifo", "dir"])
def test_read_bytes_nofollow_refuses_other_types_without_blocking(tmp_path: Path, kind: str) -> None:
    path = tmp_path / kind
    if kind == "fifo":
        os.mkfifo(path)  # a blocking open would hang here: no writer
    else:
        path.mkdir()
    with pytest.raises(OSError, match="not a regular file"):
        read_bytes_nofollow(path)


def test_lstat_or_none(tmp_path: Path) -> None:
    os.symlink("nowhere", tmp_path / "dangling")
    st = lstat_or_none(tmp_path / "dangling")
    assert st is not None and stat.S_ISLNK(st.st_mode)
    assert lstat_or_none(tmp_path / "missing") is None
    (tmp_path / "f").write_bytes(b"")
    assert lstat_or_none(tmp_path / "f/x") is None


def test_fsync_dir_accepts_directories_only(tmp_path: Path) -> None:
    fsync_dir(tmp_path)
    (tmp_path / "f").write_bytes(b"")
    with pytest.raises(NotADirectoryError):
        fsync_dir(tmp_path / "f")


def test_a_file_version_changes_with_every_replacement_and_is_none_when_absent(tmp_path: Path) -> None:
    path = tmp_path / "f"
    assert atomicfs.version_of(path) is None
    atomicfs.atomic_write(path, b"same size")
    first = atomicfs.version_of(path)
    assert first == (os.lstat(path).st_ino, os.lstat(path).st_mtime_ns, 9)
    assert atomicfs.version_of(path) == first
    atomicfs.atomic_write(path, b"Same size")  # a new inode, whatever the clock's resolution
    assert atomicfs.version_of(path) not in (None, first)


def test_a_status_record_is_replaced_atomically_and_durably(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`mcd status`'s state record is a host write like any other: temp file, fsync, rename,
    fsync of the directory (the brief's rule has no exception for records nothing acts on)."""
    record_dir = tmp_path / STATUS_RECORD.lstrip("/").rpartition("/")[0]
    record_dir.mkdir(parents=True)
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append("dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    root = HostRoot(tmp_path)
    record_state(root, "Working", "", "rendered-worker-2")
    record_state(root, "Done", "", "rendered-worker-2")
    assert synced == ["file", "dir", "file", "dir"]
    assert read_status(root).state == "Done"
    assert [p.name for p in record_dir.iterdir()] == ["mcd-status.json"]  # no temp file left
