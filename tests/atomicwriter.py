"""The kubelet AtomicWriter's protocol, as a ConfigMap volume is updated: each version in a new
hidden directory, `..data` swapped to it by one rename, the old version deleted."""

from __future__ import annotations

import itertools
import os
import shutil
from pathlib import Path

_seq = itertools.count()


def publish(directory: Path, files: dict[str, str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    version = directory / f"..2026_11_23_00_00_00.{next(_seq):09d}"
    version.mkdir()
    for name, text in files.items():
        (version / name).write_text(text)
    data = directory / "..data"
    old = os.readlink(data) if data.is_symlink() else None
    tmp = directory / "..data_tmp"
    os.symlink(version.name, tmp)
    os.rename(tmp, data)
    for name in files:
        if not (directory / name).is_symlink():
            os.symlink(f"..data/{name}", directory / name)
    for entry in directory.iterdir():  # keys the new version no longer has
        if entry.is_symlink() and entry.name not in files and not entry.name.startswith(".."):
            entry.unlink()
    if old is not None:
        shutil.rmtree(directory / old)
    return version
