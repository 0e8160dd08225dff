"""The agent's state machine: the rules its transition table keeps, each on its own; boot retries kept."""

from __future__ import annotations

import itertools

import pytest

from mcd.agent.state import AgentMachine, AgentState, InvalidAgentTransition, allowed

S = AgentState

# The rules the table exists for, each stated on its own (not a copy of the table): a test that
# restated mcd's table would pass whatever the table said.


def _moves() -> set[tuple[AgentState, AgentState]]:
    return {(old, new) for old, new in itertools.product(S, S) if allowed(old, new)}


def test_nothing_leaves_rebooting() -> None:
    # the process ends with the reboot: no sync, no state after it
    assert {new for old, new in _moves() if old is S.REBOOTING} == set()


def test_only_an_update_leads_to_a_reboot() -> None:
    assert {old for old, new in _moves() if new is S.REBOOTING} == {S.UPDATING}


def test_booting_is_reentered_only_by_a_failed_boot_sync() -> None:
    # a boot sync that fails (directly, or in the update it started) is retried as a boot sync
    assert {old for old, new in _moves() if new is S.BOOTING} == {S.BOOTING, S.UPDATING}


def test_a_failed_boot_sync_never_degrades_the_agent() -> None:
    assert not allowed(S.BOOTING, S.DEGRADED)


def test_an_update_ends_before_another_begins() -> None:
    assert not allowed(S.UPDATING, S.UPDATING)
    assert not allowed(S.UPDATING, S.WAITING_FOR_DRAIN)  # the drain comes before the update


@pytest.mark.parametrize("state", [s for s in S if s is not S.REBOOTING], ids=lambda s: s.value)
def test_every_state_but_rebooting_may_return_to_idle(state: AgentState) -> None:
    # a sync that finds the node on its desired config ends the wait, the update or the degradation
    assert allowed(state, S.IDLE)


@pytest.mark.parametrize("state", [S.BOOTING, S.IDLE, S.WAITING_FOR_DRAIN, S.DEGRADED], ids=lambda s: s.value)
def test_a_waiting_state_may_be_entered_again(state: AgentState) -> None:
    # a sync that changes nothing leaves the agent where it was
    assert allowed(state, state)


def test_every_state_is_reachable_from_booting() -> None:
    moves = _moves()
    seen, todo = {S.BOOTING}, [S.BOOTING]
    while todo:
        state = todo.pop()
        for new in {new for old, new in moves if old is state} - seen:
            seen.add(new)
            todo.append(new)
    assert seen == set(S)


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
