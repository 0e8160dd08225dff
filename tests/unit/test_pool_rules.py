"""The pool controller's pure rules (`mcd.controller.rollout`, `status`, `selectors`), from
upstream's node controller: maxUnavailable, which node is unavailable, which pool a node is in,
the order nodes are taken in, and the status conditions."""

from __future__ import annotations

from typing import Any

import pytest

from mcd.config.selector import selector_text
from mcd.config.selector import selects as matches
from mcd.controller import rollout
from mcd.controller.status import pool_status, set_condition
from mcd.node import annotations as ann

Obj = dict[str, Any]
READY = [{"type": "Ready", "status": "True"}]


def node(name: str = "n", *, current: str = "a", desired: str = "a", state: str = "Done",
         conditions: list[Obj] | None = None, unschedulable: bool = False, **extra: str) -> Obj:  # fmt: skip
    notes = {ann.CURRENT_CONFIG: current, ann.DESIRED_CONFIG: desired, ann.STATE: state, **extra}
    return {"metadata": {"name": name, "annotations": {k: v for k, v in notes.items() if v is not None},
                         "labels": {}, "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"unschedulable": True} if unschedulable else {},
            "status": {"conditions": READY if conditions is None else conditions}}  # fmt: skip


def pool(**spec: Any) -> Obj:
    return {"metadata": {"name": "worker", "generation": 3},
            "spec": {"configuration": {"name": "b"}, **spec}}  # fmt: skip


@pytest.mark.parametrize(
    ("value", "total", "expected"),
    [(None, 10, 1), (3, 10, 3), (0, 10, 1), ("50%", 5, 2), ("10%", 5, 1), ("100%", 4, 4), ("0%", 4, 1)],
)
def test_max_unavailable_is_an_int_or_a_percentage_rounded_down_and_never_zero(
    value: Any, total: int, expected: int
) -> None:
    spec = {} if value is None else {"maxUnavailable": value}
    assert rollout.max_unavailable(pool(**spec), total) == expected


@pytest.mark.parametrize("value", ["half", "5", "5.5%", True, 1.5])
def test_a_bad_max_unavailable_names_the_pool_and_field(value: Any) -> None:
    with pytest.raises(rollout.PoolError, match=r"^pool worker: spec\.maxUnavailable: "):
        rollout.max_unavailable(pool(maxUnavailable=value), 3)


@pytest.mark.parametrize(
    ("n", "unavailable"),
    [
        (node(), False),  # Done on its desired config
        (node(desired="b"), True),  # asked for b, not there yet
        (node(desired="b", state="Working"), True),
        (node(desired="b", state="Degraded"), False),  # failing on b: counted apart
        (node(state="Degraded"), True),  # degraded on its own config: not done
        (node(unschedulable=True), True),
        (node(conditions=[{"type": "Ready", "status": "False"}]), True),
        (node(conditions=[*READY, {"type": "DiskPressure", "status": "True"}]), True),
        (node(conditions=[*READY, {"type": "NetworkUnavailable", "status": "Unknown"}]), True),
        # a node mcd never ran on (upstream's always have both configs): available as it runs
        (node(current=None, desired=None, state=None), False),
        (node(**{ann.DESIRED_IMAGE: "img"}), True),  # an image asked, none reported
    ],
)
def test_unavailable_as_upstream(n: Obj, unavailable: bool) -> None:
    assert rollout.is_unavailable(n) is unavailable


def test_nodes_are_taken_by_zone_then_creation_time_then_name() -> None:
    def aged(name: str, stamp: str, zone: str | None = None) -> Obj:
        n = node(name)
        n["metadata"]["creationTimestamp"] = stamp
        if zone:
            n["metadata"]["labels"] = {rollout.ZONE_LABEL: zone}
        return n

    nodes = [aged("old", "2020-01-01T00:00:00Z"), aged("z2", "2026-01-01T00:00:00Z", "b"),
             aged("z1-new", "2026-01-02T00:00:00Z", "a"), aged("z1-old", "2025-01-01T00:00:00Z", "a"),
             aged("young", "2026-01-01T00:00:00Z")]  # fmt: skip
    choice = rollout.choose(pool(maxUnavailable=4), nodes)
    assert choice.nodes == ("z1-old", "z1-new", "z2", "old")
    # with room for all of them, they go in list order (upstream sorts only to cut the list)
    assert rollout.choose(pool(maxUnavailable=5), nodes).nodes == ("old", "z2", "z1-new", "z1-old", "young")


def test_no_capacity_left_moves_nobody_and_failing_nodes_use_it() -> None:
    busy = [node("a", desired="b", state="Working"), node("c"), node("d")]
    assert rollout.choose(pool(), busy).nodes == ()
    failing = [node("a", desired="b", state="Degraded"), node("c"), node("d")]
    assert rollout.choose(pool(), failing).nodes == ()
    assert rollout.choose(pool(maxUnavailable=2), failing).nodes == ("c",)
    not_ready = [node("c", conditions=[{"type": "Ready", "status": "False"}]), node("d")]
    assert rollout.choose(pool(maxUnavailable=2), not_ready).nodes == ("d",)


def test_a_node_mcd_never_ran_on_is_moved_to_its_first_config_within_capacity() -> None:
    new = node("new", current=None, desired=None, state=None)
    assert rollout.choose(pool(), [node("c", current="b", desired="b"), new]).nodes == ("new",)
    # two of them at maxUnavailable 1: one at a time
    other = node("other", current=None, desired=None, state=None)
    assert rollout.choose(pool(), [new, other]).nodes == ("new",)
    moving = node("new", current=None, desired="b", state=None)  # pointed at it, not Done yet
    assert rollout.choose(pool(), [moving, other]).nodes == ()


def test_a_paused_or_untargeted_pool_has_no_target_to_move_to() -> None:
    assert rollout.choose({"metadata": {"name": "worker"}, "spec": {}}, [node()]).nodes == ()


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ({"node-role.kubernetes.io/worker": ""}, "worker"),
        ({"node-role.kubernetes.io/worker": "", "node-role.kubernetes.io/infra": ""}, "infra"),
        ({"node-role.kubernetes.io/master": "", "node-role.kubernetes.io/infra": ""}, "master"),
        (
            {
                "node-role.kubernetes.io/worker": "",
                "node-role.kubernetes.io/infra": "",
                "node-role.kubernetes.io/gpu": "",
            },
            None,
        ),  # two custom pools: none
        ({"node-role.kubernetes.io/worker": "", "kubernetes.io/os": "windows"}, None),
        ({}, None),
    ],
)
def test_the_pool_of_a_node_as_upstream(labels: dict[str, str], expected: str | None) -> None:
    pools = [
        {
            "metadata": {"name": r},
            "spec": {"nodeSelector": {"matchLabels": {f"node-role.kubernetes.io/{r}": ""}}},
        }
        for r in ("master", "worker", "infra", "gpu")
    ]
    assert rollout.primary_pool({"metadata": {"name": "n", "labels": labels}}, pools) == expected


