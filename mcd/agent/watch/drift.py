"""The config drift monitor: inotify on the directories of every managed path.

Upstream's monitor (`pkg/daemon/config_drift_monitor.go`) re-validates the whole config on every
event and only watches paths that existed when it started. This one watches the parent
directory of every file, unit and dropin of the config, maps each event to the managed path it
concerns and checks that path alone (content, mode, owner; a mask's target; a unit's enablement
when a link in a `.wants`/`.requires` directory changes). A managed directory that does not
exist (yet, or any more) is replaced by a watch on its deepest existing ancestor until it
appears, so paths created later and directories removed and recreated are followed too.

The notifier thread never checks anything itself: it records which managed paths an event
touched and calls `on_change` (the daemon enqueues its `drift` key); the daemon's loop takes
the paths (`take()`) and checks each (`check()`), so every report goes through the one loop.
The inotify plumbing is `mcd.agent.watch.inotify`. The notifier runs under the agent's guard
(`mcd.runtime.guard`): an event it cannot handle (an OSError while following a path) restarts
it after a backoff, and a restarted monitor places its watches again and has every managed
path checked, since it may have missed events.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from mcd.agent.watch.inotify import (
    DIR_APPEARS,
    IS_DIR,
    LINK_DIR_SUFFIXES,
    MOVE_SELF,
    Q_OVERFLOW,
    SELF_GONE,
    WATCH_MASK,
    NotifierThread,
    WatchManager,
    close_manager,
)
from mcd.agent.watch.managed import Expected, Marks, Taken, child, next_below, parent, under
from mcd.config.ignition import IgnitionConfig
from mcd.host import ondisk
from mcd.host.root import HostRoot, PathEscapeError
from mcd.planner.managed_paths import UNIT_DIR

LOG = logging.getLogger(__name__)


class DriftMonitor:
    """Watches the paths of one config on one root; see the module docstring."""

    def __init__(
        self,
        root: HostRoot,
        config: IgnitionConfig,
        on_change: Callable[[], None],
        *,
        is_enabled: ondisk.IsEnabled | None = None,
        owners: ondisk.Owners | None = None,
    ) -> None:
        self.root = root
        self._on_change = on_change
        self._is_enabled = is_enabled
        self._owners = owners
        self._expect(Expected(config))
        # the paths to check and report (the `drift` key), and those the next on-disk check must
        # read: each cleared only by a commit once that work succeeded
        self._pending = Marks()
        self._unverified = Marks(everything=True)
        # the watches and their maps, changed by the notifier thread and by `retarget`
        self._watch_lock = threading.RLock()
        self._wm: Any = None
        self._notifier: NotifierThread | None = None
        self._wd_dir: dict[int, str] = {}
        self._dir_wd: dict[str, int] = {}
        # the link directories present under the unit directory have been watched since its
        # own watch was placed (later ones are added on their creation events)
        self._links_watched = False

    def _expect(self, e: Expected) -> None:
        """Take `e`'s paths as the ones watched (the index only; watches are placed apart)."""
        self.expected, self.config, self.managed = e, e.config, e.managed
        self._by_dir, self._needed, self._enablement = e.by_dir, e.needed, e.enablement

    # -- lifecycle

    @property
    def running(self) -> bool:
        return self._notifier is not None

    def start(self) -> None:
        """Add every watch, then start the notifier thread (events after this call are seen)."""
        if self._notifier is not None:
            return
        with self._watch_lock:
            self._wm = WatchManager()
        try:
            with self._watch_lock:
                self._place_all()
            self._notifier = NotifierThread(self._wm, self._on_event, "drift-monitor", self._restarted)
        except BaseException:
            # no notifier owns the inotify instance yet: close it, or each failed start leaks one
            close_manager(self._wm)
            self._wm = None
            self._wd_dir.clear()
            self._dir_wd.clear()
            self._links_watched = False
            raise
        LOG.info("drift monitor watching %d paths in %d directories", len(self.managed), len(self._dir_wd))

    def _place_all(self) -> None:
        for d in sorted(self._by_dir):
            self._place(d)
        if self._enablement:
            self._watch_link_dirs()

    def _restarted(self) -> None:
        """The notifier failed and is about to run again: events may be lost, so place every
        watch again and have every managed path checked (and read by the next on-disk check)."""
        with self._watch_lock:
            self._place_all()
        self.unverify(None)
        self._touch(self.managed)

    def retarget(self, config: IgnitionConfig) -> None:
        """Watch `config` instead, without a moment unwatched: the new paths' watches are added,
        then those no path needs any more dropped. Events seen so far stay for the paths both
        configs manage; a path declared differently, or new, counts as unverified (the update
        wrote it, maybe before its directory was watched) and is to be checked (pending) once
        the watches are placed. The work is in proportion to what
        changed when `config` was parsed like the one watched (`Expected.follow`)."""
        with self._watch_lock:
            expected, differ = self.expected.follow(config)
            self._expect(expected)
            self._pending.keep(self.managed, ())
            self._unverified.keep(self.managed, differ)
            if self._wm is None:
                return
            for d in sorted(self._by_dir.keys() - self._dir_wd.keys()):  # the others are watched
                self._place(d)
            if self._enablement and not self._links_watched:
                self._watch_link_dirs()
            for d in self._dir_wd.keys() - self._needed:
                if not (parent(d) == UNIT_DIR and d.endswith(LINK_DIR_SUFFIXES)):
                    wd = self._dir_wd.pop(d)
                    self._wd_dir.pop(wd, None)
                    self._wm.rm_watch(wd, quiet=True)
            # the paths the update wrote are checked now that their directories are watched: a
            # hand edit made after the write and before the watch (a directory the update
            # created) showed no event, and is read here; one made later shows one
            if differ:
                self._touch(differ)
        LOG.info("drift monitor watching %d paths in %d directories", len(self.managed), len(self._dir_wd))

    def stop(self) -> None:
        """Stop the thread and drop every watch and every path not yet taken."""
        notifier, self._notifier = self._notifier, None
        if notifier is not None:
            notifier.stop()
        self._pending.clear()
        self._unverified.everything()
        with self._watch_lock:
            self._wd_dir.clear()
            self._dir_wd.clear()
            self._links_watched = False
            self._wm = None

    @property
    def watched_dirs(self) -> list[str]:
        """Config paths of the directories watched now (for tests and `mcd status`)."""
        return sorted(self._dir_wd)

    # -- what the loop calls

    def flush(self) -> None:
        """Take in every event the kernel has queued: changes made before this call are known."""
        notifier = self._notifier
        if notifier is None:
            return
        try:
            notifier.flush()
        except Exception as exc:  # as when the notifier thread fails: events may be lost
            LOG.error("reading the drift monitor's events failed: %s", exc)
            self._restarted()

    def take(self) -> Taken:
        """The managed paths touched and not yet committed (`Taken.paths`: in validation order).
        They stay pending until `commit`: a check or report that fails leaves them for the
        next take, which the caller retries (no `on_change` here, so a failure cannot spin)."""
        self.flush()
        return self._pending.take()

    def ordered(self, taken: Taken) -> list[str]:
        """The paths of `taken` this monitor manages, in validation order."""
        managed = self.managed
        return sorted((p for p in taken.marks if p in managed), key=lambda p: managed[p].order)

    def commit(self, taken: Taken, done: Iterable[str] | None = None) -> None:
        """The paths `done` of `taken` (all, by default) were checked and reported: no longer
        pending, unless touched again since, which asks for another round (`on_change`)."""
        if self._pending.commit(taken, done):
            self._on_change()

    def take_unverified(self) -> Taken:
        """The managed paths not known to match (`everything`: all of them); they stay
        unverified until `verified` (the check of them passed)."""
        self.flush()
        return self._unverified.take()

    def verified(self, taken: Taken) -> None:
        """The check of `taken` (from `take_unverified`) passed: those paths match, unless an
        event touched them since."""
        self._unverified.commit(taken)

    def unverify(self, paths: Iterable[str] | None) -> None:
        """`paths` (None: all) are not known to match after all (an overflowed queue, say)."""
        if paths is None:
            self._unverified.everything()
        else:
            self._unverified.add(p for p in paths if p in self.managed)

    def check(self, path: str) -> str | None:
        """Drift of one managed path (upstream's message), or None when it matches the config."""
        m = self.managed[path]
        if m.file is not None:
            return ondisk.check_file(self.root, m.file, self._owners)
        if m.unit is not None:
            return ondisk.check_unit(self.root, m.unit, self._is_enabled)
        return ondisk.check_dropin(self.root, path, m.dropin)

    # -- watches (the notifier thread, and start() before the thread runs)

    def _host_dir(self, directory: str) -> Path | None:
        try:
            host = self.root.join(directory, follow_final=True)
        except PathEscapeError:
            return None
        return host if host.is_dir() else None

    def _add(self, directory: str, host: Path) -> bool:
        if directory in self._dir_wd:
            return True
        result = self._wm.add_watch(str(host), WATCH_MASK, quiet=True)
        wd = result.get(str(host), -1)
        if wd < 0:
            return False
        old = self._wd_dir.get(wd)
        if old is not None:
            # the same directory reached under two names (a symlink): keep the managed one
            if old in self._by_dir:
                return True
            self._dir_wd.pop(old, None)
        self._wd_dir[wd] = directory
        self._dir_wd[directory] = wd
        if directory == UNIT_DIR:  # a new watch: link directories made before it were not seen
            self._links_watched = False
        return True

    def _place(self, directory: str) -> None:
        """Watch `directory`, or, while it is missing, its deepest existing ancestor.

        After watching an ancestor the path is looked at again: a directory created between the
        first look and the watch would otherwise never be noticed.
        """
        for _ in range(64):
            target = directory
            host = self._host_dir(target)
            while host is None and target != "/":
                target = parent(target)
                host = self._host_dir(target)
            if host is None or not self._add(target, host):
                return
            if target == directory or self._host_dir(next_below(target, directory)) is None:
                return

    def _place_under(self, directory: str) -> None:
        """Place the watches of every managed directory at or below `directory` (it just appeared,
        maybe with a whole tree made before any watch could see it)."""
        prefix = directory.rstrip("/") + "/"
        for d in sorted(self._by_dir):
            if d == directory or d.startswith(prefix):
                self._place(d)

    def _watch_link_dirs(self) -> None:
        host = self._host_dir(UNIT_DIR)
        if host is None:
            return
        try:
            names = [e.name for e in host.iterdir() if e.name.endswith(LINK_DIR_SUFFIXES) and e.is_dir()]
        except OSError:
            return
        self._links_watched = all([self._add_link_dir(child(UNIT_DIR, name)) for name in names])  # each tried

    def _add_link_dir(self, directory: str) -> bool:
        host = self._host_dir(directory)
        return host is None or self._add(directory, host)  # one gone since is not to be watched

    def _on_event(self, event: Any) -> None:
        with self._watch_lock:
            self._event(event)

    def _event(self, event: Any) -> None:
        if event.mask & Q_OVERFLOW:
            LOG.warning("inotify queue overflowed: checking every managed path")
            self.unverify(None)
            self._touch(self.managed)
            return
        directory = self._wd_dir.get(event.wd)
        if directory is None:
            return
        if event.mask & SELF_GONE and not event.name:
            self._dir_gone(event.wd, directory, moved=bool(event.mask & MOVE_SELF))
            return
        name = event.name
        if not name:
            return
        path = child(directory, name)
        touched: set[str] = set()
        if path in self.managed:
            touched.add(path)
        if event.mask & IS_DIR:
            if path in self._needed:
                if event.mask & DIR_APPEARS:
                    self._place_under(path)
                touched |= under(self.managed, path)
            elif directory == UNIT_DIR and name.endswith(LINK_DIR_SUFFIXES) and event.mask & DIR_APPEARS:
                self._add_link_dir(path)
        if directory.endswith(LINK_DIR_SUFFIXES) and parent(directory) == UNIT_DIR:
            unit = self._enablement.get(name)
            if unit is not None:
                touched.add(unit)
        if touched:
            self._touch(touched)

    def _dir_gone(self, wd: int, directory: str, *, moved: bool) -> None:
        """A watched directory was deleted or moved away: watch where it will come back."""
        self._wd_dir.pop(wd, None)
        if self._dir_wd.get(directory) == wd:
            del self._dir_wd[directory]
        if moved and self._wm is not None:
            # a moved directory keeps its watch under its new name: drop it
            self._wm.rm_watch(wd, quiet=True)
        if directory in self._needed:
            self._place_under(directory)
            self._touch(under(self.managed, directory))

    def _touch(self, paths: Iterable[str]) -> None:
        touched = set(paths)
        grew = self._pending.add(touched)
        self._unverified.add(touched)
        if grew:
            self._on_change()
