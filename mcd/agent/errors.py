"""The agent's errors, and the one place (`classify`, with `Backoff`) that turns an error into a
node state and a retry delay.

Which errors: `McdError`, whose message the node reports, and its kinds `UnreconcilableError`,
`TransientError`, `StoppingError` and `HostCommandError`, raised by the sync, the drain, the node
writer and `NodeApplier` (which turns the executor's `UpdateError` and the host layer's errors
into them); and `ApiError` with `NotFoundError`, `ConflictError` and `GoneError`, raised by the
API client (`mcd.kube.client`) for a refusal or failure of the API server. For whom: the
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

from mcd.config.findings import InputError
from mcd.host.errors import HostError
from mcd.kube.errors import ApiError
from mcd.node.annotations import NodeState
from mcd.node.errors import McdError


class UnreconcilableError(McdError):
    """The desired config cannot be applied in place; nothing was changed on the node."""


class TransientError(McdError):
    """The API server could not be used for now: retry, the node state is not changed."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class StoppingError(McdError):
    """The daemon is stopping (SIGTERM) in the middle of a wait: not the node's fault, not reported."""


class WaitingError(McdError):
    """The update waits for something outside the node (a PodDisruptionBudget that allows no
    disruption right now): the node stays Working with this reason and the sync is retried."""


class HostCommandError(McdError):
    """A host command failed (rpm-ostree, systemctl …): the node is Degraded with its message."""


# errors that say what went wrong on the node or with the API (their text is the reason);
# anything else reaching the loop is a bug in mcd
OPERATIONAL = (McdError, ApiError, HostError, OSError, InputError)


@dataclass(frozen=True)
class Verdict:
    """What to do with an error: the state to report (None: leave it) and the retry delay."""

    state: NodeState | None
    reason: str
    retry_after: float | None = None
    # a programming error, not the node's: its traceback belongs in the log, not on the node
    internal: bool = False


def classify(exc: BaseException) -> Verdict:
    """The verdict for an error raised by a sync (one function, used by the daemon loop only)."""
    if isinstance(exc, UnreconcilableError):
        return Verdict(NodeState.UNRECONCILABLE, str(exc))
    if isinstance(exc, TransientError):
        return Verdict(None, str(exc), exc.retry_after)
    if isinstance(exc, ApiError) and exc.transient:
        return Verdict(None, str(exc), exc.retry_after)
    if isinstance(exc, WaitingError):
        return Verdict(NodeState.WORKING, str(exc))
    if isinstance(exc, OPERATIONAL):
        return Verdict(NodeState.DEGRADED, str(exc) or type(exc).__name__)
    # anything else is a bug in mcd: the operator gets a sentence, the log the traceback
    return Verdict(NodeState.DEGRADED, internal_reason(exc), internal=True)


def internal_reason(exc: BaseException) -> str:
    """The node's reason for a programming error: what it is and where to look, never its repr."""
    return f"internal error in mcd during sync: {type(exc).__name__}; see the agent log"
