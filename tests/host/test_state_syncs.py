"""The update record's durability: what begin and commit fsync, in order (`mcd.host.state`).

The write-ahead record must be durable before begin returns (the first host change follows);
one directory fsync covers both of its renames, and the record's removal after the commit is
not synced (a record outliving a power cut is known as finished)."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from mcd.host import state
from mcd.host.root import HostRoot

MC = {
    "apiVersion": "machineconfiguration.openshift.io/v1",
    "kind": "MachineConfig",
    "metadata": {"name": "c"},
}


def _recorded(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    events: list[str] = []
    real_fsync, real_rename, real_unlink = os.fsync, os.rename, os.unlink

    def fsync(fd: int) -> None:
        events.append("fsync-dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "fsync-file")
        real_fsync(fd)

    def rename(src: Any, dst: Any) -> None:
        events.append(f"rename {Path(dst).name}")
        real_rename(src, dst)

    def unlink(path: Any, *args: Any, **kwargs: Any) -> None:
        events.append(f"unlink {Path(path).name}")
        real_unlink(path, *args, **kwargs)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "rename", rename)
    monkeypatch.setattr(os, "unlink", unlink)
    return events


def test_begin_syncs_both_records_with_one_directory_fsync_before_it_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / state.STATE_DIR.lstrip("/")).mkdir(parents=True)
    root = HostRoot(tmp_path)
    events = _recorded(monkeypatch)
    state.begin(root, state.Transaction(None, MC, "apply", "policy"))
    assert events == ["fsync-file", "rename pendingconfig", "fsync-file", "rename txn.json", "fsync-dir"]
    assert state.pending(root) is not None


def test_commit_makes_the_rename_durable_and_drops_the_record_without_a_sync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / state.STATE_DIR.lstrip("/")).mkdir(parents=True)
    root = HostRoot(tmp_path)
    state.begin(root, state.Transaction(None, MC, "apply", "policy"))
    events = _recorded(monkeypatch)
    state.commit(root, "")
    assert [e for e in events if not e.startswith("fsync-file")] == [
        "rename currentimage", "fsync-dir", "rename currentconfig", "fsync-dir", "unlink txn.json",
    ]  # fmt: skip
    assert state.pending(root) is None
    assert state.read_current_config(root) == MC
