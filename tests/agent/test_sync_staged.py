"""The update record staged ahead (`NodeApplier.stage`): the sync writes the desired config's
text while it plans, the update renames that file, and nothing staged outlives the sync or a
killed process (in process, on a sandbox root)."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest
from builders import ign_file, mc_object
from harness import make_root
from inproc import MemoryApi, syncer
from killing import in_child

from mcd.agent.errors import UnreconcilableError
from mcd.agent.sync import Result
from mcd.host import failpoints, state
from mcd.host.root import HostRoot
from mcd.node import annotations as ann
from mcd.node.errors import McdError

POLICY = "/etc/containers/policy.json"  # the default policy reloads crio: rebootless
OLD = mc_object("rendered-old", files=[ign_file(POLICY, "{}\n")])
NEW = mc_object("rendered-new", files=[ign_file(POLICY, '{"default": []}\n')])
STATE_DIR = state.STATE_DIR.lstrip("/")


def _api(desired: dict[str, Any]) -> MemoryApi:
    api = MemoryApi({ann.CURRENT_CONFIG: "rendered-old", ann.DESIRED_CONFIG: desired["metadata"]["name"],
                     ann.STATE: "Done"})  # fmt: skip
    api.mcs[desired["metadata"]["name"]] = desired
    api.mcs["rendered-old"] = OLD
    return api


def _litter(root: Path) -> list[str]:
    return sorted(p.name for p in (root / STATE_DIR).iterdir() if p.name.startswith("."))


def _current(root: Path) -> str:
    return state.read_current_config(HostRoot(root))["metadata"]["name"]  # type: ignore[index]


def test_the_update_renames_the_record_staged_while_it_planned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_root(tmp_path, OLD)
    renamed: list[tuple[str, str]] = []
    real_rename = os.rename

    links: list[int] = []  # of the old currentconfig when the commit renames over it

    def rename(src: Any, dst: Any) -> None:
        renamed.append((Path(src).suffix, Path(dst).name))
        if Path(dst).name == "currentconfig":
            links.append(os.stat(dst).st_nlink)
        real_rename(src, dst)

    monkeypatch.setattr(os, "rename", rename)
    assert syncer(root, _api(NEW)).sync(boot=False) is Result.IDLE
    # the record is the staged file: it is not written a second time
    assert [r for r in renamed if r[1] == "pendingconfig"] == [(".staged", "pendingconfig")]
    # the old config had a second name over the commit (the rename freed nothing), removed
    # once the sync was over
    assert links == [2]
    assert _current(root) == "rendered-new"
    assert _litter(root) == []


def test_the_clean_up_of_the_update_waits_until_done_is_reported(tmp_path: Path) -> None:
    root = make_root(tmp_path, OLD)
    api = _api(NEW)
    seen: list[tuple[bool, int]] = []  # when Done is patched: the record there? old config's links?
    patch = api.patch_node

    def patch_node(name: str, body: dict[str, Any], *, status: bool = False) -> dict[str, Any]:
        if (body.get("metadata", {}).get("annotations") or {}).get(ann.STATE) == "Done":
            old_names = [p for p in (root / STATE_DIR).iterdir() if p.name.endswith(".aside")]
            seen.append(((root / state.TRANSACTION.lstrip("/")).exists(), len(old_names)))
        return patch(name, body, status=status)

    api.patch_node = patch_node  # type: ignore[method-assign]
    assert syncer(root, api).sync(boot=False) is Result.IDLE
    # a finished record (no pendingconfig) and the old config's second name until then
    assert seen == [(True, 1)]
    assert not (root / state.PENDING_CONFIG.lstrip("/")).exists()
    assert not (root / state.TRANSACTION.lstrip("/")).exists()
    assert _litter(root) == []


@pytest.mark.parametrize("boot", [False, True])
def test_nothing_staged_is_left_by_an_update_that_did_not_happen(tmp_path: Path, boot: bool) -> None:
    disks = mc_object("rendered-new")
    disks["spec"]["config"]["storage"] = {"disks": [{"device": "/dev/vdb", "wipeTable": True}]}
    root = make_root(tmp_path, OLD)
    with pytest.raises(UnreconcilableError):
        syncer(root, _api(disks)).sync(boot=boot)
    assert _litter(root) == []
    assert _current(root) == "rendered-old"


def test_nothing_staged_is_left_by_a_refused_update(tmp_path: Path) -> None:
    root = make_root(tmp_path, OLD)
    (root / "etc/app.d").mkdir()
    refused = mc_object("rendered-new", files=[ign_file(POLICY, "{}\n"), ign_file("/etc/app.d", "x\n")])
    with pytest.raises(McdError, match="it is a directory"):
        syncer(root, _api(refused)).sync(boot=False)
    assert _litter(root) == []


def test_nothing_staged_is_left_when_the_preflight_check_fails(tmp_path: Path) -> None:
    root = make_root(tmp_path, OLD)
    (root / POLICY.lstrip("/")).write_text("edited\n")
    with pytest.raises(McdError, match="unexpected on-disk state"):
        syncer(root, _api(NEW)).sync(boot=False)
    assert _litter(root) == []


def _killed_at(point: str, root: Path, api: MemoryApi) -> None:
    def kill_there(name: str) -> None:
        if name == point:
            os.kill(os.getpid(), signal.SIGKILL)

    failpoints.install(kill_there)
    syncer(root, api).sync(boot=False)


@pytest.mark.parametrize(
    ("point", "left_there"),
    [
        ("update record staged", ".staged"),
        ("old config kept aside", ".aside"),
        ("staged record renamed, directory not synced", ".aside"),  # pendingconfig, no txn.json
    ],
)
def test_a_process_killed_between_staging_and_the_update_leaves_the_old_config_and_no_litter(
    tmp_path: Path, point: str, left_there: str
) -> None:
    root = make_root(tmp_path, OLD)
    api = _api(NEW)
    assert in_child(lambda: _killed_at(point, root, api), None) == signal.SIGKILL
    # killed with the record staged (written and fsynced) but not taken: the node is in the old
    # config, no update record, and the staged file (and the old config's second name) is litter
    assert _current(root) == "rendered-old"
    assert not (root / state.TRANSACTION.lstrip("/")).exists()
    assert (root / POLICY.lstrip("/")).read_text() == "{}\n"
    left = {Path(n).suffix for n in _litter(root)}
    # the record is staged on a writer thread while the update starts: either may be first
    assert left <= {".staged", ".aside"}
    assert left_there in left
    # the restart removes it before anything else, then updates as usual
    assert syncer(root, api).sync(boot=True) is Result.IDLE
    assert _litter(root) == []
    assert _current(root) == "rendered-new"


def test_a_process_killed_after_the_commit_leaves_its_clean_up_to_the_restart(tmp_path: Path) -> None:
    root = make_root(tmp_path, OLD)
    api = _api(NEW)
    assert in_child(lambda: _killed_at("transaction committed", root, api), None) == signal.SIGKILL
    assert _current(root) == "rendered-new"
    assert (root / state.TRANSACTION.lstrip("/")).exists()  # a finished record: no pendingconfig
    assert {Path(n).suffix for n in _litter(root)} == {".aside"}
    assert syncer(root, api).sync(boot=True) is Result.IDLE
    assert not (root / state.TRANSACTION.lstrip("/")).exists()
    assert _litter(root) == []
    assert api.history[-1][ann.STATE] == "Done"


def _count(root: Path, api: MemoryApi, out: Path) -> None:
    names: list[str] = []
    failpoints.install(names.append)
    syncer(root, api).sync(boot=False)
    out.write_text("\n".join(names))


def test_a_sync_killed_at_any_failpoint_converges_after_its_restart_with_no_litter(tmp_path: Path) -> None:
    api = _api(NEW)
    probe = make_root(tmp_path / "probe", OLD)
    assert in_child(lambda: _count(probe, api, tmp_path / "hits"), None) is None
    names = (tmp_path / "hits").read_text().splitlines()
    # the record staged ahead and renamed, the old config kept aside: killed there too
    staging = ("update record staged", "staged record renamed, directory not synced", "old config kept aside")
    assert set(staging) <= set(names)
    total = len(names)
    for n in range(1, total + 1):
        root = make_root(tmp_path / f"kill-{n}", OLD)
        if in_child(lambda root=root: syncer(root, _api(NEW)).sync(boot=False), n) is None:
            continue  # a thread's failpoint counted in the probe run and not in this one
        # killed: the recorded config is the old or the new one, the file is old or new
        assert _current(root) in ("rendered-old", "rendered-new"), n
        assert (root / POLICY.lstrip("/")).read_text() in ("{}\n", '{"default": []}\n'), n
        restarted = _api(NEW)
        assert syncer(root, restarted).sync(boot=True) is Result.IDLE, n
        assert _current(root) == "rendered-new", n
        assert (root / POLICY.lstrip("/")).read_text() == '{"default": []}\n', n
        assert _litter(root) == [], (n, _litter(root))
        assert not (root / state.TRANSACTION.lstrip("/")).exists(), n
        assert not (root / state.PENDING_CONFIG.lstrip("/")).exists(), n
        assert restarted.history[-1][ann.STATE] == "Done", n
