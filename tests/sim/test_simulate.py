"""`mcd simulate` end to end: the in-process cluster, the agent as a real process, the shipped examples."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from mcd_sim.cli import main

REPO = Path(__file__).resolve().parents[2]
OLD, NEW = REPO / "examples" / "old.yaml", REPO / "examples" / "new.yaml"


def _name(path: Path) -> str:
    return str(yaml.safe_load(path.read_text())["metadata"]["name"])


@pytest.mark.allow_commands  # it spawns `python -m mcd start` (and kubectl when installed)
def test_simulate_updates_the_node_from_old_to_new(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["simulate", "--workdir", str(tmp_path), "--old", str(OLD), "--new", str(NEW), "--timeout", "30"]
    code = main(argv)
    text = capsys.readouterr().out
    assert code == 0, text
    lines = text.splitlines()
    new = _name(NEW)
    desired = next(i for i, line in enumerate(lines) if line.endswith(f"node desiredConfig={new}"))
    working = next(i for i, line in enumerate(lines) if "state=Working" in line)
    done = next(i for i, line in enumerate(lines) if f"currentConfig={new} state=Done" in line)
    assert desired < working < done, text
    assert "event Normal NodeDone: Setting node worker-0, currentConfig " + new in text
    assert "KUBECONFIG=" in text and "agent stopped (SIGTERM)" in text
    # the agent's plan is the one on the node disruption policy, not --once-from's legacy table
    assert "mode: node disruption policy" in text
