"""On-disk verification of a config (upstream validateOnDiskState): files, dropins, units, masks, enablement.

Used at boot, before every update (preflight) and by the drift monitor, which re-checks after
each inotify event, so the per-path check is cheap: an lstat and a size comparison come before
any content is read. Messages are upstream's, with paths as the config names them (`/etc/x`),
never the root-joined host path. Owners are compared only when the caller passes `owners`
(upstream never compares them; mcd writes exact owners, so the agent and the drift monitor do).
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace

from mcd.config.ignition import Dropin, File, IgnitionConfig, Unit
from mcd.host.atomicfs import holds_bytes, read_bytes_nofollow
from mcd.host.root import DirCache, HostRoot, PathEscapeError
from mcd.host.streamdata import Data, Stream, contents, data_size
from mcd.planner.managed_paths import (
    CLOUD_CA,
    INTERNAL_REGISTRY_PULL_SECRET,
    KUBELET_CA,
    UNIT_FILE_MODE,
    Managed,
    dropin_path,
    unit_path,
)

log = logging.getLogger(__name__)

# Files the certificate writer may rewrite with other contents than the MC's.
IGNORED_FILES = frozenset({KUBELET_CA, CLOUD_CA, INTERNAL_REGISTRY_PULL_SECRET})
DEV_NULL = "/dev/null"
APPEND_UNSUPPORTED = "found an append section when checking files. Append is not supported"

# systemctl is-enabled states that contradict the declared enablement
_NOT_ENABLED_STATES = frozenset({"disabled", "masked", "masked-runtime", "not-found"})
_ENABLED_STATES = frozenset({"enabled", "enabled-runtime"})

IsEnabled = Callable[[Sequence[str]], Mapping[str, str]]
# uid and gid a file should have (names resolved in the root); raises LookupError/RuntimeError when unknown
Owners = Callable[[File], tuple[int, int]]

# Go's os.FileMode type bits, by position (os/types.go), and the letters FileMode.String prints.
_GO_DIR = 1 << 31
_GO_SYMLINK = 1 << 27
_GO_DEVICE = 1 << 26
_GO_NAMED_PIPE = 1 << 25
_GO_SOCKET = 1 << 24
_GO_SETUID = 1 << 23
_GO_SETGID = 1 << 22
_GO_CHAR_DEVICE = 1 << 21
_GO_STICKY = 1 << 20
_GO_TYPE_LETTERS = "dalTLDpSugct?"


def go_file_mode(st_mode: int) -> int:
    """The os.FileMode Go's os.Lstat reports for a stat(2) st_mode."""
    mode = st_mode & 0o777
    fmt = stat.S_IFMT(st_mode)
    if fmt == stat.S_IFDIR:
        mode |= _GO_DIR
    elif fmt == stat.S_IFLNK:
        mode |= _GO_SYMLINK
    elif fmt == stat.S_IFBLK:
        mode |= _GO_DEVICE
    elif fmt == stat.S_IFCHR:
        mode |= _GO_DEVICE | _GO_CHAR_DEVICE
    elif fmt == stat.S_IFIFO:
        mode |= _GO_NAMED_PIPE
    elif fmt == stat.S_IFSOCK:
        mode |= _GO_SOCKET
    if st_mode & stat.S_ISUID:
        mode |= _GO_SETUID
    if st_mode & stat.S_ISGID:
        mode |= _GO_SETGID
    if st_mode & stat.S_ISVTX:
        mode |= _GO_STICKY
    return mode


def format_go_mode(mode: int) -> str:
    """`<FileMode.String()>/<decimal>/<%#o>` as upstream prints modes, e.g. `-rw-r--r--/420/0644`."""
    letters = "".join(c for i, c in enumerate(_GO_TYPE_LETTERS) if mode & (1 << (31 - i))) or "-"
    perms = "".join(c if mode & (1 << (8 - i)) else "-" for i, c in enumerate("rwxrwxrwx"))
    octal = f"0{mode:o}" if mode else "0"
    return f"{letters}{perms}/{mode}/{octal}"


def _reason(exc: OSError | PathEscapeError) -> str:
    """Go's text for an errno (lower-case strerror), or our own refusal message."""
    if isinstance(exc, OSError) and exc.errno is not None:
        text = os.strerror(exc.errno)
        return text[:1].lower() + text[1:]
    return str(exc)


class _Resolver:
    """Maps config paths to host paths, resolving each directory once per check run."""

    def __init__(self, root: HostRoot) -> None:
        self.root = root
        self._dirs: DirCache = {}

    def host(self, path: str) -> str:
        return self.root.join_str(path, self._dirs)


