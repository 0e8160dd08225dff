"""A scripted Runner for tests: records every call and answers from expectations."""

from __future__ import annotations

import shlex
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from mcd.host.runner import CommandError, CommandResult


class UnexpectedCommand(AssertionError):
    """A RecordingRunner was asked to run a command that no expectation covers."""


@dataclass(frozen=True)
class RecordedCall:
    """One call seen by a RecordingRunner."""

    argv: tuple[str, ...]
    input: bytes | None
    env: Mapping[str, str] | None
    timeout: float | None


@dataclass
class _Expectation:
    prefix: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    raises: BaseException | None
    remaining: int | None  # None: answers any number of calls


@dataclass
class RecordingRunner:
    """A scripted Runner for tests and the simulator; records every call in `.calls`.

    A call is answered by the expectation with the longest matching argv prefix that still has
    uses left; among equal prefixes the earliest registered goes first, so a sequence of replies
    to the same command can be scripted with `times=1`.
    """

    calls: list[RecordedCall] = field(default_factory=list, init=False)
    _expected: deque[_Expectation] = field(default_factory=deque, init=False, repr=False)

    def expect(
        self,
        prefix: Sequence[str],
        returncode: int = 0,
        stdout: str = "",
        stderr: str = "",
        *,
        times: int | None = None,
        raises: BaseException | None = None,
    ) -> RecordingRunner:
        """Answer commands starting with `prefix`; `raises` simulates e.g. a missing executable."""
        self._expected.append(_Expectation(tuple(prefix), returncode, stdout, stderr, raises, times))
        return self

    @property
    def commands(self) -> list[tuple[str, ...]]:
        """The argv of every call, in order."""
        return [call.argv for call in self.calls]

    def pending(self) -> list[tuple[str, ...]]:
        """Prefixes of expectations with a fixed number of uses that were not all consumed."""
        return [e.prefix for e in self._expected if e.remaining]

    def run(
        self,
        argv: Sequence[str],
        *,
        check: bool = True,
        input: bytes | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        """Record the call and answer it from the script."""
        args = tuple(argv)
        self.calls.append(RecordedCall(args, input, dict(env) if env is not None else None, timeout))
        candidates = [e for e in self._expected if args[: len(e.prefix)] == e.prefix and e.remaining != 0]
        if not candidates:
            known = "; ".join(shlex.join(e.prefix) for e in self._expected if e.remaining != 0) or "nothing"
            raise UnexpectedCommand(f"unexpected command: {shlex.join(args)} (expected: {known})")
        chosen = max(candidates, key=lambda e: len(e.prefix))  # max keeps the first of equals
        if chosen.remaining is not None:
            chosen.remaining -= 1
        if chosen.raises is not None:
            raise chosen.raises
        result = CommandResult(args, chosen.returncode, chosen.stdout, chosen.stderr)
        if check and result.returncode != 0:
            raise CommandError(result)
        return result
