"""Upstream case tables driven through the whole pure stack: load -> diff -> reconcile -> plan."""

from __future__ import annotations

from typing import Any

import pytest
from builders import spellings
from casebuilders import legacy_side_mc, ndp_configs, reconcile_side_mc
from casefiles import case_params, load_cases

from mcd import policy
from mcd.planner.plan import Facts, plan

# ---------------------------------------------------------------- reconcilable.json


@pytest.mark.parametrize("case", case_params(load_cases("reconcilable.json")))
def test_reconcilable_and_diff(case: dict[str, Any]) -> None:
    inp, want = case["input"], case["expected"]
    old = reconcile_side_mc("old", inp["old"])
    new = reconcile_side_mc("new", inp["new"])
    node_fips = inp["old"].get("node_proc_sys_crypto_fips_enabled")
    facts = Facts(node_fips=None if node_fips is None else node_fips.strip() == "1")
    overrides = (inp.get("irreconcilableValidationOverrides") or {}).get("storage", [])
    result = plan(old, new, facts, storage_overrides=overrides)
    if "reconcilable" in want:
        assert result.reconcilable is want["reconcilable"], result.errors
    if "errorContains" in want:
        assert any(want["errorContains"] in e for e in result.errors), result.errors
        assert want["errorContains"] in result.reason or result.errors[0] != result.reason
    for flag, value in want.get("diff", {}).items():
        if flag == "isEmpty":
            assert result.diff.is_empty is value
        elif flag == "oclEnabled":
            assert result.diff.ocl_enabled is value
        elif flag == "revertFromOCL":
            assert result.diff.revert_from_ocl is value
        else:
            assert result.diff.flags()[flag] is value, flag


# ---------------------------------------------------------------- post_config_action_legacy.json


@pytest.mark.parametrize("case", case_params(load_cases("post_config_action_legacy.json")))
def test_legacy_post_config_action(case: dict[str, Any]) -> None:
    old = legacy_side_mc(case["input"]["old"])
    new = legacy_side_mc(case["input"]["new"])
    result = plan(old, new, legacy=True)
    assert result.reconcilable, result.errors
    assert list(spellings(result.actions)) == case["expected"]["actions"]


# ---------------------------------------------------------------- node_disruption_policy.json


NDP_CASES = load_cases("node_disruption_policy.json", kind="node_disruption_actions")


@pytest.mark.parametrize("case", case_params(NDP_CASES))
def test_node_disruption_policy_actions(case: dict[str, Any]) -> None:
    inp, want = case["input"], case["expected"]
    cluster = inp["clusterPolicies"]
    policies = (
        policy.DEFAULT_POLICIES
        if cluster == "defaults"
        else policy.policies_from_machineconfiguration(
            {"status": {"nodeDisruptionPolicyStatus": {"clusterPolicies": cluster}}}
        )
    )
    old, new = ndp_configs(inp["diff"])
    facts = Facts(forcefile=bool(inp["diff"].get("forcefile")))
    if inp["diff"].get("fips"):
        facts = Facts(forcefile=facts.forcefile)  # the FIPS change itself is unreconcilable, see below
    result = plan(old, new, facts, policies)
    if inp["diff"].get("fips"):
        # a FIPS flip is refused before actions are computed; the policy part is tested at policy level
        assert not result.reconcilable
        return
    assert result.reconcilable, result.errors
    assert [a.to_api() for a in result.actions] == want["actions"]
    if isinstance(want.get("drainRequired"), bool):
        assert result.drain is want["drainRequired"]
