"""Rules for the paths a config declares, checked before anything is written. Pure: no I/O.

Ignition only asks for clean absolute paths. A running daemon must also refuse what the kernel
or its own bookkeeping cannot take, and `mcd validate` must refuse exactly what `mcd start`
would: the root itself, a NUL byte, a name longer than a filesystem allows, a file below another
declared file, and the daemon's own records (a config that wrote `currentconfig` would never
converge; one that wrote a backup under `orig/` would poison the original it stands for).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator

from mcd.config.text import shown

NAME_MAX = 255  # bytes of one path component (ext4, xfs, btrfs)
PATH_MAX = 4096  # bytes of a path with its terminating NUL, as the kernel counts

# The daemon's records on the node (mcd/host/state.py and mcd/host/files.py write them; a unit
# test holds the two lists together). Other files under the directory are legitimate config
# contents: the MCO itself ships /etc/machine-config-daemon/no-reboot/containers-gpg.pub.
STATE_DIR = "/etc/machine-config-daemon"
STATE_FILES = frozenset(
    f"{STATE_DIR}/{name}"
    for name in ("currentconfig", "currentimage", "pendingconfig", "txn.json", "reboot-pending")
)
STATE_TREES = (f"{STATE_DIR}/orig", f"{STATE_DIR}/noorig")
# the per-root lock every update holds (mcd/host/rootlock.py): a config writing it, or a file or
# link in place of a directory above it, would break the exclusion of concurrent updates
LOCK_FILE = "/run/mcd.lock"


def clean(path: str) -> str:
    """Go's path.Clean for absolute paths: POSIX normpath, but a leading "//" collapses too."""
    cleaned = posixpath.normpath(path)
    return "/" + cleaned.lstrip("/") if cleaned.startswith("//") else cleaned


def is_clean(path: str) -> bool:
    """Whether an absolute `path` equals `clean(path)`, without building the cleaned path:
    no empty, "." or ".." component and no trailing "/" (the root excepted)."""
    return (
        "//" not in path
        and "/./" not in path
        and "/../" not in path
        and (path == "/" or not path.endswith(("/", "/.", "/..")))
    )


def path_problem(path: str) -> str | None:
    """Why `path` cannot name a file, directory or link on a node (None: it can)."""
    if (
        len(path) <= NAME_MAX
        and path.isascii()
        and path.startswith("/")
        and path != "/"
        and "\0" not in path
        and is_clean(path)
    ):
        # the common case, checked without normpath or encoding: an ASCII path is as many
        # bytes as characters, so neither it nor a component of it can be too long
        return None
    if not path.startswith("/"):
        return f'path "{shown(path)}" is not absolute'
    if "\0" in path:
        return f'path "{shown(path)}" contains a NUL byte'
    if not is_clean(path):
        return f'path "{shown(path)}" is not clean (want "{shown(clean(path))}")'
    if path == "/":
        return 'path "/" is the root directory itself'
    if len(path.encode("utf-8", "surrogatepass")) >= PATH_MAX:
        return f'path "{shown(path, 60)}" is longer than {PATH_MAX - 1} bytes'
    for part in path.split("/"):
        if len(part.encode("utf-8", "surrogatepass")) > NAME_MAX:
            return f'path component "{shown(part, 60)}" is longer than {NAME_MAX} bytes'
    return None


def name_problem(name: str, what: str) -> str | None:
    """Why a unit or dropin `name` cannot be a file name (None: it can)."""
    if "\0" in name:
        return f'{what} name "{shown(name)}" contains a NUL byte'
    if len(name.encode("utf-8", "surrogatepass")) > NAME_MAX:
        return f'{what} name "{shown(name, 60)}" is longer than {NAME_MAX} bytes'
    return None


def state_problem(path: str, kind: str) -> str | None:
    """Why a config may not declare `path` (a clean absolute path) as a `kind` ("file",
    "directory", "link"): the daemon's own records, or a file or link replacing a directory that
    holds them (None: it may)."""
    if (
        not path.startswith(STATE_DIR)
        and not STATE_DIR.startswith(path)
        and not path.startswith(LOCK_FILE)
        and not LOCK_FILE.startswith(path)
    ):
        return None  # the common case: neither at or under the state directory or lock, nor above them
    if path in STATE_FILES or path == STATE_DIR or any(_at_or_under(path, tree) for tree in STATE_TREES):
        return f"{path} is the daemon's own state ({STATE_DIR}): a config cannot write it"
    if _at_or_under(path, LOCK_FILE):
        return f"{path} is the daemon's lock on the root ({LOCK_FILE}): a config cannot write it"
    if kind != "directory" and _at_or_under(LOCK_FILE, path):
        return f"{path} holds the daemon's lock ({LOCK_FILE}): a config cannot replace it by a {kind}"
    if kind != "directory" and _at_or_under(STATE_DIR, path):
        return f"{path} holds the daemon's own state ({STATE_DIR}): a config cannot replace it by a {kind}"
    return None


def _at_or_under(path: str, top: str) -> bool:
    return path == top or path.startswith(top + "/")


def ancestors(path: str) -> Iterator[str]:
    """The directories above `path` (a clean absolute path), nearest first, without "/"."""
    end = path.rfind("/")
    while end > 0:
        yield path[:end]
        end = path.rfind("/", 0, end)
