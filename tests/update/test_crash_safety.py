"""Kill the update at every step boundary (and at random points) and check nothing is lost.

A forked child applies config B over config A on a sandbox root and is SIGKILLed at the n-th
failpoint (every atomic write, rename, removal and step boundary is one). Then:
* every path is exactly as in A's state or as in B's state (never partial, never a mix inside
  a file), originals replaced by A are on disk or in their backup, and
* the restart (`mcd start --once-from B` again) converges to exactly B's state, the same tree a
  clean A-then-B produces, with no temp files or transaction record left.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from builders import data_url, mc_object
from killing import arm, hits, in_child
from mcd_sim.sandbox import make_sandbox_root

from mcd.cli.oncefrom import run_once_from
from mcd.host.root import HostRoot
from mcd.host.runner import SubprocessRunner
from mcd.update.transaction import Host

pytestmark = pytest.mark.allow_commands

STANDIN = Path(__file__).resolve().parents[1] / "standins" / "rpm-ostree"
ORIGINAL_CHRONY = b"pool 2.fedora.pool.ntp.org iburst\n"
TEMP_FILE = re.compile(r"^\..+\.[0-9a-f]{16}\.tmp$")
INSTALL = "[Install]\nWantedBy=multi-user.target\n"


def unit(name: str, text: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "contents": f"[Unit]\nDescription={text}\n[Service]\nExecStart=/bin/true\n{INSTALL}",
        **extra,
    }


def config_a(os_fields: bool) -> dict[str, Any]:
    files = [
        {"path": "/etc/chrony.conf", "mode": 420, "contents": {"source": data_url("server a.example.com\n")}},
        {
            "path": "/etc/a-only.conf",
            "mode": 384,
            "user": {"name": "core"},
            "contents": {"source": data_url("a secret\n")},
        },
        {"path": "/etc/shared.conf", "mode": 420, "contents": {"source": data_url("shared A\n" * 50)}},
    ] + [
        {"path": f"/etc/mcd-test/many-{i}.conf", "contents": {"source": data_url(f"A {i}\n")}}
        for i in range(4)
    ]
    units = [
        unit(
            "hello.service",
            "hello",
            enabled=True,
            dropins=[{"name": "10-env.conf", "contents": "[Service]\nEnvironment=A=1\n"}],
        ),
        {"name": "masked.service", "mask": True},
        unit(
            "shared.service",
            "shared A",
            enabled=True,
            dropins=[{"name": "10-a.conf", "contents": "[Service]\nEnvironment=S=a\n"}],
        ),
    ]
    spec: dict[str, Any] = {}
    if os_fields:
        spec = {"osImageURL": "quay.io/openshift/os@sha256:" + "a" * 64, "kernelArguments": ["a=1", "nosmt"]}
    return mc_object("rendered-a", files=files, units=units, ssh_keys=["ssh-ed25519 AAAA a@example"], **spec)


def config_b(os_fields: bool) -> dict[str, Any]:
    files = [
        {"path": "/etc/shared.conf", "mode": 416, "contents": {"source": data_url("shared B\n" * 70)}},
        {"path": "/etc/b-only.conf", "contents": {"source": data_url("b\n")}},
    ] + [
        {"path": f"/etc/mcd-test/many-{i}.conf", "contents": {"source": data_url(f"B {i}\n")}}
        for i in range(2)
    ]
    units = [
        unit(
            "shared.service",
            "shared B",
            enabled=False,
            dropins=[{"name": "20-b.conf", "contents": "[Service]\nEnvironment=S=b\n"}],
        ),
        unit("other.service", "other", enabled=True),
        {"name": "masked.service", "mask": False},
    ]
    spec: dict[str, Any] = {}
    if os_fields:
        spec = {"osImageURL": "quay.io/openshift/os@sha256:" + "b" * 64, "kernelArguments": ["b=2", "nosmt"]}
    return mc_object(
        "rendered-b",
        files=files,
        units=units,
        ssh_keys=["ssh-ed25519 AAAA b@example", "ssh-ed25519 AAAA c@example"],
        **spec,
    )


Snapshot = dict[str, tuple[Any, ...]]


def snapshot(root: Path) -> Snapshot:
    """Files and symlinks with type, mode, owner and content (directories are not compared)."""
    out: Snapshot = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            full = os.path.join(dirpath, name)
            rel = "/" + os.path.relpath(full, root)
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(full))
            else:
                out[rel] = ("file", stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid, Path(full).read_bytes())
    return out


class Scenario:
    """A work directory holding the root and the rpm-ostree stand-in state."""

    def __init__(self, base: Path, os_fields: bool) -> None:
        self.base = base
        self.os_fields = os_fields
        self.a_file = base / "a.json"
        self.b_file = base / "b.json"
        self.a_file.write_text(json.dumps(config_a(os_fields)))
        self.b_file.write_text(json.dumps(config_b(os_fields)))

    def fresh(self, where: Path) -> Path:
        root = make_sandbox_root(where / "root", coreos=self.os_fields)
        (root / "etc" / "chrony.conf").write_bytes(ORIGINAL_CHRONY)
        return where

    def host(self, work: Path) -> Host:
        os.environ["RPMOSTREE_STANDIN_STATE"] = str(work / "rpm-ostree.json")
        return Host.for_root(HostRoot(work / "root"), SubprocessRunner(), rpmostree_binary=str(STANDIN))

    def apply(self, work: Path, config: Path) -> None:
        run_once_from(self.host(work), str(config), skip_reboot=True)

    def deployments(self, work: Path) -> Any:
        state = json.loads((work / "rpm-ostree.json").read_text())
        return [
            (d.get("container-image-reference"), d.get("booted"), d.get("staged"))
            for d in state.get("deployments", [])
        ]


def _clone(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, symlinks=True)
    _fix_owners(src, dst)
    return dst


@pytest.fixture(scope="module")
def references(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Per case (OS fields or not, A->B or back B->A): the start tree, the target state, the hit count."""
    out: dict[str, Any] = {}
    for os_fields in (False, True):
        base = tmp_path_factory.mktemp(f"ref-os{int(os_fields)}")
        sc = Scenario(base, os_fields)
        a_work = sc.fresh(base / "a")
        sc.apply(a_work, sc.a_file)
        ab_work = _clone(a_work, base / "ab")
        sc.apply(ab_work, sc.b_file)
        aba_work = _clone(ab_work, base / "aba")
        sc.apply(aba_work, sc.a_file)
        for name, start, target, config in (
            ("forward", a_work, ab_work, sc.b_file),
            ("back", ab_work, aba_work, sc.a_file),
        ):
            probe = _clone(start, base / f"probe-{name}")
            assert (
                in_child(lambda sc=sc, probe=probe, config=config: _count_hits(sc, probe, config), None)
                is None
            )
            out[f"os{int(os_fields)}-{name}"] = {
                "scenario": sc,
                "config": config,
                "start_work": start,
                "start": snapshot(start / "root"),
                "target": snapshot(target / "root"),
                "hits": int((probe / "hits").read_text()),
                "seconds": float((probe / "seconds").read_text()),
                "deployments": sc.deployments(target) if os_fields else None,
            }
    yield out


