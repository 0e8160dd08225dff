"""Test-wide guards: no external commands unless a test opts in, and e2e tests only on request."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
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


_PYTHON_ENV: list[Path] = []  # the environment this process made (the controller's, under xdist)


def pytest_configure(config: pytest.Config) -> None:
    """`python3` on PATH is a bare environment of this interpreter.

    The stand-ins (tests/standins/rpm-ostree, run hundreds of times a suite) start with
    `#!/usr/bin/env python3`. Through a version manager's shim (pyenv's is a shell script) and
    the site-packages' .pth files, each start took about three times what the stand-in needs:
    its standard library alone. Workers and every process the tests start inherit the directory
    through PATH, so it is made once.
    """
    if os.environ.get("MCD_TESTS_PYTHON3"):
        return
    env = Path(tempfile.mkdtemp(prefix="mcd-tests-python-"))
    real = Path(os.path.realpath(sys.executable))
    # a venv of no packages: no site-packages to scan at each start
    (env / "pyvenv.cfg").write_text(f"home = {real.parent}\ninclude-system-site-packages = false\n")
    (env / "bin").mkdir()
    (env / "bin" / "python3").symlink_to(real)
    os.environ["PATH"] = f"{env / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
    os.environ["MCD_TESTS_PYTHON3"] = str(env)
    _PYTHON_ENV.append(env)


def pytest_unconfigure(config: pytest.Config) -> None:
    for env in _PYTHON_ENV:
        shutil.rmtree(env, ignore_errors=True)
        del os.environ["MCD_TESTS_PYTHON3"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip e2e tests unless MCD_E2E=1: they need the VM from vagrant/."""
    if os.environ.get("MCD_E2E") == "1":
        return
    skip = pytest.mark.skip(reason="e2e test: set MCD_E2E=1 with the vagrant/ VM running")
    for item in items:
        if item.get_closest_marker("e2e") is not None:
            item.add_marker(skip)
