"""What a config asks the drift monitor to watch: its managed paths, by directory. Pure: no I/O.

Kept apart from `mcd.agent.watch.drift` (the one inotify user) so the monitor can swap one
config's expectations for another's in place.
"""

from __future__ import annotations

import copy
import operator
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from mcd.config.ignition import File, IgnitionConfig, Unit
from mcd.planner.managed_paths import Managed, dropin_path, unit_path


def managed_paths(config: IgnitionConfig) -> dict[str, Managed]:
    """Every path `config` manages, keyed by config path, in upstream's validation order."""
    out: dict[str, Managed] = {}

    def add(m: Managed) -> None:
        out.pop(m.path, None)  # a path declared twice: the last declaration wins, as when writing
        out[m.path] = m

    for f in config.files:
        add(Managed(f.path, len(out), f))
    for u in config.units:
        for d in u.dropins:
            add(Managed(dropin_path(u.name, d.name), len(out), None, None, d.contents or ""))
        add(Managed(unit_path(u.name), len(out), None, u))
    return out


def same_declaration(old: Managed | None, new: Managed) -> bool:
    """Whether a path is declared alike in two configs (its position aside)."""
    return old is not None and (old.file, old.unit, old.dropin) == (new.file, new.unit, new.dropin)


def parent(path: str) -> str:
    return path.rpartition("/")[0] or "/"


def child(directory: str, name: str) -> str:
    return f"{directory.rstrip('/')}/{name}"


def ancestors(path: str) -> Iterable[str]:
    """`path`'s proper ancestors, nearest first, ending with `/`."""
    while path != "/":
        path = parent(path)
        yield path


def next_below(ancestor: str, directory: str) -> str:
    """The child of `ancestor` on the way down to `directory`."""
    rest = directory[len(ancestor.rstrip("/")) + 1 :]
    return child(ancestor, rest.split("/", 1)[0])


def under(managed: Iterable[str], directory: str) -> set[str]:
    """The managed paths at or below `directory`."""
    prefix = directory.rstrip("/") + "/"
    return {p for p in managed if p.startswith(prefix)}


class Expected:
    """One config's paths as the monitor indexes them."""

    def __init__(self, config: IgnitionConfig) -> None:
        self.config = config
        self.managed = managed_paths(config)
        self.by_dir: dict[str, set[str]] = {}
        for path in self.managed:
            self.by_dir.setdefault(path.rpartition("/")[0] or "/", set()).add(path)  # `parent`, inline
        self.needed = _needed(self.by_dir)
        # units whose enablement is declared, by name: their links are watched too
        self.enablement = _enablement(config)
        # no path declared twice: then the paths are the declarations, one for one
        self.distinct = len(self.managed) == _declarations(config)

    def follow(self, config: IgnitionConfig) -> tuple[Expected, list[str]]:
        """`config`'s expectations, and its paths declared differently from these or new.

        A config parsed like this one (`mcd.config.reuse`) holds the very objects of every file
        and unit declared alike: when its files and units name the same paths in the same
        places, only the items that are other objects are looked at (the rest of the index is
        this one's, shared). When paths come, go or move, the entries of the items that are the
        same objects are taken over, and the directories change only where paths came or went.
        A config declaring a path twice, or one whose items are mostly other objects (not parsed
        like this one), is indexed from scratch and compared path by path.
        """
        if not self.distinct or _mostly_other_objects(self.config, config):
            # a path declared twice, or a config not parsed like this one: from scratch is cheaper
            return self._afresh(config)
        changed = _changed_items(self.config, config)
        if changed is None:
            return self._reindexed(config) or self._afresh(config)
        files, units = changed
        new = copy.copy(self)
        new.config = config
        new.managed = dict(self.managed)
        differ: list[str] = []

        def put(path: str, file: File | None, unit: Unit | None, dropin: str | None) -> None:
            m = Managed(path, self.managed[path].order, file, unit, dropin)
            new.managed[path] = m
            if not same_declaration(self.managed[path], m):
                differ.append(path)

        for f in files:
            put(f.path, f, None, None)
        if units:
            new.enablement = dict(self.enablement)
            for u in units:
                for d in u.dropins:
                    put(dropin_path(u.name, d.name), None, None, d.contents or "")
                put(unit_path(u.name), None, u, None)
                if _has_enablement(u):
                    new.enablement[u.name] = unit_path(u.name)
                else:
                    new.enablement.pop(u.name, None)
        return new, differ

    def _afresh(self, config: IgnitionConfig) -> tuple[Expected, list[str]]:
        """`follow` from scratch, comparing path by path."""
        fresh = Expected(config)
        old = self.managed
        return fresh, [p for p, m in fresh.managed.items() if not same_declaration(old.get(p), m)]

    def _reindexed(self, config: IgnitionConfig) -> tuple[Expected, list[str]] | None:
        """`follow` for a config whose paths differ from these (None: it declares one twice)."""
        old = self.managed
        managed: dict[str, Managed] = {}
        differ: list[str] = []

        def put(path: str, file: File | None, unit: Unit | None, dropin: str | None) -> None:
            held = old.get(path)
            order = len(managed)
            if (
                held is None
                or held.order != order
                or held.file is not file
                or held.unit is not unit
                or held.dropin != dropin
            ):
                m = Managed(path, order, file, unit, dropin)
                if not same_declaration(held, m):
                    differ.append(path)
                held = m
            managed[path] = held

        for f in config.files:  # most of a config: `put`, inline
            held = old.get(f.path)
            if held is None or held.order != len(managed) or held.file is not f:
                m = Managed(f.path, len(managed), f)
                if not same_declaration(held, m):
                    differ.append(f.path)
                held = m
            managed[f.path] = held
        for u in config.units:
            for d in u.dropins:
                put(dropin_path(u.name, d.name), None, None, d.contents or "")
            put(unit_path(u.name), None, u, None)
        if len(managed) != _declarations(config):
            return None
        new = copy.copy(self)
        new.config, new.managed = config, managed
        if managed.keys() != old.keys():
            gone, came = old.keys() - managed.keys(), managed.keys() - old.keys()
            new.by_dir = dict(self.by_dir)
            for directory in {parent(p) for p in gone | came}:
                paths = new.by_dir.get(directory, set()) - gone
                paths.update(p for p in came if parent(p) == directory)
                if paths:
                    new.by_dir[directory] = paths
                else:
                    del new.by_dir[directory]
            if new.by_dir.keys() != self.by_dir.keys():
                new.needed = _needed(new.by_dir)
        if len(config.units) != len(self.config.units) or any(
            a is not b for a, b in zip(config.units, self.config.units, strict=True)
        ):
            new.enablement = _enablement(config)
        return new, differ


