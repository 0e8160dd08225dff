"""The update record's durability: what begin and commit fsync, in order (`mcd.host.state`).

The write-ahead record must be durable before begin returns (the first host change follows);
one directory fsync covers both of its renames, and the record's removal after the commit is
not synced (a record outliving a power cut is known as finished)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from renames import record_renames

from mcd.host import failpoints, state
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


# --- the record staged ahead (`state.stage`): begin renames it instead of writing it again


def _text(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj).encode()


def _staged_files(root: Path) -> list[str]:
    return sorted(p.name for p in (root / state.STATE_DIR.lstrip("/")).glob("*.staged"))


def test_begin_renames_the_staged_record_of_the_same_text_instead_of_writing_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / state.STATE_DIR.lstrip("/")).mkdir(parents=True)
    root = HostRoot(tmp_path)
    text = _text(MC)
    renames = record_renames(monkeypatch)
    staged = state.stage(root, text)
    state.begin(root, state.Transaction(None, MC, "apply", "policy", new_text=text, staged=staged))
    assert renames == [(".staged", "pendingconfig"), (".tmp", "txn.json")]
    pending = tmp_path / state.PENDING_CONFIG.lstrip("/")
    assert pending.read_bytes() == text
    assert stat.S_IMODE(pending.stat().st_mode) == 0o644
    staged.discard()  # taken: nothing left to remove, the record stays
    assert pending.read_bytes() == text
    assert _staged_files(tmp_path) == []
    state.commit(root, "")
    assert state.read_current_config(root) == MC


def test_a_staged_record_of_another_config_is_never_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / state.STATE_DIR.lstrip("/")).mkdir(parents=True)
    root = HostRoot(tmp_path)
    other = {**MC, "metadata": {"name": "other"}}
    renames = record_renames(monkeypatch)
    staged = state.stage(root, _text(other))
    state.begin(root, state.Transaction(None, MC, "apply", "policy", new_text=_text(MC), staged=staged))
    assert renames == [(".tmp", "pendingconfig"), (".tmp", "txn.json")]
    assert (tmp_path / state.PENDING_CONFIG.lstrip("/")).read_bytes() == _text(MC)
    staged._written()  # begin does not wait for a text it will not take: its writer may still run
    assert len(_staged_files(tmp_path)) == 1  # its owner's to discard
    staged.discard()
    assert _staged_files(tmp_path) == []


def test_a_staged_file_replaced_on_disk_is_not_taken(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path / state.STATE_DIR.lstrip("/")
    d.mkdir(parents=True)
    root = HostRoot(tmp_path)
    text = _text(MC)

    def replace_it(name: str) -> None:  # someone replaces the file just written: another file
        if name == "update record staged":
            [path] = d.glob("*.staged")
            path.unlink()
            path.write_bytes(text.replace(b'"c"', b'"x"'))

    failpoints.install(replace_it)
    try:
        staged = state.stage(root, text)
        renames = record_renames(monkeypatch)
        state.begin(root, state.Transaction(None, MC, "apply", "policy", new_text=text, staged=staged))
    finally:
        failpoints.install(None)
    assert renames == [(".tmp", "pendingconfig"), (".tmp", "txn.json")]
    assert (tmp_path / state.PENDING_CONFIG.lstrip("/")).read_bytes() == text
    staged.discard()
    assert _staged_files(tmp_path) == []


def test_a_staging_that_failed_leaves_begin_to_write_the_record(tmp_path: Path) -> None:
    root = HostRoot(tmp_path)  # no daemon directory yet: the staged write fails
    text = _text(MC)
    staged = state.stage(root, text)
    state.begin(root, state.Transaction(None, MC, "apply", "policy", new_text=text, staged=staged))
    assert (tmp_path / state.PENDING_CONFIG.lstrip("/")).read_bytes() == text
    staged.discard()
    assert _staged_files(tmp_path) == []


def test_remove_leftovers_removes_staged_records_and_second_names_and_nothing_else(tmp_path: Path) -> None:
    d = tmp_path / state.STATE_DIR.lstrip("/")
    d.mkdir(parents=True)
    keep = ["currentconfig", ".pendingconfig.0123456789abcdef.tmp", ".other.0123456789abcdef.staged",
            ".currentconfig.0123456789abcdef.tmp"]  # fmt: skip
    gone = [".currentconfig.0123456789abcdef.aside", ".pendingconfig.0123456789abcdef.staged"]
    for name in [*keep, *gone]:
        (d / name).write_text("x")
    assert state.remove_leftovers(HostRoot(tmp_path)) == [f"{state.STATE_DIR}/{name}" for name in gone]
    assert sorted(p.name for p in d.iterdir()) == sorted(keep)
    assert state.remove_leftovers(HostRoot(tmp_path / "none")) == []


def test_an_old_config_kept_aside_is_not_freed_by_the_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / state.STATE_DIR.lstrip("/")).mkdir(parents=True)
    root = HostRoot(tmp_path)
    assert state.keep_aside(root) is None  # no config yet: nothing to keep
    state.begin(root, state.Transaction(None, MC, "apply", "policy"))
    state.commit(root, "")
    current = tmp_path / state.CURRENT_CONFIG.lstrip("/")
    old_inode = current.stat().st_ino
    aside = state.keep_aside(root)
    assert aside is not None and aside.stat().st_ino == old_inode
    new = {**MC, "metadata": {"name": "d"}}
    state.begin(root, state.Transaction(MC, new, "apply", "policy"))
    links_when_replaced: list[int] = []
    real_rename = os.rename

    def rename(src: Any, dst: Any) -> None:
        if Path(dst) == current:
            links_when_replaced.append(os.stat(dst).st_nlink)
        real_rename(src, dst)

    monkeypatch.setattr(os, "rename", rename)
    state.commit(root, "")
    assert links_when_replaced == [2]  # the rename only dropped a name: nothing was freed there
    assert state.read_current_config(root) == new
    state.release_aside(aside)
    state.release_aside(aside)  # gone already: nothing to do
    assert state.remove_leftovers(root) == []


def test_a_record_kept_by_the_commit_is_a_finished_one_and_dropped_later(tmp_path: Path) -> None:
    (tmp_path / state.STATE_DIR.lstrip("/")).mkdir(parents=True)
    root = HostRoot(tmp_path)
    txn = tmp_path / state.TRANSACTION.lstrip("/")
    state.begin(root, state.Transaction(None, MC, "apply", "policy"))
    state.drop_finished_record(root)  # not finished: pendingconfig is there
    assert txn.exists()
    state.commit(root, "", drop_record=False)
    assert txn.exists()
    assert state.read_current_config(root) == MC
    state.drop_finished_record(root)
    assert not txn.exists()
    state.drop_finished_record(root)  # nothing left: nothing to do
