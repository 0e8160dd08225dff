"""Running host commands: the only module of mcd that imports subprocess.

Everything that starts a process goes through a Runner, so tests can swap in a recording one
(`tests/recording.py`) that answers from a script and fails on any command nobody expected.
"""

from __future__ import annotations

import logging
import os
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

log = logging.getLogger(__name__)

# How much of a failed command's output goes into the error message.
_TAIL_LINES = 10
_TAIL_CHARS = 2000


@dataclass(frozen=True)
class CommandResult:
    """The outcome of one command: argv, exit status and decoded output."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


def _tail(text: str) -> str:
    lines = text.strip().splitlines()[-_TAIL_LINES:]
    return "\n".join(lines)[-_TAIL_CHARS:]


class CommandError(RuntimeError):
    """A command exited non-zero (or timed out); `.result` has its output."""

    def __init__(self, result: CommandResult, what: str | None = None) -> None:
        self.result = result
        # stderr is where tools explain failures; fall back to stdout for those that print there.
        tail = _tail(result.stderr) or _tail(result.stdout)
        what = what or f"exit {result.returncode}"
        message = f"command failed: {shlex.join(result.argv)} ({what})"
        super().__init__(f"{message}: {tail}" if tail else message)


class CommandTimeout(CommandError):
    """A command ran past its timeout and was killed."""


class Runner(Protocol):
    """Runs a command without a shell and returns its result."""

    def run(
        self,
        argv: Sequence[str],
        *,
        check: bool = True,
        input: bytes | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        """Run `argv`; with `check`, raise CommandError on a non-zero exit. `env` adds variables."""
        ...


def _decode(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", errors="replace")


class SubprocessRunner:
    """The real Runner: no shell, no inherited descriptors or stdin, output captured and decoded."""

    def run(
        self,
        argv: Sequence[str],
        *,
        check: bool = True,
        input: bytes | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        """Run `argv`; `env` is added to the inherited environment; a timeout always raises.

        A missing executable raises FileNotFoundError, so callers can tell "not installed"
        (e.g. no rpm binary) from "failed".
        """
        args = tuple(argv)
        log.debug("running: %s", shlex.join(args))
        try:
            proc = subprocess.run(
                args,
                input=input,
                stdin=None if input is not None else subprocess.DEVNULL,
                capture_output=True,
                timeout=timeout,
                env={**os.environ, **env} if env is not None else None,
                close_fds=True,
                check=False,
            )
        except subprocess.TimeoutExpired as e:
            # subprocess.run has killed the child with SIGKILL by now.
            result = CommandResult(args, -9, _decode(e.stdout), _decode(e.stderr))
            raise CommandTimeout(result, f"timed out after {timeout}s") from None
        result = CommandResult(args, proc.returncode, _decode(proc.stdout), _decode(proc.stderr))
        if check and result.returncode != 0:
            raise CommandError(result)
        return result


class ChrootRunner:
    """Runs every command inside `root` (`chroot <root> …`): the host's own binaries and config.

    The daemon runs in a pod with the node's `/` mounted at a directory; upstream chroots its
    whole process there. Here only the commands that must act as the host (systemctl, rpm-ostree,
    systemd-run) go through this runner; files are already reached through HostRoot.
    """

    def __init__(self, inner: Runner, root: str) -> None:
        self.inner = inner
        self.root = root

    def run(
        self,
        argv: Sequence[str],
        *,
        check: bool = True,
        input: bytes | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        """Run `argv` under `chroot <root>`; same contract as the inner runner."""
        return self.inner.run(
            ["chroot", self.root, *argv], check=check, input=input, timeout=timeout, env=env
        )
