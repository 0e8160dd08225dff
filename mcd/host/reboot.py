"""Rebooting the node through a transient systemd unit (upstream's way, spec §6).

The systemd-run variant orders the reboot after ostree-finalize-staged.service on CoreOS, so the
staged deployment is written out before the machine goes down (OCPBUGS-51150). Kubelet is not
stopped here: graceful node shutdown (systemd inhibitor locks) takes care of the pods.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NoReturn, Protocol

from mcd.host.runner import CommandError, Runner
from mcd.planner.steps import reboot_command

log = logging.getLogger(__name__)

REBOOT_FAILED = "reboot command failed, something is seriously wrong"


class RebootError(RuntimeError):
    """The reboot could not be requested; the message is upstream's, the cause is chained."""


class Reboots(Protocol):
    """A way to reboot; `failed_reboots` feeds the `mcd_reboots_failed_total` metric."""

    failed_reboots: int

    def reboot(self, rationale: str) -> None:
        """Request the reboot; RebootError when it could not be requested."""
        ...


class Rebooter:
    """Reboots with `systemd-run … /bin/sh -c "systemctl reboot"` exactly as upstream does."""

    def __init__(self, runner: Runner, coreos: bool = True) -> None:
        self._runner = runner
        self._coreos = coreos
        self.failed_reboots = 0

    def reboot(self, rationale: str) -> None:
        """Queue the reboot; returns once systemd accepted the job (the machine goes down later)."""
        log.info("initiating reboot: %s", rationale)
        try:
            self._runner.run(reboot_command(rationale, self._coreos))
        except (CommandError, OSError) as e:
            self.failed_reboots += 1
            log.error("reboot failed: %s", e)
            raise RebootError(REBOOT_FAILED) from e
        log.info("reboot successful")


def restart_command(args: Sequence[str], env: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    """The command line and environment that start this very mcd again with `args` (after a
    simulated reboot, the new process takes the boot path).

    `python -m mcd` alone would import whatever `mcd` folder the working directory holds (`-m`
    puts it first on the path): `-P` leaves it out, and the directory this process's `mcd` was
    imported from goes first on PYTHONPATH, so the same code runs again wherever the agent was
    started from.
    """
    source = str(Path(__file__).resolve().parents[2])  # the directory holding this `mcd` package
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != source]
    new_env = dict(env)
    new_env["PYTHONPATH"] = os.pathsep.join([source, *paths])
    return [sys.executable, "-P", "-m", "mcd", *args], new_env


def restart_process(args: Sequence[str]) -> NoReturn:
    """Replace this process by a new run of the same mcd with `args` (`restart_command`)."""
    argv, env = restart_command(args, os.environ)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(argv[0], argv, env)
