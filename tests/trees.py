"""Snapshots of a directory tree, to compare a root before and after an operation."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

Tree = dict[str, tuple[Any, ...]]


def walk(root: Path, *, dirs: bool = True) -> Tree:
    """Every entry under `root` (not the root itself), keyed by config path: type, mode, owner, and
    content or link target. With `dirs=False` only files and links are listed."""
    out: Tree = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            key = "/" + os.path.relpath(full, root)
            if stat.S_ISLNK(st.st_mode):
                out[key] = ("link", os.readlink(full))
            elif stat.S_ISDIR(st.st_mode):
                if dirs:
                    out[key] = ("dir", stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid)
            else:
                out[key] = ("file", stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid, Path(full).read_bytes())
    return out


# A root's accounts with `core`, as the sandbox and CoreOS have them.
CORE_PASSWD = "root:x:0:0:root:/root:/bin/bash\ncore:x:1000:1000:CoreOS Admin:/home/core:/bin/bash\n"
CORE_GROUP = "root:x:0:\ncore:x:1000:\n"


def put(base: Path, path: str, data: str | bytes = "", mode: int = 0o644) -> Path:
    """Write a file at config path `path` under `base` (parents made), with exactly `mode`."""
    target = base / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data.encode() if isinstance(data, str) else data)
    os.chmod(target, mode)
    return target
