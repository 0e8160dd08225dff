"""One update at a time per root: an flock on `<root>/run/mcd.lock`.

Two processes updating one root interleave their writes and rollbacks: one's rollback deletes
the other's committed files and the node records a config whose files are gone. Every update
(once-from, firstboot, the agents' transactions and startup recovery) holds the lock
exclusively from its first read of the node's records to its commit; read-only commands
(`check-disk`, `plan --root-mount`) hold it shared, so they never see a half-applied update.

Why /run: it is a tmpfs on a node, so the file is never persisted, backed up or left over
after a reboot, and the pod sees the node's own /run at /rootfs/run, so a daemon in the pod and
one on the host exclude each other. flock is released by the kernel when the holder dies, so
a killed update never blocks the next one (which then finishes it from its record).

The lock is re-entrant within the thread that holds it (once-from holds it around recovery and
the update, which take it again): a second open of the file would conflict with our own lock.
What this process holds is kept on the `HostRoot` object, not in the module: another thread of
the process using that root (the agent's certificate writer beside its update) waits for it.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import posixpath
import threading
import time
from collections.abc import Iterator

from mcd.config.paths import LOCK_FILE
from mcd.host import failpoints
from mcd.host.errors import HostError
from mcd.host.root import HostRoot, PathEscapeError

LOG = logging.getLogger(__name__)

LOCK_DIR = posixpath.dirname(LOCK_FILE)
# An OS update under the lock can take minutes; a second run waits for it rather than failing.
DEFAULT_TIMEOUT = 600.0
# how often a waiting run tries again: short against an update's length, cheap in CPU
_RETRY_SECONDS = 0.1


class RootLockError(HostError):
    """The root's lock could not be taken in time (or at all)."""


class _Holding:
    """The lock of one root as this process holds it, kept on the `HostRoot` object the holder
    uses (the agent's threads share theirs): re-entrant in the thread that holds it, and another
    thread of the process waits for it as another process would (the certificate writer for an
    update, say)."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.owner: int | None = None
        self.depth = 0
        self.shared = False


def _holding(root: HostRoot) -> _Holding:
    state = root.lock_state
    if not isinstance(state, _Holding):
        state = root.lock_state = _Holding()
    return state


def _open(root: HostRoot, *, create: bool) -> int | None:
    """The lock file's descriptor; None when a reader finds none and may not make one."""
    flags = os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        directory = root.join(LOCK_DIR, follow_final=True)
        path = root.join(LOCK_FILE)
    except PathEscapeError as exc:
        raise RootLockError(f"cannot lock {root.prefix}: {exc}") from None
    try:
        if create:
            directory.mkdir(mode=0o755, parents=True, exist_ok=True)
        return os.open(path, flags | os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        if create:
            raise RootLockError(f"cannot lock {root.prefix}: {exc.strerror}: {path}") from None
    try:
        # a reader on a read-only root, or one that has never been updated: nothing to exclude
        return os.open(path, flags | os.O_RDONLY)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise RootLockError(f"cannot lock {root.prefix}: {exc.strerror}: {path}") from None


def _holder(fd: int) -> str:
    """` (held by pid N)` from the kernel's lock table, or "" when it does not show the holder
    (another pid namespace). The file itself is never written: no pid goes stale in it, and a
    root's tree is unchanged by a run that only locks it."""
    st = os.fstat(fd)
    dev = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return ""
    # `1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF`; `->` lines are waiters, not holders
    pids = sorted(
        {fields[4] for fields in (line.split() for line in lines) if len(fields) > 5 and fields[5] == dev}
    )
    pids = [p for p in pids if p.isdigit() and p != "0"]
    return f" (held by pid {', '.join(pids)})" if pids else ""


def _take(root: HostRoot, fd: int, *, shared: bool, timeout: float) -> None:
    op = (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB
    deadline = time.monotonic() + max(timeout, 0.0)
    waiting = False
    while True:
        try:
            fcntl.flock(fd, op)
            return
        except BlockingIOError:
            pass
        left = deadline - time.monotonic()
        if left <= 0:
            raise RootLockError(
                f"another mcd is updating {root.prefix}{_holder(fd)}: gave up waiting for {LOCK_FILE} "
                f"after {timeout:g} s (--lock-timeout)"
            )
        if not waiting:
            waiting = True
            LOG.warning("waiting for the lock on %s%s", root.prefix, _holder(fd))
        # a bounded wait: flock has no timeout of its own, and a signal-based one would
        # interrupt whatever else the process is doing
        time.sleep(min(_RETRY_SECONDS, left))


@contextlib.contextmanager
def hold(root: HostRoot, *, shared: bool = False, timeout: float = DEFAULT_TIMEOUT) -> Iterator[None]:
    """Hold `root`'s lock for the block: exclusive for an update, shared for a reader.

    Waits up to `timeout` seconds for another process's lock, or another thread's of this one,
    then raises RootLockError naming the root (and the holder's pid). Inside a block of the same
    thread already holding the lock (exclusive, or shared for a shared request) it only nests.
    """
    state = _holding(root)
    me = threading.get_ident()
    deadline = time.monotonic() + max(timeout, 0.0)
    with state.cond:
        nested = state.owner == me
        if nested:
            if state.shared and not shared:
                raise RootLockError(f"cannot update {root.prefix} while reading it under a shared lock")
            state.depth += 1
        else:
            _wait_for_threads(root, state, deadline, timeout)
            state.owner, state.depth, state.shared = me, 1, shared
    if nested:
        try:
            yield
        finally:
            with state.cond:
                state.depth -= 1
        return
    try:
        with _flock(root, shared=shared, timeout=max(0.0, deadline - time.monotonic())):
            yield
    finally:
        with state.cond:
            state.owner, state.depth = None, 0
            state.cond.notify_all()


def _wait_for_threads(root: HostRoot, state: _Holding, deadline: float, timeout: float) -> None:
    """Until no other thread of this process holds the lock (`state.cond` held)."""
    waiting = False
    while state.owner is not None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise RootLockError(
                f"another thread of this mcd is updating {root.prefix}: gave up waiting for "
                f"{LOCK_FILE} after {timeout:g} s (--lock-timeout)"
            )
        if not waiting:
            waiting = True
            LOG.info("waiting for the lock on %s, held by another thread of this process", root.prefix)
        state.cond.wait(left)


@contextlib.contextmanager
def _flock(root: HostRoot, *, shared: bool, timeout: float) -> Iterator[None]:
    """The lock file's flock for the block (nothing to lock: a reader of a root without one)."""
    fd = _open(root, create=not shared)
    if fd is None:
        yield
        return
    try:
        _take(root, fd, shared=shared, timeout=timeout)
        failpoints.hit("root locked")
        yield
    finally:
        os.close(fd)  # closing the only descriptor releases the flock
