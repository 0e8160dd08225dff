"""registries_conf_drain.json: does a registries.conf change (with the update's actions) need a drain?"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from casefiles import case_params, load_cases

from mcd.planner.registries import is_safe_registries_change
from mcd.policy.model import REGISTRIES_CONF

CASES = load_cases("registries_conf_drain.json")
NDP_ACTION_KEYS = ("ndpActions", "nodeDisruptionActions", "actions")


def _action_types(actions: Sequence[Any]) -> list[str]:
    """NDP actions come as `{"type": …}` objects or bare type names."""
    return [a["type"] if isinstance(a, dict) else a for a in actions]


def legacy_drain_required(actions: Sequence[str], changed: bool, old: str | None, new: str | None) -> bool:
    """Spec §3.5 legacy rule, local to this test: only registries.conf safety is under test here."""
    if "reboot" in actions:
        return True
    if "reload crio" in actions or "restart crio" in actions:
        return changed and not is_safe_registries_change(old, new)
    # anything other than "none" defaults to a drain
    return "none" not in actions


def ndp_drain_required(actions: Sequence[str], old: str | None, new: str | None) -> bool:
    """Spec §3.5 node-disruption-policy rule, local to this test."""
    if "Reboot" in actions or "Drain" in actions:
        return True
    if "Special" in actions:
        return not is_safe_registries_change(old, new)
    return False


def drain_required(inp: dict[str, Any]) -> bool:
    old, new = inp.get("old_registries_conf"), inp.get("new_registries_conf")
    if "legacyActions" in inp:
        files = inp.get("diffFileSet")
        changed = REGISTRIES_CONF in files if files is not None else old != new
        return legacy_drain_required(inp["legacyActions"], changed, old, new)
    key = next((k for k in NDP_ACTION_KEYS if k in inp), None)
    assert key is not None, f"case input has no action list: {sorted(inp)}"
    return ndp_drain_required(_action_types(inp[key]), old, new)


def test_cases_are_present() -> None:
    assert len(CASES) >= 16


@pytest.mark.parametrize("case", case_params(CASES))
def test_registries_conf_drain(case: dict[str, Any]) -> None:
    assert drain_required(case["input"]) is case["expected"]["drainRequired"]
