"""The issue's gate at full size: 20 agents, maxUnavailable 2, a PodDisruptionBudget, the pool
controller killed (SIGKILL) mid-rollout and another started. About 1.5
minutes on two cores, so not in `make test`: `make fleet-test` (run by .ci/run) sets
MCD_FLEET_TEST=1."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from mcd_sim.cli import main

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(os.environ.get("MCD_FLEET_TEST") != "1", reason="make fleet-test (MCD_FLEET_TEST=1)")
@pytest.mark.allow_commands
def test_twenty_nodes_two_at_a_time_never_break_the_limit_or_the_budget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["simulate", "--nodes", "20", "--max-unavailable", "2", "--pdb", "maxUnavailable=1",
            "--pod-start", "1", "--old", str(REPO / "examples" / "old.yaml"),
            "--new", str(REPO / "examples" / "reboot.yaml"), "--workdir", str(tmp_path), "-o", "json",
            "--picture", str(tmp_path / "rollout.svg"), "--kill-controller-after", "6"]  # fmt: skip
    code = main(argv)
    out = capsys.readouterr().out
    assert code == 0, out
    result = json.loads(out)
    assert result["maxConcurrentlyUnavailable"] == 2, result
    assert result["pdbViolations"] == 0 and result["pdbs"][0]["minHealthy"] >= 19
    assert result["allDone"] and result["poolUpdated"]
    assert all(n["rebootEnd"] is not None for n in result["perNode"])
    # the controller killed after 6 nodes lost nothing: its successor moved every other node once
    assert result["controllerKilledAfterNodes"] == 6
    assert set(result["desiredConfigSetPerNode"].values()) == {1}
    assert len(result["desiredConfigSetPerNode"]) == 20
