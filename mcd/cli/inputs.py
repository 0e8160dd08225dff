"""The files a path argument names, for `mcd render`, `mcd plan --pool` and `mcd validate`: a
file itself, or a directory's `*.yaml`, `*.yml` and `*.json` files (not its subdirectories) in
name order, as `kubectl apply -f DIR` reads one.

A path argument is read as pathlib reads it (`pathlib_name`): `f.yaml/` is the file `f.yaml`,
`dir//x` is `dir/x`, "" is the working directory. pathlib itself is not imported (with the
modules it brings, a few ms of every short command): these few functions answer as it does,
tests/cli/test_inputs.py compares them with it.
"""

from __future__ import annotations

import errno
import os
import stat

from mcd.config.findings import Finding, InputError

SUFFIXES = (".yaml", ".yml", ".json")
# the errors pathlib's is_file and is_dir take for "no" rather than raise
_ABSENT = frozenset((errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP))


def pathlib_name(path: str) -> str:
    """`str(pathlib.PurePosixPath(path))`: empty and `.` parts and trailing slashes dropped,
    two leading slashes kept (POSIX leaves their meaning to the system), more made one."""
    parts = path.lstrip("/")
    leading = len(path) - len(parts)
    root = "//" if leading == 2 else "/" if leading else ""
    return root + "/".join(p for p in parts.split("/") if p and p != ".") or "."


def child_name(directory: str, name: str) -> str:
    """`str(pathlib.PurePosixPath(directory) / name)` for a name a directory listing gives."""
    parent = pathlib_name(directory)
    if parent == ".":
        return name
    return parent + name if parent.endswith("/") else f"{parent}/{name}"


def suffix(name: str) -> str:
    """`pathlib.PurePath(name).suffix`: from the last dot on, unless the name starts or ends there."""
    i = name.rfind(".")
    return name[i:] if 0 < i < len(name) - 1 else ""


def read_file(path: str) -> bytes:
    """`pathlib.Path(path).read_bytes()`."""
    with open(pathlib_name(path), "rb") as f:
        return f.read()


def files_of(arg: str) -> list[str]:
    """The files `arg` names: itself, or a directory's config files in name order; InputError
    for a directory that cannot be listed or holds none."""
    if arg != "-" and _is_dir(arg):
        try:
            listed = os.listdir(pathlib_name(arg))
            names = sorted(n for n in listed if suffix(n) in SUFFIXES and _is_file(child_name(arg, n)))
        except OSError as exc:
            raise InputError(arg, [Finding((), f"cannot read: {exc.strerror or exc}")]) from None
        if not names:
            raise InputError(arg, [Finding((), "no *.yaml, *.yml or *.json file in this directory")])
        return [child_name(arg, name) for name in names]
    return [arg]


def _is_dir(arg: str) -> bool:
    # any failure is "not a directory" (a name too long for the kernel: reading it says why)
    return os.path.isdir(pathlib_name(arg))


def _is_file(path: str) -> bool:
    """pathlib's `is_file`: a missing entry is not a file; another failure (a directory that
    cannot be searched) is raised, and the listing fails with it."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError as exc:
        if exc.errno in _ABSENT:
            return False
        raise
    except ValueError:
        return False
