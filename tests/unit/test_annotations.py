"""Node annotations, the state machine and upstream's prepUpdateFromCluster rules."""

from __future__ import annotations

import pytest

from mcd.node import annotations as ann
from mcd.node.annotations import NodeState, NodeView, UnknownNodeStateError, decide_update, transition


def test_empty_or_missing_state_reads_as_done() -> None:
    assert NodeState.parse("") is NodeState.DONE
    assert NodeState.parse(None) is NodeState.DONE


def test_unknown_state_is_refused() -> None:
    with pytest.raises(UnknownNodeStateError):
        NodeState.parse("Sleeping")


def test_working_does_not_overwrite_degraded_or_unreconcilable() -> None:
    assert transition(NodeState.DEGRADED, NodeState.WORKING) is NodeState.DEGRADED
    assert transition(NodeState.UNRECONCILABLE, NodeState.WORKING) is NodeState.UNRECONCILABLE
    assert transition(NodeState.DONE, NodeState.WORKING) is NodeState.WORKING


@pytest.mark.parametrize("start", list(NodeState))
def test_every_state_can_end_done_or_degraded(start: NodeState) -> None:
    assert transition(start, NodeState.DONE) is NodeState.DONE
    assert transition(start, NodeState.DEGRADED) is NodeState.DEGRADED


def test_reason_is_cut_at_2000_characters_as_upstream() -> None:
    assert ann.truncate_reason("x" * 2500) == "x" * 2000
    assert ann.state_annotations(NodeState.DEGRADED, "é" * 2001)[ann.REASON] == "é" * 2000


def test_degraded_node_in_its_config_is_updated_again() -> None:
    node = NodeView("n", {ann.CURRENT_CONFIG: "a", ann.DESIRED_CONFIG: "a", ann.STATE: "Degraded"})
    assert decide_update(node, "a", "").update


def test_node_view_reads_a_node_object() -> None:
    obj = {
        "metadata": {
            "name": "w", "resourceVersion": "7",
            "annotations": {ann.DESIRED_DRAIN: "drain-x", ann.CONTROL_PLANE_TOPOLOGY: "SingleReplica"},
        },
        "spec": {"unschedulable": True},
    }  # fmt: skip
    view = NodeView.from_object(obj)
    assert (view.name, view.resource_version, view.unschedulable) == ("w", "7", True)
    assert view.drain_pending and view.single_replica and view.topology == "SingleReplica"
    weird = {"metadata": {"annotations": {ann.CONTROL_PLANE_TOPOLOGY: "Weird"}}}
    assert not NodeView.from_object(weird).single_replica
    assert NodeView.from_object(weird).topology == "HighlyAvailable"
