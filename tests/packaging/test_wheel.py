"""The node's wheel carries the agent and nothing of the simulator; without it, the simulator's
commands say how to get it (issue: the simulator out of the product)."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.allow_commands


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(REPO),
         "-w", str(out)],
        check=True, capture_output=True, cwd=out,
    )  # fmt: skip
    (built,) = out.glob("mcd-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """An environment that sees the wheel's mcd and the dependencies, not the repository's
    editable installs (no site processing: their .pth files are not read)."""
    target = tmp_path_factory.mktemp("site")
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(target)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(target), sysconfig.get_paths()["purelib"]]))
    yield env


def test_the_wheel_has_no_simulator_code(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    assert any(n == "mcd/agent/loop.py" for n in names)
    assert any(n.startswith("mcd/config/schemas/") for n in names)
    assert [n for n in names if n.startswith("mcd_sim/") or "apiserver" in n or "sandbox" in n] == []


def _mcd(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-S", "-m", "mcd", *args],
        env=env, capture_output=True, text=True, cwd="/", check=False,
    )  # fmt: skip


def test_help_says_how_to_get_the_simulator(installed: dict[str, str]) -> None:
    result = _mcd(installed, "--help")
    assert result.returncode == 0, result.stderr
    assert "pip install ./sim" in " ".join(result.stdout.split())


SIM_COMMANDS = [["sandbox", "/nonexistent/x"], ["simulate"], ["sim-cluster", "--kubeconfig", "k"]]


@pytest.mark.parametrize("args", SIM_COMMANDS)
def test_the_simulator_commands_say_where_they_moved(installed: dict[str, str], args: list[str]) -> None:
    """They left mcd for the mcd-sim distribution's own command (issue 26): a node install's mcd
    says where they went, exit 2, and loads nothing of the simulator to say it."""
    result = _mcd(installed, *args)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        f"mcd: `mcd {args[0]}` moved to the simulator's own command: `mcd-sim {args[0]}` "
        "(pip install ./sim from the mcd repository)\n"
    )


def test_the_node_commands_run_from_the_wheel(installed: dict[str, str]) -> None:
    result = _mcd(installed, "validate", str(REPO / "examples" / "new.yaml"))
    assert (result.returncode, result.stderr) == (0, "")
