"""Room for a fleet: `mcd-sim simulate --nodes N` says what to raise before it starts N agents
(inotify instances, open files) instead of stopping part way, and raises what it may itself."""

from __future__ import annotations

import resource
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcd_sim import room
from mcd_sim.cli import main


@pytest.fixture
def instances(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    limit = tmp_path / "max_user_instances"
    monkeypatch.setattr(room, "INOTIFY_INSTANCES", limit)
    return limit


@pytest.fixture
def low_soft_limit() -> Iterator[int]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    lowered = min(512, hard if hard != resource.RLIM_INFINITY else 512)
    resource.setrlimit(resource.RLIMIT_NOFILE, (lowered, hard))
    yield hard
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_too_few_inotify_instances_name_the_sysctl_to_raise(instances: Path) -> None:
    instances.write_text("128\n")
    assert room.inotify_room(100) is None
    message = room.inotify_room(200)
    assert message is not None
    assert "fs.inotify.max_user_instances is 128" in message
    assert "sysctl -w fs.inotify.max_user_instances=1024" in message


def test_no_procfs_value_is_no_objection(instances: Path) -> None:
    assert room.inotify_room(10_000) is None  # the file is absent
    instances.write_text("many")
    assert room.inotify_room(10_000) is None


def test_the_open_file_limit_is_raised_to_the_hard_limit(low_soft_limit: int) -> None:
    assert room.open_files_room(10) is None
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == low_soft_limit


def test_more_agents_than_the_hard_limit_allows_is_said(low_soft_limit: int) -> None:
    if low_soft_limit == resource.RLIM_INFINITY:
        pytest.skip("no hard limit on open files here")
    message = room.open_files_room(low_soft_limit)
    assert message is not None and f"its hard limit is {low_soft_limit}" in message


def test_simulate_refuses_a_fleet_the_machine_cannot_hold_before_starting_it(
    instances: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    instances.write_text("8\n")
    workdir = tmp_path / "fleet"
    assert main(["simulate", "--nodes", "20", "--workdir", str(workdir)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("mcd-sim: ") and "fs.inotify.max_user_instances is 8" in err
    assert not workdir.exists()  # nothing started