def test_selectors_match_and_print_as_kubernetes() -> None:
    sel = {"matchLabels": {"role": "worker"},
           "matchExpressions": [{"key": "zone", "operator": "In", "values": ["b", "a"]},
                                {"key": "gpu", "operator": "DoesNotExist"},
                                {"key": "tier", "operator": "NotIn", "values": ["x"]}]}  # fmt: skip
    assert matches(sel, {"role": "worker", "zone": "a"})
    assert not matches(sel, {"role": "worker", "zone": "c"})
    assert not matches(sel, {"role": "worker", "zone": "a", "gpu": "1"})
    assert not matches(sel, {"role": "worker", "zone": "a", "tier": "x"})
    assert not matches({"matchExpressions": [{"key": "k", "operator": "Bogus"}]}, {"k": "v"})
    assert selector_text(sel) == "!gpu,role=worker,tier notin (x),zone in (a,b)"


def test_conditions_keep_their_transition_time_while_their_status_holds() -> None:
    c = set_condition([], "Updated", False, "", "", now="t1")
    c = set_condition(c, "Updating", True, "", "m1", now="t1")
    c2 = set_condition(c, "Updated", False, "", "", now="t2")
    assert c2 is c  # unchanged
    c3 = set_condition(c, "Updating", True, "", "m2", now="t2")
    assert c3[-1] == {
        "type": "Updating",
        "status": "True",
        "lastTransitionTime": "t1",
        "reason": "",
        "message": "m2",
    }
    c4 = set_condition(c3, "Updated", True, "", "done", now="t3")
    assert [x["type"] for x in c4] == ["Updating", "Updated"]  # a changed condition goes last
    assert c4[-1]["lastTransitionTime"] == "t3"


def test_the_status_of_a_pool_mid_rollout() -> None:
    nodes = [
        node("a", current="b", desired="b"),
        node("b", desired="b", state="Working", unschedulable=True),
        node("c", desired="b", state="Degraded", **{ann.REASON: 'bad "unit"\n'}),
        node("d"),
    ]
    status = pool_status(pool(), nodes, "now")
    assert {k: v for k, v in status.items() if k != "conditions"} == {
        "observedGeneration": 3, "machineCount": 4, "updatedMachineCount": 1, "readyMachineCount": 1,
        "unavailableMachineCount": 1, "degradedMachineCount": 1, "configuration": {}}  # fmt: skip
    conditions = {c["type"]: (c["status"], c["reason"], c["message"]) for c in status["conditions"]}
    assert conditions == {
        "Updated": ("False", "", ""),
        "Updating": ("True", "", "All nodes are updating to MachineConfig b"),
        "NodeDegraded": ("True", "1 nodes are reporting degraded status on sync",
                         'Node c is reporting: "bad \\"unit\\"\\n"'),
        "Degraded": ("True", "", 'Node c is reporting: "bad \\"unit\\"\\n"'),
    }  # fmt: skip


def test_the_status_configuration_follows_once_every_node_is_updated() -> None:
    p = pool()
    p["spec"]["configuration"]["source"] = [{"kind": "MachineConfig", "name": "00"}]
    status = pool_status(p, [node(current="b", desired="b")], "now")
    assert status["configuration"] == p["spec"]["configuration"]
    assert next(c for c in status["conditions"] if c["type"] == "Updated")["message"] == (
        "All nodes are updated with MachineConfig b"
    )


@pytest.mark.parametrize(
    ("annotations", "joins_on"),
    [
        ({ann.CURRENT_CONFIG: "rendered-worker-a"}, "rendered-worker-a"),  # reported, never named
        ({ann.CURRENT_CONFIG: "rendered-worker-a", ann.DESIRED_CONFIG: "rendered-worker-b"}, ""),
        ({ann.CURRENT_CONFIG: "rendered-worker-a", ann.DESIRED_CONFIG: ""}, ""),  # named, even empty
        ({ann.CURRENT_CONFIG: ""}, ""),
        ({}, ""),  # its agent has not started
    ],
)
def test_a_node_joins_on_the_config_its_agent_reported(annotations: dict[str, str], joins_on: str) -> None:
    assert rollout.joining({"metadata": {"name": "n", "annotations": annotations}}) == joins_on
