"""A MachineConfigPool's machineConfigSelector, as Kubernetes matches label selectors. Pure: no I/O."""

from __future__ import annotations

from typing import Any

import pytest

from mcd.config.selector import SELECTING_ALL, SelectorError, check_selector, selects

ROLE = "machineconfiguration.openshift.io/role"
CUSTOM = {"matchExpressions": [{"key": ROLE, "operator": "In", "values": ["worker", "infra"]}]}


@pytest.mark.parametrize(
    ("selector", "labels", "selected"),
    [
        ({"matchLabels": {ROLE: "worker"}}, {ROLE: "worker"}, True),
        ({"matchLabels": {ROLE: "worker"}}, {ROLE: "master"}, False),
        ({"matchLabels": {ROLE: "worker"}}, {}, False),
        (CUSTOM, {ROLE: "infra"}, True),
        (CUSTOM, {ROLE: "worker", "other": "x"}, True),
        (CUSTOM, {ROLE: "master"}, False),
        ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["a"]}]}, {}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["a"]}]}, {"tier": "a"}, False),
        ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, {"tier": ""}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, {"tier": ""}, False),
        ({"matchLabels": {ROLE: "worker"}, **CUSTOM}, {ROLE: "infra"}, False),
    ],
)
def test_a_selector_selects_as_kubernetes_does(
    selector: dict[str, Any], labels: dict[str, str], selected: bool
) -> None:
    assert selects(check_selector(selector), labels) is selected


@pytest.mark.parametrize(
    ("selector", "path", "message"),
    [
        ({}, (), SELECTING_ALL),
        ({"matchLabels": {}, "matchExpressions": []}, (), SELECTING_ALL),
        (None, (), "expected a label selector (matchLabels, matchExpressions)"),
        ({"matchExpressions": [{"key": "k", "operator": "Has"}]}, ("matchExpressions", 0, "operator"),
         "'Has' is not a valid label selector operator"),
        ({"matchExpressions": [{"key": "k", "operator": "In"}]}, ("matchExpressions", 0, "values"),
         "values must be non-empty for operator In"),
        ({"matchExpressions": [{"key": "k", "operator": "Exists", "values": ["v"]}]},
         ("matchExpressions", 0, "values"), "values must be empty for operator Exists"),
    ],
)  # fmt: skip
def test_a_selector_kubernetes_or_upstream_refuses_is_located(
    selector: object, path: tuple[Any, ...], message: str
) -> None:
    with pytest.raises(SelectorError) as caught:
        check_selector(selector)
    assert (caught.value.path, str(caught.value)) == (path, message)
