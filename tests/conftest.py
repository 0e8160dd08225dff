"""Test-wide guards: no external commands unless a test opts in, and e2e tests only on request."""

from __future__ import annotations

import os
import subprocess
from typing import Any, NoReturn

import pytest


class CommandsNotAllowedError(RuntimeError):
    """Raised when a test runs an external command without `@pytest.mark.allow_commands`."""


def _refuse(what: str) -> Any:
    def refuse(*args: Any, **kwargs: Any) -> NoReturn:
        shown = args[0] if args else kwargs.get("args", kwargs.get("path", "?"))
        raise CommandsNotAllowedError(
            f"test tried to run an external command via {what}: {shown!r}; "
            "use a recording runner, or mark the test @pytest.mark.allow_commands"
        )

    return refuse


@pytest.fixture(autouse=True)
def _no_external_commands(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every way of starting a process fail, so a unit test can never touch the host.

    subprocess.run/call/check_output, os.popen and asyncio's subprocesses all go through
    subprocess.Popen, so patching it covers them.
    """
    if request.node.get_closest_marker("allow_commands") is None:
        monkeypatch.setattr(subprocess, "Popen", _refuse("subprocess.Popen"))
        for name in ("system", "posix_spawn", "posix_spawnp"):
            monkeypatch.setattr(os, name, _refuse(f"os.{name}"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip e2e tests unless MCD_E2E=1: they need the VM from vagrant/."""
    if os.environ.get("MCD_E2E") == "1":
        return
    skip = pytest.mark.skip(reason="e2e test: set MCD_E2E=1 with the vagrant/ VM running")
    for item in items:
        if item.get_closest_marker("e2e") is not None:
            item.add_marker(skip)
