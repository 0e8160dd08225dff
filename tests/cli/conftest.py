"""The CLI tests' shared fixture: `run(*argv)` calls `mcd.cli.main.main` in-process."""

from __future__ import annotations

import pytest
from clirun import Run

from mcd.cli.main import main


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]) -> Run:
    """Run `mcd ARGS...` in-process; returns (exit code, stdout, stderr)."""

    def go(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return go


@pytest.fixture
def sim(capsys: pytest.CaptureFixture[str]) -> Run:
    """Run `mcd-sim ARGS...` (the simulator's command) in-process; returns (exit code, stdout, stderr)."""
    from mcd_sim.cli import main as sim_main

    def go(*argv: str) -> tuple[int, str, str]:
        code = sim_main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return go
