"""The agent's own state machine: where its loop is, and which moves it may make. Pure: no I/O.

Zincati's shape (`UpdateAgentMachineState`): the loop's states and their transitions live here,
each transition is checked against one table, and the loop asks the state what to do next (take
the boot path, sync, or wait for the reboot). This is the agent's state, not the node's
annotation (`mcd.node.annotations.NodeState`): a node may be annotated Degraded while
the agent is booting, and the agent is rebooting while the node still says Working.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable, Mapping


class AgentState(enum.Enum):
    # the first sync of this process has not succeeded yet: every sync takes the boot path
    # (upstream's checkStateOnFirstRun) until one does
    BOOTING = "booting"
    # the node runs its desired config; the loop waits for work
    IDLE = "idle"
    # an update was started: the node is Working (or stays Degraded) until it ends
    UPDATING = "updating"
    # a drain the controller runs has not finished: no update until it has
    WAITING_FOR_DRAIN = "waiting-for-drain"
    # a reboot was requested: no more syncs in this boot (upstream's rebootQueued)
    REBOOTING = "rebooting"
    # the last sync failed; it is retried with backoff
    DEGRADED = "degraded"


class InvalidAgentTransition(RuntimeError):
    """A move the table does not allow: a bug in the loop, never an input error."""


_S = AgentState
_ALLOWED: Mapping[AgentState, frozenset[AgentState]] = {
    # a failed boot sync is retried as a boot sync (upstream keeps `booting` until
    # checkStateOnFirstRun succeeds): the agent stays BOOTING
    _S.BOOTING: frozenset({_S.BOOTING, _S.IDLE, _S.UPDATING, _S.WAITING_FOR_DRAIN}),
    _S.IDLE: frozenset({_S.IDLE, _S.UPDATING, _S.WAITING_FOR_DRAIN, _S.DEGRADED}),
    # ... and so is an update the boot path started
    _S.UPDATING: frozenset({_S.IDLE, _S.REBOOTING, _S.DEGRADED, _S.BOOTING}),
    _S.WAITING_FOR_DRAIN: frozenset({_S.WAITING_FOR_DRAIN, _S.IDLE, _S.UPDATING, _S.DEGRADED}),
    # the end of this process's life: a real reboot takes the node down, a simulated one (a
    # sandbox root) starts a new process, which begins BOOTING
    _S.REBOOTING: frozenset(),
    _S.DEGRADED: frozenset({_S.DEGRADED, _S.IDLE, _S.UPDATING, _S.WAITING_FOR_DRAIN}),
}


def allowed(current: AgentState, new: AgentState) -> bool:
    return new in _ALLOWED[current]


class AgentMachine:
    """The current state, moved only through `to`; safe to read from any thread."""

    def __init__(self, on_change: Callable[[AgentState, AgentState], None] | None = None) -> None:
        self._state = AgentState.BOOTING
        self._sync_from = AgentState.BOOTING
        self._lock = threading.Lock()
        self._on_change = on_change

    @property
    def state(self) -> AgentState:
        return self._state

    def to(self, new: AgentState) -> None:
        with self._lock:
            old = self._state
            if not allowed(old, new):
                raise InvalidAgentTransition(f"agent state {old.value} cannot become {new.value}")
            self._state = new
        if old is not new and self._on_change is not None:
            self._on_change(old, new)

    def begin_sync(self) -> bool:
        """A sync starts; True when it must take the boot path."""
        with self._lock:
            self._sync_from = self._state
        return self._sync_from is AgentState.BOOTING

    def failed(self) -> None:
        """The sync failed: a boot sync is tried again as one, any other leaves the agent DEGRADED."""
        self.to(AgentState.BOOTING if self._sync_from is AgentState.BOOTING else AgentState.DEGRADED)

    def syncs(self) -> bool:
        """Whether the loop may sync: not once a reboot is on its way."""
        return self._state is not AgentState.REBOOTING
