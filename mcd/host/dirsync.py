"""Directory fsyncs, now or deferred, and the writer threads that run them.

A rename or an unlink is durable once its directory is fsynced. An update makes thousands of
them in a few hundred directories, so it defers those fsyncs to the end of its steps and syncs
each touched directory once (`DirSync.deferred`). The deferral is an object the update
transaction owns (through its `Host`) and hands to the writers it runs: a writer that was not
given it (the certificate writer's thread, say) syncs at once, whatever update runs meanwhile.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

# Temp files filled and fsynced at once: the filesystem's journal commits concurrent fsyncs
# together (ext4 and XFS both do), so a batch costs a few journal commits instead of one per file.
BATCH_WRITERS = 8


class _Pool:
    """One pool of writer threads for the process, started on first use and kept.

    Starting threads per batch costs more than a small batch's writes. A forked child has none
    of its parent's threads, so it starts its own pool. (Only threads live here: no state of any
    write or update.)
    """

    executor: ThreadPoolExecutor | None = None
    pid = 0


def pool() -> ThreadPoolExecutor:
    """The process's writer threads (batches and the deferred directory syncs share them)."""
    if _Pool.executor is None or _Pool.pid != os.getpid():
        _Pool.executor = ThreadPoolExecutor(BATCH_WRITERS, thread_name_prefix="mcd-write")
        _Pool.pid = os.getpid()
    return _Pool.executor


class DirSync:
    """The directories whose fsync waits for the end of one `deferred()` block. Outside a block
    (and for a writer given none) every fsync is made at once. Thread-safe: a batch renames in
    several directories side by side."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._dirs: set[Path] | None = None

    def defer(self, path: Path) -> bool:
        """Keep `path` for the end of the block (True), or False outside one: sync it now."""
        with self._lock:
            if self._dirs is None:
                return False
            self._dirs.add(path)
            return True

    @contextlib.contextmanager
    def deferred(self) -> Iterator[None]:
        """Within the block, fsync each touched directory once, at the end, instead of after each change.

        File contents are still fsynced before every rename, and a killed process loses nothing
        (the page cache survives it); only the durability of directory entries against a power
        cut is delayed to the end of the block, where every touched directory is synced. Writes
        whose order must survive a power cut (the backup of an original before it is replaced)
        sync at once.
        """
        with self._lock:
            nested = self._dirs is not None
            if not nested:
                self._dirs = set()
        if nested:  # the outer block syncs
            yield
            return
        try:
            yield
        finally:
            with self._lock:
                pending, self._dirs = self._dirs or set(), None
            _sync_dirs(sorted(pending))


def fsync_dir(path: Path, *, now: bool = False, dirsync: DirSync | None = None) -> None:
    """fsync a directory, making the creations, renames and unlinks in it durable.

    Inside a `dirsync.deferred()` block the fsync waits for the end of the block (unless `now`).
    """
    if dirsync is not None and not now and dirsync.defer(path):
        return
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_dir_if_present(directory: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        fsync_dir(directory, now=True)


def _sync_dirs(directories: list[Path]) -> None:
    """fsync each directory; many at once through the writer pool (their journal commits group)."""
    if len(directories) <= 1:
        for directory in directories:
            _sync_dir_if_present(directory)
        return
    # list() waits for all and re-raises the first failure
    list(pool().map(_sync_dir_if_present, directories))
