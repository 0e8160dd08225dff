"""Crash-safe file primitives: a file on the node is always either fully old or fully new.

Every writer builds the new content in a temporary file in the target's directory and renames
it over the target: rename(2) is atomic, so a reader (or a reboot after a crash) sees the old
file or the new one, never a mix. fsync of the file before the rename makes its bytes durable;
fsync of the directory after it makes the rename itself durable. All functions take host paths
already mapped by HostRoot.join; none of them follows a final symlink (they replace it, as
rename does) and none of them replaces a directory.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

from mcd.host import dirsync, failpoints
from mcd.host.dirsync import DirSync
from mcd.host.streamdata import Data, Stream, data_size, holds_stream, pieces

# a host path as the readers take it: hot loops pass plain strings (HostRoot.join_str)
AnyPath = str | os.PathLike[str]
# what tells one version of a file from the next (inode, modification time in ns, size): every
# writer here renames a new inode over the target, so a cache keyed on it is read again after one
FileVersion = tuple[int, int, int]

_CHUNK = 1 << 20

# the one directory fsync (deferred within an update's `DirSync` block), for every writer here
fsync_dir = dirsync.fsync_dir


def lstat_or_none(path: AnyPath) -> os.stat_result | None:
    """lstat `path`, or None when it does not exist."""
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


def version_of(path: AnyPath) -> FileVersion | None:
    """The `FileVersion` of `path` (a final link not followed), or None when it does not exist."""
    st = lstat_or_none(path)
    return None if st is None else (st.st_ino, st.st_mtime_ns, st.st_size)


def read_bytes_nofollow(path: AnyPath) -> bytes | None:
    """Return the bytes of regular file `path`, None when absent; refuse symlinks and other types.

    O_NONBLOCK keeps the open from hanging on a FIFO; the type check then refuses it.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, "refusing to read through a symlink", str(path)) from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "refusing to read: not a regular file", str(path))
        chunks = []
        while chunk := os.read(fd, _CHUNK):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def holds_bytes(path: AnyPath, st: os.stat_result, data: Data) -> bool:
    """Whether regular file `path`, whose lstat is `st`, holds exactly `data` (one read when it does).

    Refuses (False) anything that is no longer that regular file by the time it is opened.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        now = os.fstat(fd)
        if (now.st_ino, now.st_dev) != (st.st_ino, st.st_dev) or now.st_size != data_size(data):
            return False
        if isinstance(data, Stream):
            return holds_stream(fd, data)
        # one byte more than expected: a file that grew since the fstat does not compare equal
        head = os.read(fd, len(data) + 1)
        if len(head) > len(data) or not data.startswith(head):
            return False
        if len(head) == len(data):
            return True
        return read_bytes_nofollow(path) == data  # a short read: compare the whole file
    finally:
        os.close(fd)


def make_dirs(path: Path, mode: int = 0o755, *, dirsync: DirSync | None = None) -> None:
    """Create `path` and its missing parents with exactly `mode`; existing directories are untouched.

    The mode is set with chmod after mkdir so the umask cannot weaken or widen it, and each new
    directory's parent is fsynced so the new entry survives a crash.
    """
    missing: list[Path] = []
    probe = path
    while lstat_or_none(probe) is None:
        missing.append(probe)
        probe = probe.parent
    for new in reversed(missing):
        try:
            os.mkdir(new, mode)
        except FileExistsError:
            # Created concurrently: fine as long as it is a directory (mkdir of the child will
            # otherwise fail with a clear ENOTDIR).
            continue
        os.chmod(new, mode)
        fsync_dir(new.parent, dirsync=dirsync)


def refuse_directory(path: Path, st: os.stat_result | None) -> None:
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, "refusing to replace a directory", str(path))


def _temp_name(path: Path, suffix: str = ".tmp") -> Path:
    return path.with_name(f".{path.name}.{secrets.token_hex(8)}{suffix}")


# the names _temp_name makes: a dot, the target's name, 16 hex digits, ".tmp"
_TEMP_NAME = re.compile(r"^\..+\.[0-9a-f]{16}\.tmp$")


def sweep_temp_files(directory: Path) -> list[Path]:
    """Remove temp files a killed writer left in `directory` (they never became visible files)."""
    try:
        names = os.listdir(directory)
    except (FileNotFoundError, NotADirectoryError):
        return []
    removed = []
    for name in names:
        if _TEMP_NAME.match(name):
            path = directory / name
            st = lstat_or_none(path)
            if st is not None and not stat.S_ISDIR(st.st_mode):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
                removed.append(path)
    if removed:
        fsync_dir(directory)
    return removed


def _write_all(fd: int, data: Data) -> None:
    total = 0
    for piece in pieces(data):
        view = memoryview(piece)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        total += len(piece)
    if total != data_size(data):
        # a stream that does not produce what was measured must not become the file
        raise ValueError(f"contents produced {total} bytes, expected {data_size(data)}")


def _effective_owner(uid: int, gid: int) -> tuple[int, int]:
    # -1 means "do not chown": a fresh file then belongs to the process, so that is what an
    # existing file must match to count as identical.
    return (os.geteuid() if uid == -1 else uid, os.getegid() if gid == -1 else gid)


def is_identical(path: Path, st: os.stat_result | None, data: Data, *, mode: int, uid: int, gid: int) -> bool:
    if st is None or not stat.S_ISREG(st.st_mode):
        return False
    if st.st_size != data_size(data) or stat.S_IMODE(st.st_mode) != mode:
        return False
    if (st.st_uid, st.st_gid) != _effective_owner(uid, gid):
        return False
    return holds_bytes(path, st, data)


def is_exactly(path: Path, data: Data, mode: int, uid: int = -1, gid: int = -1) -> bool:
    """Whether `path` is a regular file (not a link) holding `data` with exactly `mode` and owner."""
    return is_identical(path, lstat_or_none(path), data, mode=mode, uid=uid, gid=gid)


def is_link_to(path: Path, target: str) -> bool:
    """Whether `path` is a symlink whose target is exactly `target`."""
    st = lstat_or_none(path)
    return st is not None and stat.S_ISLNK(st.st_mode) and os.readlink(path) == target


def durable_temp(path: Path, fill: Callable[[int], None]) -> Path:
    """A temp file beside `path`, written by `fill` and fsynced; removed again on any error.

    It starts with mode 0o600 so nobody can read a half-written secret.
    """
    tmp, fd = durable_temp_open(path, fill)
    os.close(fd)
    return tmp


def durable_temp_open(path: Path, fill: Callable[[int], None], *, suffix: str = ".tmp") -> tuple[Path, int]:
    """`durable_temp`, left open (the caller closes the descriptor). Another `suffix` keeps the
    file out of `sweep_temp_files` (a file made ahead of the update that renames it)."""
    tmp = _temp_name(path, suffix)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fill(fd)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return tmp, fd


def _replace_via_temp(
    path: Path, fill: Callable[[int], None], *, sync_now: bool = False, dirsync: DirSync | None = None
) -> None:
    """Let `fill` write a durable temp file beside `path` and rename it over `path`.

    On any error the temp file is removed and `path` is left as it was.
    """
    tmp = durable_temp(path, fill)
    try:
        failpoints.hit("temp file written, not renamed")
        os.rename(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    failpoints.hit("renamed, directory not synced")
    fsync_dir(path.parent, now=sync_now, dirsync=dirsync)


def owned_fill(data: Data, mode: int, uid: int, gid: int) -> Callable[[int], None]:
    def fill(fd: int) -> None:
        _write_all(fd, data)
        if uid != -1 or gid != -1:
            os.fchown(fd, uid, gid)
        # After fchown, which clears setuid/setgid bits; fchmod is not subject to the umask.
        os.fchmod(fd, mode)

    return fill


def atomic_write(
    path: Path,
    data: Data,
    mode: int = 0o644,
    *,
    uid: int = -1,
    gid: int = -1,
    dir_mode: int = 0o755,
    dirsync: DirSync | None = None,
) -> bool:
    """Atomically make `path` a regular file with `data` (bytes, or a `Stream` written piece by
    piece), exactly `mode`, owned by uid:gid.

    Returns False, writing nothing, when the file already is exactly that (no inotify event, no
    mtime change); True after a write. uid/gid -1 leave ownership to the process. Missing parent
    directories are created with `dir_mode`. On any error the temp file is removed and the target
    is left as it was.
    """
    st = lstat_or_none(path)
    refuse_directory(path, st)
    if is_identical(path, st, data, mode=mode, uid=uid, gid=gid):
        return False
    make_dirs(path.parent, dir_mode, dirsync=dirsync)
    _replace_via_temp(path, owned_fill(data, mode, uid, gid), dirsync=dirsync)
    return True


def create_empty(
    path: Path,
    mode: int = 0o644,
    *,
    dir_mode: int = 0o755,
    link_from: Path | None = None,
    dirsync: DirSync | None = None,
) -> bool:
    """Make `path` an empty regular file of exactly `mode` (a marker); False when it already is.

    Creating an empty file is atomic by itself (it exists or not), so no temp file is needed.
    With `link_from` (an empty file of that mode) the marker is a hard link to it: one link(2)
    instead of open, fchmod and close, which matters when thousands are made at once.
    """
    st = lstat_or_none(path)
    refuse_directory(path, st)
    if st is not None and stat.S_ISREG(st.st_mode) and st.st_size == 0:
        if stat.S_IMODE(st.st_mode) != mode:  # a creation cut short before its chmod
            os.chmod(path, mode)
        return False
    if st is not None:
        raise FileExistsError(errno.EEXIST, "refusing to replace a non-empty file with a marker", str(path))
    make_dirs(path.parent, dir_mode, dirsync=dirsync)
    failpoints.hit("before creating an empty file")
    if link_from is not None:
        try:
            os.link(link_from, path, follow_symlinks=False)
        except OSError as exc:
            if exc.errno not in (errno.EMLINK, errno.EXDEV, errno.EPERM, errno.ENOENT):
                raise
        else:
            fsync_dir(path.parent, dirsync=dirsync)
            return True
    # made under a temp name and renamed: the marker never shows with the temp file's 0o600
    tmp = durable_temp(path, lambda fd: os.fchmod(fd, mode))
    try:
        os.rename(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent, dirsync=dirsync)
    return True


def atomic_symlink(path: Path, target: str, dir_mode: int = 0o755, *, dirsync: DirSync | None = None) -> bool:
    """Atomically make `path` a symlink to `target` (replacing a file or link, never a directory).

    Returns False when `path` already is exactly that symlink.
    """
    st = lstat_or_none(path)
    refuse_directory(path, st)
    if st is not None and stat.S_ISLNK(st.st_mode) and os.readlink(path) == target:
        return False
    make_dirs(path.parent, dir_mode, dirsync=dirsync)
    tmp = _temp_name(path)
    os.symlink(target, tmp)
    failpoints.hit("temp symlink made, not renamed")
    try:
        os.rename(tmp, path)
        fsync_dir(path.parent, dirsync=dirsync)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return True


def remove(path: Path, *, dirsync: DirSync | None = None) -> bool:
    """Remove a file or symlink (not a directory); False when it was already absent."""
    st = lstat_or_none(path)
    if st is None:
        return False
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, "refusing to remove a directory as a file", str(path))
    failpoints.hit("before unlink")
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    fsync_dir(path.parent, dirsync=dirsync)
    return True


def remove_tree(path: Path, *, dirsync: DirSync | None = None) -> bool:
    """Remove `path` whatever it is (like Go's os.RemoveAll); a symlink is removed, not followed.

    Returns False when it was already absent.
    """
    st = lstat_or_none(path)
    if st is None:
        return False
    failpoints.hit("before remove tree")
    if stat.S_ISDIR(st.st_mode):
        # rmtree uses fd-relative operations on Linux, so it never follows symlinks inside the tree.
        shutil.rmtree(path)
    else:
        os.unlink(path)
    fsync_dir(path.parent, dirsync=dirsync)
    return True


def copy_preserving(src: Path, dst: Path, dir_mode: int = 0o755, *, dirsync: DirSync | None = None) -> None:
    """Atomically copy `src` to `dst` like `cp -a`: bytes, mode, owner, times and (best effort) xattrs.

    Used for `.mcdorig` backups and their restore. A symlink is copied as a symlink; other
    non-regular files are refused. `dst` is replaced by rename, so it is never half-copied.
    """
    st = os.lstat(src)
    refuse_directory(dst, lstat_or_none(dst))
    if stat.S_ISLNK(st.st_mode):
        _copy_symlink(src, dst, st, dir_mode, dirsync)
        return
    if not stat.S_ISREG(st.st_mode):
        raise OSError(errno.EINVAL, "refusing to copy: not a regular file or symlink", str(src))
    make_dirs(dst.parent, dir_mode, dirsync=dirsync)
    src_fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)

    def fill(fd: int) -> None:
        while chunk := os.read(src_fd, _CHUNK):
            _write_all(fd, chunk)
        _copy_xattrs(src_fd, fd)
        os.fchown(fd, st.st_uid, st.st_gid)
        os.fchmod(fd, stat.S_IMODE(st.st_mode))
        os.utime(fd, ns=(st.st_atime_ns, st.st_mtime_ns))

    try:
        # a backup must be durable before the original it saves is replaced: no deferral
        _replace_via_temp(dst, fill, sync_now=True)
    finally:
        os.close(src_fd)


def _copy_symlink(src: Path, dst: Path, st: os.stat_result, dir_mode: int, dirsync: DirSync | None) -> None:
    atomic_symlink(dst, os.readlink(src), dir_mode, dirsync=dirsync)
    os.chown(dst, st.st_uid, st.st_gid, follow_symlinks=False)
    os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)


def _copy_xattrs(src_fd: int, dst_fd: int) -> None:
    # Best effort, as `cp -a` does: the SELinux label in particular may not be settable here.
    try:
        names = os.listxattr(src_fd)
    except OSError:
        return
    for name in names:
        with contextlib.suppress(OSError):
            os.setxattr(dst_fd, name, os.getxattr(src_fd, name))
