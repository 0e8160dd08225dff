"""The agent's state machine: every transition checked against one table, boot retries kept."""

from __future__ import annotations

import itertools

import pytest

from mcd.agent.state import AgentMachine, AgentState, InvalidAgentTransition, allowed

S = AgentState

# the moves the loop makes, and nothing else
EXPECTED = {
    (S.BOOTING, S.BOOTING), (S.BOOTING, S.IDLE), (S.BOOTING, S.UPDATING), (S.BOOTING, S.WAITING_FOR_DRAIN),
    (S.IDLE, S.IDLE), (S.IDLE, S.UPDATING), (S.IDLE, S.WAITING_FOR_DRAIN), (S.IDLE, S.DEGRADED),
    (S.UPDATING, S.IDLE), (S.UPDATING, S.REBOOTING), (S.UPDATING, S.DEGRADED), (S.UPDATING, S.BOOTING),
    (S.WAITING_FOR_DRAIN, S.WAITING_FOR_DRAIN), (S.WAITING_FOR_DRAIN, S.IDLE),
    (S.WAITING_FOR_DRAIN, S.UPDATING), (S.WAITING_FOR_DRAIN, S.DEGRADED),
    (S.DEGRADED, S.DEGRADED), (S.DEGRADED, S.IDLE), (S.DEGRADED, S.UPDATING),
    (S.DEGRADED, S.WAITING_FOR_DRAIN),
}  # fmt: skip


@pytest.mark.parametrize(("old", "new"), list(itertools.product(S, S)), ids=lambda s: s.value)
def test_only_the_loops_moves_are_allowed(old: AgentState, new: AgentState) -> None:
    assert allowed(old, new) is ((old, new) in EXPECTED)


def _at(*path: AgentState) -> AgentMachine:
    machine = AgentMachine()
    for state in path:
        machine.to(state)
    return machine


def test_a_disallowed_move_raises_and_keeps_the_state() -> None:
    machine = _at(S.UPDATING, S.REBOOTING)
    with pytest.raises(InvalidAgentTransition, match="rebooting cannot become updating"):
        machine.to(S.UPDATING)
    assert machine.state is S.REBOOTING
    assert not machine.syncs()


def test_a_failed_boot_sync_is_retried_as_a_boot_sync() -> None:
    machine = AgentMachine()
    assert machine.begin_sync() is True
    machine.to(S.UPDATING)  # the boot path started an update, which failed
    machine.failed()
    assert machine.state is S.BOOTING
    assert machine.begin_sync() is True


def test_a_failed_sync_after_boot_degrades_the_agent_and_the_next_one_is_not_a_boot_sync() -> None:
    machine = _at(S.IDLE)
    assert machine.begin_sync() is False
    machine.to(S.UPDATING)
    machine.failed()
    assert machine.state is S.DEGRADED
    assert machine.begin_sync() is False
    assert machine.syncs()


def test_changes_are_reported_once() -> None:
    seen: list[tuple[AgentState, AgentState]] = []
    machine = AgentMachine(on_change=lambda old, new: seen.append((old, new)))
    machine.to(S.IDLE)
    machine.to(S.IDLE)  # no change: no report
    assert seen == [(S.BOOTING, S.IDLE)]