def _check_contents_and_mode(resolver: _Resolver, path: str, expected: Data, mode: int) -> str | None:
    try:
        host = resolver.host(path)
        st = os.lstat(host)
    except (OSError, PathEscapeError) as exc:
        return f'could not stat file "{path}": lstat {path}: {_reason(exc)}'
    actual = go_file_mode(st.st_mode)
    if actual != mode:
        return (
            f'mode mismatch for file: "{path}"; expected: {format_go_mode(mode)}; '
            f"received: {format_go_mode(actual)}"
        )
    # same mode means a regular file, so the size alone can already tell a mismatch
    if isinstance(expected, Stream):
        # a large file: compared piece by piece as it is decoded, never held whole
        if st.st_size == expected.size and holds_bytes(host, st, expected):
            return None
        size = st.st_size
    elif st.st_size == len(expected):
        try:
            data = read_bytes_nofollow(host)
        except OSError as exc:
            return f'could not read file "{path}": open {path}: {_reason(exc)}'
        if data is None:
            return f'could not read file "{path}": open {path}: no such file or directory'
        if data == expected:
            return None
        size = len(data)
    else:
        size = st.st_size
    # contents may be secrets: only sizes are logged
    log.info(
        "content mismatch for file %r (expected %d bytes, got %d bytes)", path, data_size(expected), size
    )
    return f'content mismatch for file "{path}"'


def _check_file(resolver: _Resolver, f: File) -> str | None:
    if f.path in IGNORED_FILES:
        return None
    if f.append:
        return APPEND_UNSUPPORTED
    return _check_contents_and_mode(resolver, f.path, contents(f), f.effective_mode)


def check_file(root: HostRoot, f: File, owners: Owners | None = None) -> str | None:
    """Drift of one Ignition file (mode, content, then owner with `owners`), or None; files of
    the ignore set never drift."""
    resolver = _Resolver(root)
    err = _check_file(resolver, f)
    if err is None and owners is not None and f.path not in IGNORED_FILES:
        err = _check_owner(resolver, f, owners)
    return err


def _check_owner(resolver: _Resolver, f: File, owners: Owners) -> str | None:
    """Owner drift, in the style of upstream's mode message (upstream compares no owners)."""
    try:
        uid, gid = owners(f)
    except (LookupError, RuntimeError) as exc:
        return str(exc)
    try:
        st = os.lstat(resolver.host(f.path))
    except (OSError, PathEscapeError) as exc:
        return f'could not stat file "{f.path}": lstat {f.path}: {_reason(exc)}'
    if (st.st_uid, st.st_gid) != (uid, gid):
        return (
            f'owner mismatch for file: "{f.path}"; expected: {uid}:{gid}; received: {st.st_uid}:{st.st_gid}'
        )
    return None


def check_dropin(root: HostRoot, path: str, contents: str | None) -> str | None:
    """Drift of one dropin file (absent when empty; else contents and mode 0644), or None."""
    return _check_dropin(_Resolver(root), path, contents)


def units_as_declared(root: HostRoot, units: Sequence[Unit]) -> set[str]:
    """The unit files, masks and dropins of `units` that are as declared (an empty dropin: absent).

    One resolver for them all: the dropin directories share /etc/systemd/system, resolved once.
    """
    resolver = _Resolver(root)
    out: set[str] = set()
    for u in units:
        for dr in u.dropins:
            path = dropin_path(u.name, dr.name)
            if _check_dropin(resolver, path, dr.contents) is None:
                out.add(path)
        if _check_unit(resolver, u) is None:
            out.add(unit_path(u.name))
    return out


def check_unit(root: HostRoot, unit: Unit, is_enabled: IsEnabled | None = None) -> str | None:
    """Drift of one unit's file, mask or enablement (not its dropins), as `iter_errors` checks it."""
    return _check_unit(_Resolver(root), unit, is_enabled)


def _check_unit(resolver: _Resolver, unit: Unit, is_enabled: IsEnabled | None = None) -> str | None:
    path = unit_path(unit.name)
    if unit.mask:
        return _check_mask(resolver, path)
    if not unit.contents:
        return None
    err = _check_contents_and_mode(resolver, path, unit.contents.encode(), UNIT_FILE_MODE)
    if err is None and is_enabled is not None and unit.enabled is not None:
        err = _enablement_error(unit, is_enabled([unit.name]).get(unit.name, "not-found"))
    return err


def _check_dropin(resolver: _Resolver, path: str, contents: str | None) -> str | None:
    expected = (contents or "").encode()
    if not expected:
        # empty dropins are deleted by the writer, so absence is the expected state
        try:
            os.stat(resolver.root.join(path, follow_final=True))
        except FileNotFoundError:
            return None
        except (OSError, PathEscapeError) as exc:
            return f"stat {path}: {_reason(exc)}"
    return _check_contents_and_mode(resolver, path, expected, UNIT_FILE_MODE)


def _check_mask(resolver: _Resolver, path: str) -> str | None:
    root = resolver.root
    try:
        os.lstat(resolver.host(path))
        target = root.relative(root.join(path, follow_final=True))
    except (OSError, PathEscapeError) as exc:
        reason = _reason(exc)
        return f'state validation: error while evaluation symlink for path "{path}": lstat {path}: {reason}'
    if target != DEV_NULL:
        return (
            f'state validation: invalid unit masked setting. path: "{path}"; '
            f"expected: {DEV_NULL}; received: {target}"
        )
    return None


def _enablement_error(unit: Unit, state: str) -> str | None:
    if unit.enabled and state in _NOT_ENABLED_STATES:
        return f'unit "{unit.name}" expected enabled=true, but systemd reports "{state}"'
    if unit.enabled is False and state in _ENABLED_STATES:
        return f'unit "{unit.name}" expected enabled=false, but systemd reports "{state}"'
    return None


