"""HostRoot: map config paths (as seen on the node) to paths under a root directory, never outside it.

The daemon runs in a pod with the node mounted at `/rootfs`, directly on the node with root `/`,
and in tests, benchmarks and `mcd sandbox` roots on any directory. Config paths are always
written as if the root were `/`, so symlinks met on the way must be resolved the same way: an
absolute target is
re-rooted under the prefix, and nothing may climb above the root. Without this a symlink placed
on the node (or in a MachineConfig) could make a write land in the pod's own filesystem.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections import deque
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

# Same limit as the kernel's MAXSYMLINKS: bounds the work for loops and very long chains.
MAX_SYMLINKS = 40


# config directory -> its host path, every link in it followed (see HostRoot.caching_dirs)
DirCache = dict[str, Path]


class PathEscapeError(ValueError):
    """A config path was refused: not absolute, had `..`, looped, or resolved outside the root."""


class HostRoot:
    """A directory playing the role of `/` for every host path mcd reads or writes."""

    __slots__ = ("_dir_cache", "lock_state", "prefix")

    prefix: Path

    def __init__(self, prefix: str | os.PathLike[str]) -> None:
        # Resolved once, so symlinks in the prefix itself (e.g. /tmp on some systems) are not
        # mistaken for links inside the root.
        self.prefix = Path(prefix).resolve()
        self._dir_cache: DirCache | None = None
        # the root's lock as this process holds it through this object (`mcd.host.rootlock`)
        self.lock_state: object | None = None

    @contextlib.contextmanager
    def caching_dirs(self) -> Iterator[None]:
        """Within the block, remember how each parent directory resolved.

        An update joins thousands of paths in a few directories; resolving each parent once
        saves an lstat per path component per path. Only for a span in which nothing but the
        caller changes the tree's directories and links (one update).
        """
        outer = self._dir_cache
        if outer is None:
            self._dir_cache = {}
        try:
            yield
        finally:
            if outer is None:
                self._dir_cache = None

    @property
    def is_live(self) -> bool:
        """True when the root is the running system's `/` (enables D-Bus, live systemd calls)."""
        return self.prefix == Path("/")

    @property
    def runs_systemd(self) -> bool:
        """True when the root is a running system's `/` mounted here (the node at `/rootfs` in the pod).

        systemd's own test (sd_booted): `/run/systemd/system` exists while systemd is PID 1 of
        that system; a directory prepared as a root (a sandbox, an image) has no such thing.
        """
        if self.is_live:
            return True
        try:
            return stat.S_ISDIR(os.lstat(self.prefix / "run" / "systemd" / "system").st_mode)
        except OSError:
            return False

    def __repr__(self) -> str:
        return f"HostRoot({str(self.prefix)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, HostRoot) and other.prefix == self.prefix

    def __hash__(self) -> int:
        return hash(self.prefix)

    def join(self, path: str, *, follow_final: bool = False) -> Path:
        """Return the host path for config path `path`, resolving symlinks as if the root were `/`.

        Parent components that are symlinks are always followed; the final one only with
        `follow_final` (writers replace a final symlink by rename, they never write through it).
        Components that do not exist are joined literally. Raises PathEscapeError when `path` is
        not absolute, contains `..`, loops, or would resolve above the root.
        """
        if not follow_final:
            host_parent, name = self._cached_parent(path)
            if host_parent is not None:
                return host_parent / name
        return self._join(path, follow_final=follow_final)

    def join_str(self, path: str, dirs: DirCache | None = None) -> str:
        """`join(path)` as a string: for loops over thousands of paths, where building a Path
        object per path costs more than the system calls made with it.

        `dirs`: a directory cache of the caller's own (a drift check resolving each directory
        once), used when no `caching_dirs` block is active.
        """
        host_parent, name = self._cached_parent(path, dirs)
        if host_parent is not None:
            return f"{host_parent}/{name}"
        return str(self._join(path, follow_final=False))

    def _cached_parent(self, path: str, dirs: DirCache | None = None) -> tuple[Path | None, str]:
        """The resolved parent of `path` and its final name, from the directory cache; None
        outside `caching_dirs`, for a final component the walk treats specially, and for a
        refused parent (the full walk then names the whole path)."""
        cache = self._dir_cache if self._dir_cache is not None else dirs
        if cache is None:
            return None, ""
        parent, _, name = path.rpartition("/")
        if not parent or name in ("", ".", "..") or "\0" in name:
            return None, ""
        host_parent = cache.get(parent)
        if host_parent is None:
            # the parent with every link followed, then the final component literally: the
            # same result as the walk
            try:
                host_parent = self._cached_dir(parent, cache)
            except PathEscapeError:
                return None, ""
        return host_parent, name

    def _cached_dir(self, directory: str, cache: DirCache) -> Path:
        """`_join(directory, follow_final=True)`, remembered in `cache`, from the resolved parent
        (itself from the cache): a directory whose parent is known costs one lstat instead of a
        walk from the root (an update's unit dropin directories: hundreds of misses, each with
        the same ancestors). Anything but a plain clean path, or a final component that is a
        link, takes the full walk."""
        found = cache.get(directory)
        if found is not None:
            return found
        parent, _, name = directory.rpartition("/")
        if not _plain(directory):
            found = self._join(directory, follow_final=True)
        else:
            base = self._cached_dir(parent, cache) if parent else self.prefix
            candidate = base / name
            try:
                is_link = stat.S_ISLNK(os.lstat(candidate).st_mode)
            except (FileNotFoundError, NotADirectoryError):
                is_link = False
            # a link is followed as the walk follows it (targets, "..", loops, escapes)
            found = self._join(directory, follow_final=True) if is_link else candidate
        cache[directory] = found
        return found

    def _join(self, path: str, *, follow_final: bool) -> Path:
        if not path.startswith("/"):
            raise PathEscapeError(f"refusing {path!r}: not an absolute path")
        if "\0" in path:
            raise PathEscapeError(f"refusing {path!r}: contains a NUL byte")
        parts = [p for p in path.split("/") if p not in ("", ".")]
        if ".." in parts:
            raise PathEscapeError(f'refusing {path}: ".." components are not allowed')

        # Each pending component carries the symlink it came from (None: from `path` itself), so a
        # refusal can name the link responsible.
        pending: deque[tuple[str, str | None]] = deque((p, None) for p in parts)
        resolved: list[str] = []
        links_followed = 0
        while pending:
            name, source = pending.popleft()
            if name in ("", "."):
                continue
            if name == "..":
                if not resolved:
                    raise PathEscapeError(f"refusing {path}: {source} leaves the root {self.prefix}")
                resolved.pop()
                continue
            if not pending and not follow_final:
                resolved.append(name)
                break
            candidate = self.prefix.joinpath(*resolved, name)
            try:
                is_link = stat.S_ISLNK(os.lstat(candidate).st_mode)
            except (FileNotFoundError, NotADirectoryError):
                is_link = False
            if not is_link:
                resolved.append(name)
                continue
            target = os.readlink(candidate)
            link_desc = f"symlink {_config_path([*resolved, name])} -> {target}"
            links_followed += 1
            if links_followed > MAX_SYMLINKS:
                raise PathEscapeError(f"refusing {path}: too many levels of symbolic links at {link_desc}")
            if target.startswith("/"):
                resolved = []
            pending.extendleft((p, link_desc) for p in reversed(target.split("/")))
        return self.prefix.joinpath(*resolved)

    def relative(self, host_path: Path) -> str:
        """Return the config path of `host_path`, the inverse of `join` (lexical, no resolution)."""
        pure = PurePosixPath(host_path)
        if not pure.is_absolute() or ".." in pure.parts:
            raise ValueError(f"{host_path} is not a normalised absolute path")
        try:
            rel = pure.relative_to(PurePosixPath(self.prefix))
        except ValueError:
            raise ValueError(f"{host_path} is not under the root {self.prefix}") from None
        return _config_path(list(rel.parts))


def _plain(path: str) -> bool:
    """An absolute path of plain components: no empty, ".", ".." or NUL (the walk would treat
    them specially); the root itself is not one."""
    return (
        path.startswith("/")
        and len(path) > 1
        and "\0" not in path
        and "//" not in path
        and "/./" not in path
        and "/../" not in path
        and not path.endswith(("/", "/.", "/.."))
    )


def _config_path(parts: list[str]) -> str:
    return "/" + "/".join(parts)
