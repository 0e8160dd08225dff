"""`mcd pool-controller` replicas as processes, for the process tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


class ControllerProcs:
    def __init__(self, kubeconfig: Path, tmp: Path) -> None:
        self.kubeconfig, self.tmp = kubeconfig, tmp
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, identity: str, *extra: str) -> subprocess.Popen[bytes]:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        argv = [
            sys.executable,
            "-m",
            "mcd",
            "pool-controller",
            "--kubeconfig",
            str(self.kubeconfig),
            "--identity",
            identity,
            "--lease-duration",
            # short, for fast takeovers, yet renewed within its 4 s deadline on a loaded machine (a
            # leader that misses it exits)
            "6",
            "--interval",
            "0.2",
            "-v",
            *extra,
        ]
        with (self.tmp / f"{identity}.log").open("ab") as log:
            proc = subprocess.Popen(argv, stdout=log, stderr=log, env=env, cwd=str(REPO))
        self.procs[identity] = proc
        return proc

    def log(self, identity: str) -> str:
        return (self.tmp / f"{identity}.log").read_text(errors="replace")

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
