"""The process after a simulated reboot (issue 26, item 7): the agent starts this very mcd
again, never an `mcd` folder in its working directory, and a SIGTERM received meanwhile ends
the process instead of being lost in the restart."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from mcd.agent import loop
from mcd.agent.sync import Result
from mcd.cli.main import main
from mcd.kube.client import KubeClient
from mcd.runtime.guard import SignalFlag


class Exec(Exception):
    """The process would have been replaced."""


def _agent_rebooting(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, received: int | None) -> dict[str, Any]:
    """`mcd start` whose loop returns at once after a simulated reboot; the exec it asks for."""
    captured: dict[str, Any] = {}

    def execv(path: str, argv: list[str]) -> None:
        captured.update(argv=list(argv), env=dict(os.environ))
        raise Exec

    def execve(path: str, argv: list[str], env: dict[str, str]) -> None:
        captured.update(argv=list(argv), env=dict(env))
        raise Exec

    class Daemon:
        def __init__(self, *args: Any) -> None:
            self.signals = SimpleNamespace(received=received)

        def run(self) -> Result:
            return Result.SIMULATED_REBOOT

    monkeypatch.setattr(os, "execv", execv)
    monkeypatch.setattr(os, "execve", execve)
    monkeypatch.setattr(loop, "Daemon", Daemon)
    monkeypatch.setattr(
        KubeClient, "connect", classmethod(lambda cls, *a, **k: SimpleNamespace(close=lambda: None))
    )
    (tmp_path / "root").mkdir()
    kubeconfig = tmp_path / "kc"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    root = str(tmp_path / "root")
    args = ["start", "--node-name", "n", "--root-mount", root, "--kubeconfig", str(kubeconfig)]
    monkeypatch.setattr(sys, "argv", ["mcd", *args])
    captured["args"] = args
    with contextlib.suppress(Exec):
        captured["rc"] = main(args)
    return captured


@pytest.mark.allow_commands
def test_a_simulated_reboot_starts_this_mcd_not_the_working_directorys(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    captured = _agent_rebooting(monkeypatch, tmp_path, None)
    argv, args = captured["argv"], captured["args"]
    assert argv[-len(args) :] == args
    # a working directory holding some other `mcd` package
    cwd = tmp_path / "elsewhere"
    (cwd / "mcd").mkdir(parents=True)
    (cwd / "mcd" / "__init__.py").write_text("")
    (cwd / "mcd" / "__main__.py").write_text("import sys\nprint('the wrong mcd')\nsys.exit(3)\n")
    again = [*argv[: -len(args)], "--help"]
    done = subprocess.run(
        again, check=False, cwd=cwd, env=captured["env"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the wrong mcd" not in done.stdout and "usage: mcd" in done.stdout


def test_a_sigterm_during_the_simulated_reboot_ends_the_process(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    captured = _agent_rebooting(monkeypatch, tmp_path, signal.SIGTERM)
    assert "argv" not in captured  # no new process
    assert captured["rc"] == 0


def test_a_signal_not_yet_read_when_the_flag_closes_is_kept() -> None:
    assert threading.current_thread() is threading.main_thread()
    seen: list[int] = []
    flag = SignalFlag(seen.append)
    flag.install()
    os.kill(os.getpid(), signal.SIGTERM)  # handled (a byte in the pipe) before the next line
    flag.close()
    assert flag.received == signal.SIGTERM
