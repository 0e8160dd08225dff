"""`--drift-policy heal`: which paths may be healed, the rewrite, and the rate limits."""

from __future__ import annotations

import base64
import gzip
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from builders import ign_file, mc_object
from drifttools import laid_down

from mcd.agent.watch.heal import Healer
from mcd.agent.watch.managed import managed_paths
from mcd.config.ignition import KEEP_DATA_UP_TO, File
from mcd.host.accounts import Accounts
from mcd.host.files import FileWriter
from mcd.host.root import HostRoot
from mcd.planner.managed_paths import Managed

POLICY_JSON = "/etc/containers/policy.json"
OTHER = "/etc/mcd-test/a.conf"


@dataclass
class FakeSystemd:
    calls: list[tuple[str, str]] = field(default_factory=list)

    def reload(self, unit: str) -> None:
        self.calls.append(("reload", unit))

    def restart(self, unit: str) -> None:
        self.calls.append(("restart", unit))

    def daemon_reload(self) -> None:
        self.calls.append(("daemon-reload", ""))


@dataclass
class FakeHost:
    root: HostRoot
    files: FileWriter
    systemd: FakeSystemd


class Clock:
    now = 1000.0

    def __call__(self) -> float:
        return self.now


def _setup(tmp_path: Path) -> tuple[Path, FakeHost, dict[str, Managed]]:
    obj = mc_object("rendered-a", files=[ign_file(POLICY_JSON, "{}\n"), ign_file(OTHER, "a=1\n")])
    root, mc = laid_down(tmp_path, obj)
    hr = HostRoot(root)
    assert mc.config is not None
    return (
        root,
        FakeHost(hr, FileWriter(hr, Accounts.load(hr)), FakeSystemd()),
        dict(managed_paths(mc.config)),
    )


def test_a_path_whose_policy_reloads_a_service_is_put_back_and_the_service_reloaded(tmp_path: Path) -> None:
    root, host, managed = _setup(tmp_path)
    (root / POLICY_JSON.lstrip("/")).write_text("changed")
    (root / POLICY_JSON.lstrip("/")).chmod(0o600)
    healer = Healer(lambda: host)
    assert healer.heal(managed[POLICY_JSON], "content mismatch")
    assert (root / POLICY_JSON.lstrip("/")).read_text() == "{}\n"
    assert (root / POLICY_JSON.lstrip("/")).stat().st_mode & 0o777 == 0o644
    assert host.systemd.calls == [("reload", "crio.service")]


def test_a_path_whose_policy_reboots_is_not_healed(tmp_path: Path) -> None:
    root, host, managed = _setup(tmp_path)
    (root / OTHER.lstrip("/")).write_text("changed")
    assert not Healer(lambda: host).heal(managed[OTHER], "content mismatch")
    assert (root / OTHER.lstrip("/")).read_text() == "changed"
    assert host.systemd.calls == []


def test_the_same_path_again_within_the_window_is_not_healed(tmp_path: Path) -> None:
    _, host, managed = _setup(tmp_path)
    clock = Clock()
    healer = Healer(lambda: host, window=600.0, clock=clock)
    m = managed[POLICY_JSON]
    assert healer.heal(m, "x")
    clock.now += 599.0
    assert not healer.heal(m, "x")
    clock.now += 2.0
    assert healer.heal(m, "x")


def test_no_more_than_max_per_window_heals(tmp_path: Path) -> None:
    _, host, managed = _setup(tmp_path)
    healer = Healer(lambda: host, max_per_window=0)
    assert not healer.heal(managed[POLICY_JSON], "x")


def test_a_large_file_is_healed_as_it_is_decoded_never_held_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    size = KEEP_DATA_UP_TO + (1 << 20)  # above what the parser keeps: decoded on demand
    blob = base64.b64encode(gzip.compress(bytes(size))).decode()
    big = {
        "path": POLICY_JSON,
        "mode": 420,
        "contents": {"source": f"data:;base64,{blob}", "compression": "gzip"},
    }
    root, mc = laid_down(tmp_path, mc_object("rendered-big", files=[big]))
    assert mc.config is not None
    hr = HostRoot(root)
    host = FakeHost(hr, FileWriter(hr, Accounts.load(hr)), FakeSystemd())
    whole = File.data

    def refuse_whole(self: File) -> bytes:
        assert self.kept, f"{self.path} decoded whole"
        return whole.fget(self)  # type: ignore[attr-defined,no-any-return]

    monkeypatch.setattr(File, "data", property(refuse_whole))
    on_disk = root / POLICY_JSON.lstrip("/")
    on_disk.write_text("changed")
    assert Healer(lambda: host).heal(dict(managed_paths(mc.config))[POLICY_JSON], "content mismatch")
    assert on_disk.stat().st_size == size
    with on_disk.open("rb") as f:
        assert f.read(1 << 16) == bytes(1 << 16)
    assert host.systemd.calls == [("reload", "crio.service")]
