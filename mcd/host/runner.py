"""Running host commands: the only module of mcd that imports subprocess.

Everything that starts a process goes through a Runner, so tests can swap in a recording one
(`tests/recording.py`) that answers from a script and fails on any command nobody expected.

Every command has a timeout (`COMMAND_TIMEOUTS`, by the program's name; a caller may give its
own): a hung `rpm-ostree` or `systemctl` must not hold the agent's loop forever while the loop
still looks alive to systemd's watchdog. A command past its timeout is killed with its whole
process group (it runs in a session of its own, so its children go too) and raises
CommandTimeout naming the command and the timeout.
"""

from __future__ import annotations

import logging
import os
import shlex
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

log = logging.getLogger(__name__)

# How much of a failed command's output goes into the error message.
_TAIL_LINES = 10
_TAIL_CHARS = 2000

# Seconds a command may run, by program name. rpm-ostree pulls and stages a whole OS image
# (rebase, upgrade), so it gets the longest; systemctl waits for one job (systemd's own start
# timeout is 90 s by default); anything else (update-ca-trust, usermod, systemd-run, chroot's
# own start) is short.
COMMAND_TIMEOUTS: dict[str, float] = {
    "rpm-ostree": 3600.0,
    "systemctl": 300.0,
    "systemd-run": 300.0,
}
DEFAULT_TIMEOUT = 120.0
# after the kill, how long the output pipes are read before giving up on them
_DRAIN_SECONDS = 5.0


def command_timeout(argv: Sequence[str]) -> float:
    """The timeout of `argv` by its program's name (`chroot ROOT prog …` is `prog`'s)."""
    args = list(argv)
    while len(args) >= 2 and os.path.basename(args[0]) == "chroot":
        args = args[2:]
    name = os.path.basename(args[0]) if args else ""
    return COMMAND_TIMEOUTS.get(name, DEFAULT_TIMEOUT)


def longest_timeout() -> float:
    """The longest any command may run: a loop busy longer than this (plus its own work) is stuck."""
    return max(DEFAULT_TIMEOUT, *COMMAND_TIMEOUTS.values())


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
        """Run `argv` for at most `timeout` seconds (None: `command_timeout(argv)`); `env` is added
        to the inherited environment; a timeout always raises CommandTimeout.

        A missing executable raises FileNotFoundError, so callers can tell "not installed"
        (e.g. no rpm binary) from "failed".
        """
        args = tuple(argv)
        limit = command_timeout(args) if timeout is None else timeout
        log.debug("running: %s", shlex.join(args))
        proc = subprocess.Popen(
            args,
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **env} if env is not None else None,
            close_fds=True,
            # a session of its own: the timeout kills the command's children too
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(input, timeout=limit)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, err = _leftover_output(proc)
            result = CommandResult(args, -9, _decode(out), _decode(err))
            raise CommandTimeout(result, f"timed out after {limit:g}s, killed") from None
        except BaseException:
            _kill_group(proc)
            raise
        result = CommandResult(args, proc.returncode, _decode(out), _decode(err))
        if check and result.returncode != 0:
            raise CommandError(result)
        return result


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL to the command's process group (its session), then reap the command."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    try:
        proc.wait(_DRAIN_SECONDS)
    except subprocess.TimeoutExpired:
        log.error("command %d did not die after SIGKILL", proc.pid)


def _leftover_output(proc: subprocess.Popen[bytes]) -> tuple[bytes, bytes]:
    """What a killed command wrote; nothing when a child outside its group still holds the pipes."""
    try:
        return proc.communicate(timeout=_DRAIN_SECONDS)
    except subprocess.TimeoutExpired:
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        return b"", b""


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


class Spawned:
    """A long-running child started by `spawn`: its pid, its output file, terminate and wait."""

    def __init__(self, proc: subprocess.Popen[bytes], output: Path) -> None:
        self._proc = proc
        self.output = output

    @property
    def pid(self) -> int:
        return self._proc.pid

    def poll(self) -> int | None:
        """The exit status, or None while it runs."""
        return self._proc.poll()

    def terminate(self) -> None:
        """SIGTERM (the agent stops cleanly on it); nothing if it has exited already."""
        if self._proc.poll() is None:
            self._proc.terminate()

    def kill(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()

    def wait(self, timeout: float | None = None) -> int | None:
        """The exit status, or None if it still runs after `timeout` seconds."""
        try:
            return self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None


def spawn(
    argv: Sequence[str], *, output: Path, env: Mapping[str, str] | None = None, cwd: Path | None = None
) -> Spawned:
    """Start `argv` in the background (no shell, no stdin), stdout and stderr appended to `output`.

    For a process that outlives one call (the agent in `mcd simulate`); `Runner.run` is for
    commands that finish.
    """
    args = tuple(argv)
    log.debug("spawning: %s", shlex.join(args))
    with output.open("ab") as out:  # the child keeps its own descriptor
        proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            env={**os.environ, **env} if env is not None else None,
            cwd=cwd,
            close_fds=True,
        )
    return Spawned(proc, output)