def _needs_enablement_check(unit: Unit) -> bool:
    return bool(unit.contents) and not unit.mask and unit.enabled is not None


def iter_errors(
    root: HostRoot,
    config: IgnitionConfig,
    is_enabled: IsEnabled | None = None,
    owners: Owners | None = None,
    only: Collection[str] | None = None,
) -> Iterator[str]:
    """Yield drift errors in upstream's order: files, then per unit its dropins, file/mask, enablement.

    Lazy, so `first_error` stops at the first problem without asking systemd anything when a
    file already drifted. With `owners`, a file's owner is compared after its mode and content.
    With `only`, just those paths are read (a unit's path stands for its file, mask and
    enablement): the rest is known to be as declared (the drift monitor saw no change to it).
    `only` as a mapping of the paths to their declarations in `config` (as the drift monitor
    indexes it; one per path, so not for a config declaring a path twice) is read in
    proportion to its size; any other collection costs a pass over the whole config.
    """
    if only is not None:
        config = _restricted(config, only)
    resolver = _Resolver(root)
    for f in config.files:
        err = _check_file(resolver, f)
        if err is None and owners is not None and f.path not in IGNORED_FILES:
            err = _check_owner(resolver, f, owners)
        if err is not None:
            yield err
    states: Mapping[str, str] = {}
    if is_enabled is not None:
        names = [u.name for u in config.units if _needs_enablement_check(u)]
        if names:
            states = is_enabled(names)
    for u in config.units:
        for d in u.dropins:
            if (err := _check_dropin(resolver, dropin_path(u.name, d.name), d.contents)) is not None:
                yield err
        path = unit_path(u.name)
        if u.mask:
            # upstream checks a mask only when the unit also has contents (a quirk of its loop);
            # a mask is on-disk state like any other, so it is always checked here
            if (err := _check_mask(resolver, path)) is not None:
                yield err
            continue
        if not u.contents:
            continue  # nothing of the unit file to check, and (as upstream) not its enablement
        err = _check_contents_and_mode(resolver, path, u.contents.encode(), UNIT_FILE_MODE)
        if err is None and is_enabled is not None and u.enabled is not None:
            err = _enablement_error(u, states.get(u.name, "not-found"))
        if err is not None:
            yield err


def _restricted(config: IgnitionConfig, only: Collection[str]) -> IgnitionConfig:
    """`config` with the files, dropins and units of `only` alone."""
    if isinstance(only, Mapping):
        return _selected(config, only.values())
    units = []
    for u in config.units:
        dropins = tuple(d for d in u.dropins if dropin_path(u.name, d.name) in only)
        if unit_path(u.name) in only:
            units.append(replace(u, dropins=dropins))
        elif dropins:
            # the dropins alone: no contents and no mask, so the unit file is not looked at
            units.append(replace(u, dropins=dropins, contents=None, mask=None, enabled=None))
    return replace(config, files=tuple(f for f in config.files if f.path in only), units=tuple(units))


def _selected(config: IgnitionConfig, declared: Iterable[Managed]) -> IgnitionConfig:
    """`_restricted` from the declarations of the paths: what the config's order puts first
    comes first, and a unit's dropins (which come right before its file) go with it."""
    files: list[File] = []
    units: dict[str, tuple[Unit | None, list[Dropin]]] = {}  # by name, in the config's order
    for m in sorted(declared, key=_order):
        if m.file is not None:
            files.append(m.file)
        elif m.unit is not None:
            units[m.unit.name] = (m.unit, units.get(m.unit.name, (None, []))[1])
        else:
            directory, _, name = m.path.rpartition("/")
            owner = directory.rpartition("/")[2].removesuffix(".d")
            units.setdefault(owner, (None, []))[1].append(Dropin(name, m.dropin))
    restricted = []
    for name, (unit, dropins) in units.items():
        if unit is None:
            # the dropins alone: no contents and no mask, so the unit file is not looked at
            restricted.append(Unit(name, dropins=tuple(dropins)))
        else:
            chosen = {d.name for d in dropins}
            restricted.append(replace(unit, dropins=tuple(d for d in unit.dropins if d.name in chosen)))
    return replace(config, files=tuple(files), units=tuple(restricted))


def _order(m: Managed) -> int:
    return m.order


def check_config(root: HostRoot, config: IgnitionConfig, is_enabled: IsEnabled | None = None) -> list[str]:
    """All drift errors of `config` against `root` (empty: the disk matches).

    `is_enabled` maps unit names to `systemctl is-enabled` states (the systemd module provides
    it); None skips the enablement check.
    """
    return list(iter_errors(root, config, is_enabled))


def first_error(
    root: HostRoot,
    config: IgnitionConfig,
    is_enabled: IsEnabled | None = None,
    owners: Owners | None = None,
    only: Collection[str] | None = None,
) -> str | None:
    """The first drift error upstream would report (of the paths `only`, when given), or None."""
    return next(iter_errors(root, config, is_enabled, owners, only), None)
