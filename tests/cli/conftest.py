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
