"""Running the agent as a real process against a test API server on a sandbox root."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from builders import mc_object
from mcd_sim.sandbox import make_sandbox_root
from recording import RecordingRunner

from mcd.config.machineconfig import empty_machineconfig, machineconfig_from_object
from mcd.host import state
from mcd.host.root import HostRoot
from mcd.host.runner import Runner
from mcd.node import annotations as ann
from mcd.update.transaction import Host, update

REPO = Path(__file__).resolve().parents[2]
NODE = "worker-0"


def lay_down(root: Path, obj: dict[str, Any], runner: Runner | None = None) -> None:
    """Put config `obj` on the root as a finished update would (files and currentconfig)."""
    mc = machineconfig_from_object(json.loads(json.dumps(obj)), "test")
    host = Host.for_root(HostRoot(root), runner or RecordingRunner())
    update(host, empty_machineconfig(), mc, legacy=True, skip_reboot=True)
    state.clear_reboot(HostRoot(root))  # the node booted into it


def make_root(tmp: Path, obj: dict[str, Any], runner: Runner | None = None) -> Path:
    root = make_sandbox_root(tmp / "root")
    lay_down(root, obj, runner)
    return root


def config_a() -> dict[str, Any]:
    return mc_object(
        "rendered-worker-a", files=[_file("/etc/mcd-test/a.conf", "a=1\n")], ssh_keys=["ssh-ed25519 AAAA one"]
    )


def _file(path: str, text: str) -> dict[str, Any]:
    from builders import ign_file

    return ign_file(path, text)


def done_on(config: str) -> Callable[[dict[str, Any]], bool]:
    def pred(node: dict[str, Any]) -> bool:
        a = node["metadata"].get("annotations") or {}
        return a.get(ann.STATE) == "Done" and a.get(ann.CURRENT_CONFIG) == config

    return pred


def in_state(state: str) -> Callable[[dict[str, Any]], bool]:
    def pred(node: dict[str, Any]) -> bool:
        return (node["metadata"].get("annotations") or {}).get(ann.STATE) == state

    return pred


class Agent:
    """`mcd start` as a child process; its log goes to a file the test can read."""

    def __init__(
        self,
        root: Path,
        kubeconfig: Path,
        log: Path,
        *extra: str,
        env: dict[str, str] | None = None,
        kill_at: int | None = None,
        verbosity: tuple[str, ...] = ("-vv",),
        metrics_url: str = "127.0.0.1:0",
        command: Sequence[str] = (),
    ) -> None:
        """`command`: how mcd is run (an installed `mcd`, say); by default `python -m mcd` of the
        checkout (on PYTHONPATH)."""
        self.command = tuple(command)
        self.root, self.kubeconfig, self.log_path = root, kubeconfig, log
        self.verbosity, self.metrics_url = verbosity, metrics_url
        self.extra = extra
        self.env = env or {}
        self.kill_at = kill_at
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Agent:
        env = dict(os.environ, NODE_NAME=NODE, **({} if self.command else {"PYTHONPATH": str(REPO)}))
        env.update(self.env)
        env.pop("NOTIFY_SOCKET", None)
        command = self.command or (sys.executable, "-m", "mcd")
        if self.kill_at is not None:
            command = (sys.executable, str(Path(__file__).with_name("crashing_mcd.py")), str(self.kill_at))
        argv = [
            *command, "start",
            "--kubeconfig", str(self.kubeconfig),
            "--root-mount", str(self.root),
            "--metrics-url", self.metrics_url,
            "--kubelet-healthz-enabled=false",
            *self.verbosity, *self.extra,
        ]  # fmt: skip
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(argv, stdout=log, stderr=log, env=env, cwd=str(REPO))
        log.close()
        return self

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_log(self, text: str, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.log:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"agent exited ({self.proc.returncode}) before logging {text!r}:\n{self.log}"
                )
            if time.monotonic() > deadline:
                raise AssertionError(f"agent did not log {text!r}:\n{self.log[-4000:]}")
            time.sleep(0.05)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
                raise AssertionError(f"agent ignored SIGTERM:\n{self.log[-4000:]}") from None
        return self.proc.returncode