def _needed(by_dir: Mapping[str, object]) -> set[str]:
    """The directories on the way to a managed one (a missing one is waited for from its
    parent): those of `by_dir` and their ancestors."""
    walked: set[str] = set()
    for d in by_dir:
        for up in ancestors(d):
            # walked up from before: so were its ancestors (a config has hundreds of
            # directories below a few dozen)
            if up in walked:
                break
            walked.add(up)
    return walked.union(by_dir)


def _enablement(config: IgnitionConfig) -> dict[str, str]:
    return {u.name: unit_path(u.name) for u in config.units if _has_enablement(u)}


def _declarations(config: IgnitionConfig) -> int:
    return len(config.files) + sum(len(u.dropins) + 1 for u in config.units)


def _has_enablement(u: Unit) -> bool:
    return u.enabled is not None and bool(u.contents) and not u.mask


def _mostly_other_objects(old: IgnitionConfig, new: IgnitionConfig) -> bool:
    """Whether most of `new`'s files and units are not the objects `old` has in their places
    (as many of each as `old`: else items came or went, and moved the rest out of place)."""
    if len(old.files) != len(new.files) or len(old.units) != len(new.units):
        return False
    same = sum(map(operator.is_, old.files, new.files)) + sum(map(operator.is_, old.units, new.units))
    return 2 * same < len(new.files) + len(new.units)


def _changed_items(old: IgnitionConfig, new: IgnitionConfig) -> tuple[list[File], list[Unit]] | None:
    """The files and units of `new` that are not the objects `old` has in their places, when
    every one of them names the paths its counterpart names (None when one does not, or the
    lists differ in length: the paths are not the same)."""
    if len(old.files) != len(new.files) or len(old.units) != len(new.units):
        return None
    files = [(a, b) for a, b in zip(old.files, new.files, strict=True) if a is not b]
    units = [(a, b) for a, b in zip(old.units, new.units, strict=True) if a is not b]
    if any(a.path != b.path for a, b in files):
        return None
    if any(a.name != b.name or [d.name for d in a.dropins] != [d.name for d in b.dropins] for a, b in units):
        return None
    return [b for _, b in files], [b for _, b in units]


@dataclass(frozen=True)
class Taken:
    """What a consumer took from `Marks`: the paths marked then, each with its mark (`every`:
    the mark of "every path", when that was set), to be committed once the work succeeded."""

    marks: Mapping[str, int]
    every: int | None = None

    @property
    def everything(self) -> bool:
        return self.every is not None


class Marks:
    """Paths marked by events and taken by the loop, cleared only by a `commit` once the work
    that consumed them succeeded ("take only on success"): a failed check or report leaves them
    marked, and a path marked again after the take stays marked for the next one. "Every path"
    is a mark too (a first check, an overflowed queue, a lost notifier). Thread-safe."""

    def __init__(self, *, everything: bool = False) -> None:
        self._lock = threading.Lock()
        self._marks: dict[str, int] = {}
        self._tick = 0
        self._every: int | None = 0 if everything else None

    def add(self, paths: Iterable[str]) -> bool:
        """Mark `paths`; True when one of them was not marked before."""
        with self._lock:
            self._tick += 1
            tick, marks = self._tick, self._marks
            before = len(marks)
            for p in paths:
                marks[p] = tick
            return len(marks) > before

    def everything(self) -> None:
        with self._lock:
            self._tick += 1
            self._every = self._tick

    def take(self) -> Taken:
        """The paths marked now (they stay marked until `commit`)."""
        with self._lock:
            return Taken(dict(self._marks), self._every)

    def commit(self, taken: Taken, done: Iterable[str] | None = None) -> bool:
        """The work on `taken` (on the paths `done` of it, when given) succeeded: clear the
        marks it took that nothing marked again since. True when something was marked after
        the take (a new path, or one of `taken` again): more work is due."""
        with self._lock:
            marks = self._marks
            if done is None:
                if taken.every is not None and taken.every == self._every:
                    self._every = None
                done = taken.marks
            for p in done:
                if p in taken.marks and marks.get(p) == taken.marks[p]:
                    del marks[p]
            if self._every is not None and self._every != taken.every:
                return True
            return any(taken.marks.get(p) != tick for p, tick in marks.items())

    def keep(self, managed: Mapping[str, Managed], differ: Iterable[str]) -> None:
        """Another config is watched: the marks of its paths stay, those of paths it does not
        manage go, and `differ` (new, or declared differently: the update wrote them) is marked."""
        with self._lock:
            self._tick += 1
            self._marks = {p: t for p, t in self._marks.items() if p in managed}
            for p in differ:
                self._marks[p] = self._tick

    def clear(self) -> None:
        with self._lock:
            self._marks.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._marks)
