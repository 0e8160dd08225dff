"""misc.json kind extensions_args: rpm-ostree update arguments for MachineConfig extensions."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from casefiles import case_params, load_cases

from mcd.planner.rpmostree_args import extensions_command

CASES = load_cases("misc.json", kind="extensions_args")


def _pairs(args: list[str]) -> list[tuple[str, str]]:
    assert len(args) % 2 == 0, args
    return list(zip(args[::2], args[1::2], strict=True))


def test_cases_are_present() -> None:
    assert len(CASES) >= 7


@pytest.mark.parametrize("case", case_params(CASES))
def test_extensions_args(case: dict[str, Any]) -> None:
    inp, exp = case["input"], case["expected"]
    cmd = extensions_command(inp["installedRequestedPackages"], inp["mcExtensions"])
    expected_pairs = [tuple(p) for p in exp["argPairs"]]
    if not expected_pairs:
        assert cmd is None
        return
    assert cmd is not None
    prefix = exp["command_prefix"]
    assert cmd[: len(prefix)] == prefix
    pairs = _pairs(cmd[len(prefix) :])
    # the case compares as a multiset; the order upstream builds is checked as well
    assert Counter(pairs) == Counter(expected_pairs)
    installs = [p for f, p in pairs if f == "--install"]
    uninstalls = [p for f, p in pairs if f == "--uninstall"]
    assert pairs == [("--install", p) for p in sorted(installs)] + [
        ("--uninstall", p) for p in sorted(uninstalls)
    ]