def _count_hits(sc: Scenario, work: Path, config: Path) -> None:
    arm(None)
    t0 = time.monotonic()
    sc.apply(work, config)
    (work / "seconds").write_text(str(time.monotonic() - t0))
    (work / "hits").write_text(str(hits()))


def _fix_owners(src: Path, dst: Path) -> None:
    """copytree keeps modes but not owners: copy them (and keep symlinks as they are)."""
    for dirpath, dirnames, filenames in os.walk(src):
        for name in dirnames + filenames:
            s = os.path.join(dirpath, name)
            d = os.path.join(dst, os.path.relpath(s, src))
            st = os.lstat(s)
            os.lchown(d, st.st_uid, st.st_gid)


def check_killed_state(killed: Snapshot, start: Snapshot, target: Snapshot) -> None:
    """Every path is as before or as after; bookkeeping and temp files aside; the original survives."""
    for path in sorted(set(killed) | set(start) | set(target)):
        name = path.rsplit("/", 1)[-1]
        if TEMP_FILE.match(name):
            continue  # a rename that never happened: invisible under its real name
        if path.startswith("/etc/machine-config-daemon/") and path not in start and path not in target:
            continue  # the transaction record, backups and stamps of the update in flight
        got = killed.get(path)
        assert got in (start.get(path), target.get(path)), f"{path} is neither old nor new: {got!r:.120}"
    backup = killed.get("/etc/machine-config-daemon/orig/etc/chrony.conf.mcdorig")
    current = killed.get("/etc/chrony.conf")
    assert any(e is not None and e[0] == "file" and e[4] == ORIGINAL_CHRONY for e in (backup, current)), (
        "the original /etc/chrony.conf was lost"
    )


