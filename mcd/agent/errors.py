"""The agent's errors, and the one place (`classify`, with `Backoff`) that turns an error into a
node state and a retry delay.

Which errors: `McdError`, whose message the node reports, and its kinds `UnreconcilableError`,
`TransientError`, `StoppingError` and `HostCommandError`, raised by the sync, the drain, the node
writer and `NodeApplier` (which turns the executor's `UpdateError` and the host layer's errors
into them); and `ApiError` with `NotFoundError`, `ConflictError` and `GoneError`, raised by the
API client (`mcd.agent.kube.client`) for a refusal or failure of the API server. For whom: the
agent's loops (`mcd.agent.loop`, `mcd.agent.local`), which report them on the node or in the
status record; nothing outside `mcd.agent` imports them (the CLI prints one that ends a command
as `mcd: MESSAGE`).

Upstream sorts every sync error once (`updateErrorState`): an unreconcilable config makes the
node Unreconcilable, anything else Degraded, and the node is synced again with backoff. mcd
adds one kind: an API server that cannot be reached or answers 5xx is `Transient` and leaves
the node state alone, because writing Degraded would need the very API that is failing and
the problem is not the node's.
"""

from __future__ import annotations

from dataclasses import dataclass

from mcd.agent.kube.annotations import NodeState

# upstream's workqueue: exponential per-item backoff from 1 s to 60 s
BACKOFF_START = 1.0
BACKOFF_MAX = 60.0


class McdError(RuntimeError):
    """An error the daemon reports on the node (Degraded with this message as the reason)."""


class UnreconcilableError(McdError):
    """The desired config cannot be applied in place; nothing was changed on the node."""


class TransientError(McdError):
    """The API server could not be used for now: retry, the node state is not changed."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class StoppingError(McdError):
    """The daemon is stopping (SIGTERM) in the middle of a wait: not the node's fault, not reported."""


class HostCommandError(McdError):
    """A host command failed (rpm-ostree, systemctl …): the node is Degraded with its message."""


@dataclass(frozen=True)
class Verdict:
    """What to do with an error: the state to report (None: leave it) and the retry delay."""

    state: NodeState | None
    reason: str
    retry_after: float | None = None


def classify(exc: BaseException) -> Verdict:
    """The verdict for an error raised by a sync (one function, used by the daemon loop only)."""
    if isinstance(exc, UnreconcilableError):
        return Verdict(NodeState.UNRECONCILABLE, str(exc))
    if isinstance(exc, TransientError):
        return Verdict(None, str(exc), exc.retry_after)
    if isinstance(exc, ApiError) and exc.transient:
        return Verdict(None, str(exc), exc.retry_after)
    return Verdict(NodeState.DEGRADED, str(exc) or type(exc).__name__)


class Backoff:
    """Upstream's per-item rate limiter: 1 s, 2 s, 4 s … capped at 60 s, reset on success."""

    def __init__(self, start: float = BACKOFF_START, cap: float = BACKOFF_MAX) -> None:
        self.start, self.cap = start, cap
        self.failures = 0

    def next_delay(self, retry_after: float | None = None) -> float:
        delay: float = min(self.cap, self.start * (2.0**self.failures))
        self.failures += 1
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.cap))
        return delay

    def reset(self) -> None:
        self.failures = 0


class ApiError(McdError):
    """The API server refused or failed a request; `status` 0 means it could not be reached."""

    def __init__(self, status: int, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after

    @property
    def transient(self) -> bool:
        """Worth retrying as is: unreachable, throttled, conflicting or failing server side."""
        return self.status in (0, 409, 429) or self.status >= 500


class NotFoundError(ApiError):
    pass


class ConflictError(ApiError):
    pass


class GoneError(ApiError):
    """410: the resourceVersion a watch resumed from is too old; list again."""
