"""inotify for the watchers (the one pyinotify user): a WatchManager on the process's own libc,
a notifier thread under the agent's guard, the event masks, and `DirectoryWatch` (one directory,
for `mcd.agent.watch.configdir`). The drift monitor (`mcd.agent.watch.drift`) places its own
watches on a `WatchManager` and reads them through a `NotifierThread`.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import select
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyinotify

from mcd.runtime import guard


def _quiet_moved_watch(record: logging.LogRecord) -> bool:
    # pyinotify complains when a watched directory moves out of sight; the monitor handles that
    # itself (IN_MOVE_SELF drops the watch and waits for the path to come back)
    return "has probably changed and couldn't be updated" not in record.getMessage()


# pyinotify writes its errors to stderr through its own handler: send them through ours instead
_PYINOTIFY_LOG = logging.getLogger("pyinotify")
for _handler in list(_PYINOTIFY_LOG.handlers):
    _PYINOTIFY_LOG.removeHandler(_handler)
_PYINOTIFY_LOG.propagate = True
_PYINOTIFY_LOG.setLevel(logging.WARNING)
_PYINOTIFY_LOG.addFilter(_quiet_moved_watch)


class _ProcessLibc(pyinotify._CtypesLibcINotifyWrapper):  # type: ignore[misc]
    """pyinotify's ctypes binding on the libc this process already has loaded.

    pyinotify finds libc with `ctypes.util.find_library`, which forks `ldconfig -p` (and maybe
    gcc) for every WatchManager: tens of milliseconds per monitor start, and a command run
    outside `mcd.host.runner`. `CDLL(None)` is the running process's own symbol table, which
    holds glibc's inotify functions.
    """

    def init(self) -> bool:
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._get_errno_func = ctypes.get_errno
        libc = self._libc
        if not all(hasattr(libc, f) for f in ("inotify_init", "inotify_add_watch", "inotify_rm_watch")):
            return False
        libc.inotify_init.argtypes = []
        libc.inotify_init.restype = ctypes.c_int
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        libc.inotify_add_watch.restype = ctypes.c_int
        libc.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
        libc.inotify_rm_watch.restype = ctypes.c_int
        return True


class WatchManager(pyinotify.WatchManager):  # type: ignore[misc]
    """pyinotify 0.9.6's WatchManager (pinned) built on `_ProcessLibc` instead of `create()`."""

    def __init__(self) -> None:
        self._ignore_events = False
        self._exclude_filter = lambda path: False
        self._wmd: dict[int, Any] = {}
        wrapper = _ProcessLibc()
        if not wrapper.init():
            raise pyinotify.InotifyBindingNotFoundError()
        self._inotify_wrapper = wrapper
        self._fd = wrapper.inotify_init()
        if self._fd < 0:
            raise OSError(f"cannot initialise inotify: {wrapper.str_errno()}")


class NotifierThread:
    """Reads one WatchManager's events on a guarded thread and hands each to `proc_fun`.

    pyinotify's ThreadedNotifier calls the deprecated Event.isSet(); this loop polls the inotify
    descriptor and a pipe that stop() writes to, so stopping never waits for an event. When
    `proc_fun` raises, the guard runs `on_restart` and the loop again after a backoff.
    """

    def __init__(
        self,
        wm: Any,
        proc_fun: Callable[[Any], None],
        name: str,
        on_restart: Callable[[], None] | None = None,
    ) -> None:
        self._notifier = pyinotify.Notifier(wm, default_proc_fun=proc_fun)
        self._fd = wm.get_fd()
        self._pipe = os.pipe()
        # one reader at a time: the thread, or a caller of `flush`
        self._reading = threading.Lock()
        self._stopping = threading.Event()
        self._thread = guard.spawn(name, self._loop, self._stopping, on_restart=on_restart)

    def _loop(self) -> None:
        poll = select.poll()
        poll.register(self._fd, select.POLLIN)
        poll.register(self._pipe[0], select.POLLIN)
        while True:
            if any(fd == self._pipe[0] for fd, _ in poll.poll()):
                return
            self.flush()

    def flush(self) -> None:
        """Handle every event queued now, on the calling thread. The kernel queues an event
        within the system call that caused it: after `flush`, every change made before the
        call has been handed to `proc_fun`."""
        with self._reading:
            # only when something is queued: a read of an empty inotify queue waits for an event
            if select.select([self._fd], [], [], 0)[0]:
                self._notifier.read_events()
            self._notifier.process_events()

    def stop(self) -> None:
        """Stop the thread, then close the inotify descriptor (every watch goes with it)."""
        self._stopping.set()
        os.write(self._pipe[1], b"x")
        self._thread.join()
        self._notifier.stop()
        for fd in self._pipe:
            os.close(fd)


def close_manager(wm: Any) -> None:
    """Close a WatchManager no notifier took over (a start that failed half way)."""
    with contextlib.suppress(OSError):
        os.close(wm.get_fd())


# Every way a directory entry can change: writes in place (MODIFY while open, CLOSE_WRITE at the
# end), chmod/chown/touch (ATTRIB), creation, deletion, renames in or out, and the watched
# directory itself going away.
CHILD_EVENTS = (
    pyinotify.IN_MODIFY
    | pyinotify.IN_CLOSE_WRITE
    | pyinotify.IN_ATTRIB
    | pyinotify.IN_CREATE
    | pyinotify.IN_DELETE
    | pyinotify.IN_MOVED_FROM
    | pyinotify.IN_MOVED_TO
)
SELF_GONE = pyinotify.IN_DELETE_SELF | pyinotify.IN_MOVE_SELF | pyinotify.IN_IGNORED | pyinotify.IN_UNMOUNT
WATCH_MASK = CHILD_EVENTS | pyinotify.IN_DELETE_SELF | pyinotify.IN_MOVE_SELF | pyinotify.IN_ONLYDIR
DIR_APPEARS = pyinotify.IN_CREATE | pyinotify.IN_MOVED_TO
# what the drift monitor reads off an event
Q_OVERFLOW = pyinotify.IN_Q_OVERFLOW
IS_DIR = pyinotify.IN_ISDIR
MOVE_SELF = pyinotify.IN_MOVE_SELF
# systemctl enable/disable add and remove links in these directories under /etc/systemd/system
LINK_DIR_SUFFIXES = (".wants", ".requires", ".upholds")


class DirectoryWatch:
    """Calls `on_change` for every entry created, deleted, renamed or written in one directory.

    For `mcd.agent.watch.configdir`, which follows the kubelet's `..data` link swaps: this module
    is the one that talks to inotify.
    """

    def __init__(self, directory: Path, on_change: Callable[[], None]) -> None:
        self.directory = directory
        self._on_change = on_change
        self._notifier: NotifierThread | None = None

    def start(self) -> None:
        if self._notifier is not None:
            return
        wm = WatchManager()
        try:
            wd = wm.add_watch(str(self.directory), CHILD_EVENTS | pyinotify.IN_ONLYDIR, quiet=True)
            if wd.get(str(self.directory), -1) < 0:
                raise OSError(f"cannot watch {self.directory}")
            # a restart after a failure may have missed a change: report one
            self._notifier = NotifierThread(
                wm, lambda event: self._on_change(), "configdir-watch", self._on_change
            )
        except BaseException:
            close_manager(wm)
            raise

    def stop(self) -> None:
        notifier, self._notifier = self._notifier, None
        if notifier is not None:
            notifier.stop()
