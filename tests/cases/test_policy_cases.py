"""Upstream NodeDisruptionPolicy and legacy post-config-action tables, checked against mcd.policy.

The tables describe whole updates; this module tests the per-path part. The short-circuits that
`mcd.planner.plan` owns (forcefile, OS/kargs/FIPS/kernel type/extensions, and in legacy mode any unit
change ⇒ reboot; nothing changed ⇒ None) are restated by the small helpers below.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from builders import action_from_api
from casefiles import CASES_DIR, case_params, load_cases

from mcd.policy import (
    DEFAULT_POLICIES,
    Action,
    ClusterPolicies,
    actions_for_changes,
    combine_actions,
    file_decision,
    legacy_actions_for_files,
    legacy_drain_required,
    ndp_drain_required,
    parse_cluster_policies,
)
from mcd.policy.model import REGISTRIES_CONF

NDP_FILE = "node_disruption_policy.json"
LEGACY_FILE = "post_config_action_legacy.json"

# Diff flags that make upstream reboot before looking at any policy.
NDP_REBOOT_FLAGS = ("forcefile", "osUpdate", "kargs", "fips", "kernelType", "extensions")


def _actions(api: list[dict[str, Any]]) -> tuple[Action, ...]:
    return tuple(action_from_api(a, ("expected", i)) for i, a in enumerate(api))


def _policies(spec: object) -> ClusterPolicies:
    return DEFAULT_POLICIES if spec == "defaults" else parse_cluster_policies(spec, ("clusterPolicies",))


def _ndp_plan(diff: dict[str, Any], policies: ClusterPolicies) -> tuple[Action, ...]:
    """Whole-update NDP actions: the plan's short-circuits, then mcd.policy for the changed paths."""
    if any(diff.get(flag) for flag in NDP_REBOOT_FLAGS):
        return combine_actions([Action("Reboot")])
    files, units, passwd = diff.get("files", []), diff.get("units", []), bool(diff.get("passwd"))
    if not (files or units or passwd):
        return (Action("None"),)
    actions, _ = actions_for_changes(files, units, passwd, policies)
    return actions


def test_default_policies_equal_the_upstream_table() -> None:
    table = json.loads((Path(CASES_DIR) / NDP_FILE).read_text())["default_cluster_policies"]
    assert DEFAULT_POLICIES.to_api() == table
    assert parse_cluster_policies(table) == DEFAULT_POLICIES


@pytest.mark.parametrize("case", case_params(load_cases(NDP_FILE, kind="find_closest_file_policy")))
def test_closest_file_policy(case: dict[str, Any]) -> None:
    policies = parse_cluster_policies({"files": case["input"]["filePolicies"]}, ("filePolicies",))
    decision = file_decision(case["input"]["diffPath"], policies)
    assert decision.matched is case["expected"]["pathFound"]
    if decision.matched:
        assert decision.actions == _actions(case["expected"]["actions"])
    else:
        assert decision.actions == (Action("Reboot"),)


@pytest.mark.parametrize("case", case_params(load_cases(NDP_FILE, kind="node_disruption_actions")))
def test_node_disruption_actions(case: dict[str, Any]) -> None:
    actions = _ndp_plan(case["input"]["diff"], _policies(case["input"]["clusterPolicies"]))
    assert actions == _actions(case["expected"]["actions"])
    drain = case["expected"]["drainRequired"]
    if isinstance(drain, bool):
        assert ndp_drain_required(actions, _unexpected_safety_check) is drain
    else:
        # decided by the registries.conf comparison (mcd.planner.registries): follows its verdict
        assert ndp_drain_required(actions, lambda: True) is False
        assert ndp_drain_required(actions, lambda: False) is True


def _unexpected_safety_check() -> bool:
    raise AssertionError("registries.conf safety must not be consulted for this change")


# ---- legacy table -------------------------------------------------------------------------


def _changed_files(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Paths added, removed or whose entry (contents, mode …) differs; new order, then removed ones."""
    before = {f["path"]: f for f in old["files"]}
    after = {f["path"]: f for f in new["files"]}
    changed = [p for p, f in after.items() if before.get(p) != f]
    return changed + [p for p in before if p not in after]


def _kernel_type(value: str | None) -> str:
    return value if value in ("realtime", "64k-pages") else "default"


def _legacy_reboot_short_circuit(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """The legacy plan's reboot flags: OS image, kargs, FIPS, units, kernel type, extensions."""
    return (
        old["osImageURL"] != new["osImageURL"]
        or (
            bool(old["kernelArguments"] or new["kernelArguments"])
            and old["kernelArguments"] != new["kernelArguments"]
        )
        or old["fips"] != new["fips"]
        or old["units"] != new["units"]
        or _kernel_type(old["kernelType"]) != _kernel_type(new["kernelType"])
        or (bool(old["extensions"] or new["extensions"]) and old["extensions"] != new["extensions"])
    )


@pytest.mark.parametrize("case", case_params(load_cases(LEGACY_FILE)))
def test_legacy_post_config_action(case: dict[str, Any]) -> None:
    old, new = case["input"]["old"], case["input"]["new"]
    changed = _changed_files(old, new)
    if _legacy_reboot_short_circuit(old, new):
        actions = ["reboot"]
    else:
        actions, _ = legacy_actions_for_files(changed)
    assert actions == case["expected"]["actions"]
    # the drain follows: reboot drains, none does not, crio actions drain only for an unsafe registries.conf
    registries_changed = REGISTRIES_CONF in changed
    assert legacy_drain_required(actions, registries_changed, lambda: False) is (
        actions == ["reboot"] or (actions != ["none"] and registries_changed)
    )
    assert legacy_drain_required(actions, registries_changed, lambda: True) is (actions == ["reboot"])
