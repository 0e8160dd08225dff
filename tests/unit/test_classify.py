"""One place turns errors into node states and retry delays."""

from __future__ import annotations

import pytest

from mcd.agent.errors import TransientError, UnreconcilableError, classify
from mcd.kube.backoff import Backoff
from mcd.kube.errors import ApiError, ConflictError, NotFoundError
from mcd.node.annotations import NodeState
from mcd.node.errors import McdError


def test_unreconcilable_config_makes_the_node_unreconcilable() -> None:
    v = classify(UnreconcilableError("can't reconcile config a with b"))
    assert (v.state, v.reason) == (NodeState.UNRECONCILABLE, "can't reconcile config a with b")


@pytest.mark.parametrize(
    "exc", [McdError("content mismatch"), RuntimeError("boom"), NotFoundError(404, "gone MC")]
)
def test_other_errors_degrade_the_node(exc: Exception) -> None:
    assert classify(exc).state is NodeState.DEGRADED


TRANSIENT = [
    ApiError(0, "reset"),
    ApiError(503, "down"),
    ConflictError(409, "x"),
    ApiError(429, "slow", retry_after=7),
    TransientError("later", 3),
]


@pytest.mark.parametrize("exc", TRANSIENT)
def test_api_trouble_leaves_the_state_alone(exc: Exception) -> None:
    assert classify(exc).state is None


def test_an_error_without_message_still_gives_a_reason() -> None:
    assert classify(McdError("")).reason == "McdError"


@pytest.mark.parametrize("exc", [KeyError("spec"), TypeError("'NoneType' object is not subscriptable")])
def test_a_programming_error_is_an_operator_sentence_not_its_repr(exc: Exception) -> None:
    v = classify(exc)
    assert v.state is NodeState.DEGRADED and v.internal
    assert v.reason == f"internal error in mcd during sync: {type(exc).__name__}; see the agent log"


def test_a_budget_that_blocks_the_drain_keeps_the_node_working() -> None:
    from mcd.agent.errors import WaitingError

    v = classify(WaitingError("drain blocked: PodDisruptionBudget shop/web allows 0 disruptions"))
    assert (v.state, v.internal) == (NodeState.WORKING, False)
    assert "shop/web" in v.reason


def test_backoff_doubles_from_one_second_to_a_minute_and_resets() -> None:
    b = Backoff()
    assert [b.next_delay() for _ in range(8)] == [1, 2, 4, 8, 16, 32, 60, 60]
    b.reset()
    assert b.next_delay() == 1
    assert b.next_delay(retry_after=10) == 10
