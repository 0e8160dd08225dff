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
    assert classify(KeyError()).reason == "KeyError"


def test_backoff_doubles_from_one_second_to_a_minute_and_resets() -> None:
    b = Backoff()
    assert [b.next_delay() for _ in range(8)] == [1, 2, 4, 8, 16, 32, 60, 60]
    b.reset()
    assert b.next_delay() == 1
    assert b.next_delay(retry_after=10) == 10