def run_kill_and_restart(refs: dict[str, Any], tmp: Path, kill: Callable[[], None] | int) -> None:
    """Kill an update (at failpoint `kill`, or by the `kill` callable's timer), restart, compare."""
    sc: Scenario = refs["scenario"]
    work = _clone(refs["start_work"], tmp / "work")
    config = refs["config"]
    if isinstance(kill, int):
        ended_by = in_child(lambda: sc.apply(work, config), kill)
        assert ended_by == signal.SIGKILL, f"failpoint {kill} was never reached"
    else:
        ended_by = in_child(lambda: (kill(), sc.apply(work, config))[1], None)
    if ended_by is not None:
        check_killed_state(snapshot(work / "root"), refs["start"], refs["target"])
    # the restart: the same command again converges
    assert in_child(lambda: sc.apply(work, config), None) is None
    final = snapshot(work / "root")
    leftovers = [p for p in final if TEMP_FILE.match(p.rsplit("/", 1)[-1])]
    assert not leftovers, f"temp files left after the restart: {leftovers}"
    assert "/etc/machine-config-daemon/txn.json" not in final
    assert final == refs["target"], _diff(final, refs["target"])
    if sc.os_fields:
        assert sc.deployments(work) == refs["deployments"]
    shutil.rmtree(work)


def _diff(got: Snapshot, want: Snapshot) -> str:
    lines = []
    for path in sorted(set(got) | set(want)):
        if got.get(path) != want.get(path):
            lines.append(f"{path}: got {got.get(path)!r:.100} want {want.get(path)!r:.100}")
    return "\n".join(lines[:20])


CASES = ["os0-forward", "os0-back", "os1-forward", "os1-back"]
# `make test` kills at a spread sample of the failpoints (every one takes a fork, an update and
# a restart); `.ci/run` sets MCD_CRASH_SWEEP=full and kills at every one of them.
FULL_SWEEP = os.environ.get("MCD_CRASH_SWEEP") == "full"
SAMPLED_KILLS = 10  # per case, when sampling
RANDOM_KILLS = 30 if FULL_SWEEP else 6  # per random case


def kill_points(hits: int, case: str) -> list[int]:
    """Every failpoint (full sweep), or SAMPLED_KILLS spread over them, the first and last included."""
    every = list(range(1, hits + 1))
    if FULL_SWEEP or hits <= SAMPLED_KILLS:
        return every
    stride = hits / (SAMPLED_KILLS - 1)
    # the offset differs per case, so the four cases together cover different points
    offset = CASES.index(case) * stride / len(CASES)
    picked = {min(hits, 1 + round(offset + i * stride)) for i in range(SAMPLED_KILLS - 1)}
    return sorted(picked | {1, hits})


def test_a_clean_update_passes_many_failpoints(references: dict[str, Any]) -> None:
    for case in CASES:
        assert references[case]["hits"] >= 30, case
    assert references["os1-forward"]["hits"] > references["os0-forward"]["hits"]  # the OS steps
    # the full sweep kills at least 200 times: every failpoint of the four cases plus 30 random ones each
    total = sum(references[case]["hits"] for case in CASES) + 30 * 2
    assert total >= 200


@pytest.mark.parametrize("case", CASES)
def test_kill_at_every_failpoint(references: dict[str, Any], tmp_path: Path, case: str) -> None:
    refs = references[case]
    for kill_at in kill_points(refs["hits"], case):
        run_kill_and_restart(refs, tmp_path, kill_at)


def _sigkill_after(seconds: float) -> Callable[[], None]:
    def arm() -> None:
        signal.signal(signal.SIGALRM, lambda *_: os.kill(os.getpid(), signal.SIGKILL))
        signal.setitimer(signal.ITIMER_REAL, seconds)

    return arm


@pytest.mark.parametrize("case", ["os0-forward", "os1-back"])
def test_kill_at_random_moments(references: dict[str, Any], tmp_path: Path, case: str) -> None:
    """SIGKILL at a random instant of the update (not only between steps): mid-write, mid-command."""
    refs = references[case]
    rng = random.Random(f"{case}-20261123")
    for _ in range(RANDOM_KILLS):
        run_kill_and_restart(refs, tmp_path, _sigkill_after(rng.uniform(0.0005, refs["seconds"])))
