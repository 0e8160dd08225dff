"""Enablement questions about a root's units, answered from its files where they leave no doubt.

`systemctl --root` decides `is-enabled` and `disable` from symlinks and [Install] sections
alone, and each question costs a process. A unit pass asks two of them for many units:

* is the unit `enabled` now? `is-enabled` says so when a link named after the unit sits in a
  `.wants`/`.requires`/`.upholds` directory of /etc/systemd/system (and the unit's file is a
  plain one there); it cannot say so when no link anywhere on the search path is named after
  the unit or leads to it;
* would `disable` change anything? It removes, anywhere under /etc/systemd/system, the links
  named after the unit or leading to it, and does the same for every unit named in `Also=` of
  the unit's [Install] section (systemd reads that section from the unit file and from its
  `<name>.d/*.conf` dropins in every search-path directory).

Anything the files do not settle (unusual names, templates, symlinked directories, links that
cannot be followed the way systemd follows them, `Also=`, shadowing unit files) is left to
systemctl, so the answers match systemctl's in every case.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from mcd.host import atomicfs
from mcd.host.root import MAX_SYMLINKS, HostRoot

# The system instance's unit search path under a root, highest priority first (systemd 252).
SEARCH_PATH = (
    "/etc/systemd/system.control",
    "/run/systemd/system.control",
    "/run/systemd/transient",
    "/run/systemd/generator.early",
    "/etc/systemd/system",
    "/etc/systemd/system.attached",
    "/run/systemd/system",
    "/run/systemd/system.attached",
    "/run/systemd/generator",
    "/usr/local/lib/systemd/system",
    "/lib/systemd/system",
    "/usr/lib/systemd/system",
    "/run/systemd/generator.late",
)
CONFIG_DIR = "/etc/systemd/system"
# a unit file in one of these wins over /etc/systemd/system's
_ABOVE_CONFIG = SEARCH_PATH[: SEARCH_PATH.index(CONFIG_DIR)]
_DEPENDENCY_DIR_SUFFIXES = (".wants", ".requires", ".upholds")

# A plain (non-template, non-instance) unit name as systemd accepts it; anything else is left
# to systemctl, which also reports invalid names.
_PLAIN_UNIT_NAME = re.compile(
    r"[A-Za-z0-9:_.\\-]+\."
    r"(service|socket|target|device|mount|automount|swap|timer|path|slice|scope)"
)
_UNIT_NAME_MAX = 255

# systemd cannot parse a line of 1 MiB or more; a file that large is left to systemctl.
_PARSE_LIMIT = 1 << 20
# what in an [Install] source could widen a disable beyond the unit itself
_WIDENING = (b"Also", b".include")


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


def plain_unit_name(name: str) -> bool:
    """True for a valid unit name without `@` (no template or instance matching applies)."""
    return len(name) <= _UNIT_NAME_MAX and _PLAIN_UNIT_NAME.fullmatch(name) is not None


@dataclass(frozen=True)
class LinkScan:
    """What the symlinks found in some unit directories could stand for.

    `mentioned`: each link's own name, its name with the instance removed, and the base name of
    every target along its chain. `opaque`: some link or directory could not be judged (then
    nothing may be concluded from `mentioned`). `canonical`: units with a link named after them
    in a dependency directory of /etc/systemd/system pointing exactly at their file there.
    """

    mentioned: frozenset[str]
    opaque: bool
    canonical: frozenset[str] = frozenset()


class UnitLinks:
    """Reads one root's unit directories; remembers directory checks for its own lifetime only."""

    def __init__(self, root: HostRoot) -> None:
        self._prefix = str(root.prefix).rstrip("/")
        # root path -> whether it is a real directory (None: it does not exist)
        self._dirs: dict[str, bool | None] = {}
        # root path -> whether it is a symlink, for every entry a scan has listed
        self._is_link: dict[str, bool] = {}

    def _host(self, path: str) -> str:
        # Literal: callers only use this below directories _plain_chain has vetted.
        return self._prefix + path

    def _plain_chain(self, path: str) -> bool:
        """True when no existing component of root path `path` is a symlink or a non-directory.

        Then the literal host path is the path systemd resolves, and a missing component ends
        the walk: systemd joins the rest literally too.
        """
        current = ""
        for part in path.split("/"):
            if not part:
                continue
            current = f"{current}/{part}"
            if current in self._dirs:
                known = self._dirs[current]
            else:
                try:
                    known = stat.S_ISDIR(os.lstat(self._host(current)).st_mode)
                except (FileNotFoundError, NotADirectoryError):
                    known = None
                self._dirs[current] = known
            if known is None:
                return True
            if not known:
                return False
        return True

    def _chain(self, directory: str, target: str) -> list[str] | None:
        """Base names of the targets along a symlink chain, from a link in `directory` to `target`.

        None when a hop cannot be followed with certainty: an empty or `..` target, one ending
        in `/`, a target whose directory holds symlinks, a chain too long.
        """
        names: list[str] = []
        for _ in range(MAX_SYMLINKS):
            if not target or target.endswith("/") or ".." in target.split("/"):
                return None
            full = target if target.startswith("/") else f"{directory}/{target}"
            normal = "/" + "/".join(p for p in full.split("/") if p not in ("", "."))
            parent, _, base = normal.rpartition("/")
            if not base or not self._plain_chain(parent or "/"):
                return None
            names.append(base)
            is_link = self._is_link.get(normal)
            if is_link is None:
                st = _lstat(self._host(normal))
                is_link = st is not None and stat.S_ISLNK(st.st_mode)
            if not is_link:
                return names
            directory = parent or "/"
            try:
                target = os.readlink(self._host(normal))
            except OSError:
                return None
        return None

    def _links_in(self, directory: str, mentioned: set[str]) -> tuple[bool, list[str], dict[str, str]]:
        """Add what the links right in `directory` stand for to `mentioned`.

        Returns (every link could be judged, subdirectory names, each link's target by name).
        """
        try:
            with os.scandir(self._host(directory)) as it:
                entries = list(it)
        except (FileNotFoundError, NotADirectoryError):
            return True, [], {}
        except OSError:
            return False, [], {}
        ok = True
        subdirs: list[str] = []
        links: dict[str, str] = {}
        for entry in entries:
            is_link = entry.is_symlink()
            self._is_link[f"{directory}/{entry.name}"] = is_link
            if is_link:
                try:
                    links[entry.name] = os.readlink(entry.path)
                except OSError:
                    ok = False
            elif entry.is_dir(follow_symlinks=False):
                subdirs.append(entry.name)
        for name, target in links.items():
            mentioned.add(name)
            if "@" in name:
                # disable also removes an instance's link when asked for its template
                prefix, _, rest = name.partition("@")
                mentioned.add(f"{prefix}@{rest[rest.rfind('.') :]}")
            chain = self._chain(directory, target)
            if chain is None:
                ok = False
            else:
                mentioned.update(chain)
        return ok, subdirs, links

    def enablement_links(self) -> LinkScan:
        """The links `is-enabled` reads: the top level and the dependency directories of each
        search-path directory."""
        mentioned: set[str] = set()
        canonical: set[str] = set()
        ok = True
        for directory in SEARCH_PATH:
            if not self._plain_chain(directory):
                ok = False
                continue
            top_ok, subdirs, _ = self._links_in(directory, mentioned)
            ok = ok and top_ok
            for sub in subdirs:
                if not sub.endswith(_DEPENDENCY_DIR_SUFFIXES):
                    continue
                sub_ok, _, links = self._links_in(f"{directory}/{sub}", mentioned)
                ok = ok and sub_ok
                if directory == CONFIG_DIR:
                    canonical.update(n for n, target in links.items() if target == f"{CONFIG_DIR}/{n}")
        return LinkScan(frozenset(mentioned), not ok, frozenset(canonical))

    def config_links(self) -> LinkScan:
        """Every link at any depth under /etc/systemd/system: all that `disable` may remove."""
        mentioned: set[str] = set()
        ok = self._plain_chain(CONFIG_DIR)
        pending = [CONFIG_DIR] if ok else []
        while pending:
            directory = pending.pop()
            dir_ok, subdirs, _ = self._links_in(directory, mentioned)
            ok = ok and dir_ok
            pending.extend(f"{directory}/{sub}" for sub in subdirs)
        return LinkScan(frozenset(mentioned), not ok)

    def _config_file(self, name: str) -> os.stat_result | None:
        """The stat of /etc/systemd/system/<name> when that is the file systemd uses for `name`."""
        if not plain_unit_name(name):
            return None
        for directory in _ABOVE_CONFIG:
            if not self._plain_chain(directory) or _lstat(self._host(f"{directory}/{name}")):
                return None
        if not self._plain_chain(CONFIG_DIR):
            return None
        st = _lstat(self._host(f"{CONFIG_DIR}/{name}"))
        # an empty file is a mask to systemd
        if st is None or not stat.S_ISREG(st.st_mode) or not 0 < st.st_size < _PARSE_LIMIT:
            return None
        return st

    def surely_enabled(self, name: str, scan: LinkScan) -> bool:
        """`is-enabled name` would print `enabled`: its file is a plain one in /etc/systemd/system
        and a dependency link there is named after it and points at it."""
        return name in scan.canonical and self._config_file(name) is not None

    def surely_not_enabled(self, name: str, scan: LinkScan) -> bool:
        """`is-enabled name` cannot print `enabled`: no link on the search path names or leads to it."""
        return plain_unit_name(name) and not scan.opaque and name not in scan.mentioned

    def _install_sources_plain(self, name: str) -> bool:
        """The unit's file and every `<name>.d/*.conf` on the search path name no other unit
        (no `Also=`), so disabling it concerns its own links only."""
        if self._config_file(name) is None:
            return False
        sources = [f"{CONFIG_DIR}/{name}"]
        for directory in SEARCH_PATH:
            dropins = f"{directory}/{name}.d"
            if not self._plain_chain(dropins):
                return False
            try:
                entries = list(os.scandir(self._host(dropins)))
            except (FileNotFoundError, NotADirectoryError):
                continue
            except OSError:
                return False
            for entry in entries:
                if not entry.name.endswith(".conf"):
                    continue
                st = entry.stat(follow_symlinks=False)
                if not stat.S_ISREG(st.st_mode) or st.st_size >= _PARSE_LIMIT:
                    return False
                sources.append(f"{dropins}/{entry.name}")
        for source in sources:
            try:
                data = atomicfs.read_bytes_nofollow(Path(self._host(source)))
            except OSError:
                return False
            if data is None or any(word in data for word in _WIDENING):
                return False
        return True

    def _dependency_link_names(self) -> set[str]:
        """Names of the links in the dependency directories of /etc/systemd/system."""
        names: set[str] = set()
        if not self._plain_chain(CONFIG_DIR):
            return names
        try:
            with os.scandir(self._host(CONFIG_DIR)) as it:
                subdirs = [
                    e.name
                    for e in it
                    if e.name.endswith(_DEPENDENCY_DIR_SUFFIXES) and e.is_dir(follow_symlinks=False)
                ]
        except OSError:
            return names
        for sub in subdirs:
            try:
                with os.scandir(self._host(f"{CONFIG_DIR}/{sub}")) as it:
                    names.update(e.name for e in it if e.is_symlink())
            except OSError:
                continue
        return names

    def needing_disable(self, names: Sequence[str]) -> list[str]:
        """`names` less those whose `systemctl disable` would provably remove nothing."""
        unique = list(dict.fromkeys(names))
        if not unique:
            return []
        # a link named after the unit in a dependency directory: disable surely has work
        linked = self._dependency_link_names()
        candidates = [n for n in unique if n not in linked and self._install_sources_plain(n)]
        if not candidates:
            return list(names)
        scan = self.config_links()
        if scan.opaque:
            return list(names)
        idle = {n for n in candidates if n not in scan.mentioned}
        return [n for n in names if n not in idle]


def enabled_from_links(root: HostRoot, names: Iterable[str]) -> tuple[frozenset[str], list[str]]:
    """Split `names` by what the links settle: (surely enabled, still to ask systemctl)."""
    links = UnitLinks(root)
    scan = links.enablement_links()
    enabled: set[str] = set()
    unsure: list[str] = []
    for name in names:
        if links.surely_enabled(name, scan):
            enabled.add(name)
        elif not links.surely_not_enabled(name, scan):
            unsure.append(name)
    return frozenset(enabled), unsure
