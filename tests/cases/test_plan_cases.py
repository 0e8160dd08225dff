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


RECONCILABLE = load_cases("reconcilable.json")
# what a case may expect; a key the tests below do not check fails test_every_expectation_is_checked
_CHECKED = {"reconcilable", "errorContains", "diff"}


def _plan_of(case: dict[str, Any]) -> Any:
    inp = case["input"]
    old = reconcile_side_mc("old", inp["old"])
    new = reconcile_side_mc("new", inp["new"])
    node_fips = inp["old"].get("node_proc_sys_crypto_fips_enabled")
    facts = Facts(node_fips=None if node_fips is None else node_fips.strip() == "1")
    overrides = (inp.get("irreconcilableValidationOverrides") or {}).get("storage", [])
    return plan(old, new, facts, storage_overrides=overrides)


def test_every_expectation_is_checked() -> None:
    for case in RECONCILABLE:
        want = case["expected"]
        assert want.keys() <= _CHECKED, (case["name"], sorted(want))
        assert "reconcilable" in want or "diff" in want, case["name"]
        assert "errorContains" not in want or want.get("reconcilable") is False, case["name"]


@pytest.mark.parametrize("case", case_params([c for c in RECONCILABLE if "reconcilable" in c["expected"]]))
def test_reconcilable(case: dict[str, Any]) -> None:
    want = case["expected"]
    result = _plan_of(case)
    assert result.reconcilable is want["reconcilable"], result.errors
    if want["reconcilable"]:
        assert (tuple(result.errors), result.reason) == ((), "")
    else:
        # an unreconcilable case without errorContains still needs an error to report
        assert any(want.get("errorContains", "") in e for e in result.errors), result.errors
        assert result.errors[0] in result.reason, result.reason


_DIFF_FLAGS = {
    "isEmpty": lambda d: d.is_empty,
    "oclEnabled": lambda d: d.ocl_enabled,
    "revertFromOCL": lambda d: d.revert_from_ocl,
}


@pytest.mark.parametrize("case", case_params([c for c in RECONCILABLE if "diff" in c["expected"]]))
def test_diff(case: dict[str, Any]) -> None:
    want = case["expected"]["diff"]
    diff = _plan_of(case).diff
    got = {flag: _DIFF_FLAGS[flag](diff) if flag in _DIFF_FLAGS else diff.flags()[flag] for flag in want}
    assert want and got == want


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
