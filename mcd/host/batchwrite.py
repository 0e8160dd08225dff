"""Writing many files at once, each still atomic: the batches of a config's files and unit files.

The temp files of a batch are filled and fsynced by a pool of threads (the filesystem's
journal commits concurrent fsyncs together), then renamed over their targets in order within
each directory, directories side by side: every target is fully old or fully new at any instant
(`atomicfs` has the single-file primitives and the guarantees).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mcd.host import atomicfs, dirsync, failpoints
from mcd.host.streamdata import Data


@dataclass(frozen=True, slots=True)
class Write:
    """One `atomic_write` of a batch (same meaning for every field)."""

    path: Path
    data: Data  # bytes, or a stream of them for a large file
    mode: int = 0o644
    uid: int = -1
    gid: int = -1
    dir_mode: int = 0o755


class BatchWriteError(OSError):
    """Write number `index` of a batch failed; `cause` is the error. Nothing after it was renamed."""

    def __init__(self, index: int, cause: OSError) -> None:
        super().__init__(cause.errno, cause.strerror or str(cause), cause.filename)
        self.index = index
        self.cause = cause

    def __str__(self) -> str:
        return str(self.cause)


def _fill_temp(w: Write) -> Path:
    return atomicfs.durable_temp(w.path, atomicfs.owned_fill(w.data, w.mode, w.uid, w.gid))


def atomic_write_many(writes: Sequence[Write], *, sync: dirsync.DirSync | None = None) -> list[bool]:
    """`atomic_write` for each of `writes`, in order; element i is True when write i changed its file.

    The same guarantees, one file at a time: each target is always fully old or fully new. The
    temp files of all changed targets are written and fsynced concurrently first (a pool of
    threads; fsync waits on the disk, not the interpreter), then renamed over their targets, in
    order within each directory and directories side by side; each rename is followed by its
    directory's sync, as in `atomic_write` (deferred within `sync`'s block). A failure before
    the renames leaves every target untouched; a failed rename leaves that write and the later
    ones of its directory undone (other directories may have finished). Either way it raises
    BatchWriteError naming the failed write, and no temp file stays behind.
    """
    changed = [False] * len(writes)
    todo: list[int] = []
    for i, w in enumerate(writes):
        try:
            st = atomicfs.lstat_or_none(w.path)
            atomicfs.refuse_directory(w.path, st)
            if not atomicfs.is_identical(w.path, st, w.data, mode=w.mode, uid=w.uid, gid=w.gid):
                todo.append(i)
        except OSError as exc:
            raise BatchWriteError(i, exc) from exc
    made: set[Path] = set()
    for i in todo:
        parent = writes[i].path.parent
        if parent not in made:
            try:
                atomicfs.make_dirs(parent, writes[i].dir_mode, dirsync=sync)
            except OSError as exc:
                raise BatchWriteError(i, exc) from exc
            made.add(parent)
    temps = _fill_temps(writes, todo)
    try:
        _rename_all(writes, todo, temps, changed, sync)
    finally:
        for tmp in temps.values():
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
    return changed


def _rename_all(
    writes: Sequence[Write],
    todo: Sequence[int],
    temps: dict[int, Path],
    changed: list[bool],
    sync: dirsync.DirSync | None,
) -> None:
    """Rename each temp file over its target: in order within a directory, directories side by side.

    Renames in one directory serialise on its lock anyway; different directories proceed at
    once. A failure stops that directory's renames; the first failure (lowest index) is raised
    once every started directory has finished.
    """
    by_dir: dict[Path, list[int]] = {}
    for i in todo:
        by_dir.setdefault(writes[i].path.parent, []).append(i)

    def rename_dir(indexes: list[int]) -> None:
        for i in indexes:
            failpoints.hit("temp file written, not renamed")
            path = writes[i].path
            try:
                os.rename(temps[i], path)
            except OSError as exc:
                raise BatchWriteError(i, exc) from exc
            del temps[i]
            failpoints.hit("renamed, directory not synced")
            atomicfs.fsync_dir(path.parent, dirsync=sync)
            changed[i] = True

    groups = list(by_dir.values())
    if len(groups) <= 1:
        for group in groups:
            rename_dir(group)
        return
    failures: list[BatchWriteError] = []
    other: BaseException | None = None
    pool = dirsync.pool()
    for future in [pool.submit(rename_dir, group) for group in groups]:
        try:
            future.result()
        except BatchWriteError as exc:
            failures.append(exc)
        except BaseException as exc:  # every directory must have finished first
            other = other or exc
    if other is not None:
        raise other
    if failures:
        raise min(failures, key=lambda e: e.index)


def _fill_temps(writes: Sequence[Write], todo: Sequence[int]) -> dict[int, Path]:
    """The durable temp file of each write in `todo`: all of them, or none and the first failure raised."""
    temps: dict[int, Path] = {}
    failure: BaseException | None = None
    if len(todo) == 1:
        try:
            temps[todo[0]] = _fill_temp(writes[todo[0]])
        except OSError as exc:
            failure = BatchWriteError(todo[0], exc)
    elif todo:
        pool = dirsync.pool()
        futures = [(i, pool.submit(_fill_temp, writes[i])) for i in todo]
        for i, future in futures:
            try:
                temps[i] = future.result()
            except OSError as exc:
                failure = failure or BatchWriteError(i, exc)
            except BaseException as exc:  # every temp file must be accounted for first
                failure = failure or exc
    if failure is not None:
        for tmp in temps.values():
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        raise failure
    return temps
