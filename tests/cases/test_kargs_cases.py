"""kernel_arguments.json: rpm-ostree kargs generation, running-kargs reconstruction, validation, tuning."""

from __future__ import annotations

from typing import Any

import pytest
from casefiles import case_params, load_cases

from mcd.planner.kargs import kargs_command, missing_kargs_error, parse_kargs, running_kargs, tuning_commands

KINDS = ("generate_kargs", "set_running_kargs", "validate_kernel_arguments", "tuning_file")


def test_every_case_kind_is_covered() -> None:
    assert {c.get("kind") for c in load_cases("kernel_arguments.json")} <= set(KINDS)


@pytest.mark.parametrize("case", case_params(load_cases("kernel_arguments.json", kind="generate_kargs")))
def test_generate_kargs(case: dict[str, Any]) -> None:
    inp, exp = case["input"], case["expected"]
    old, new = inp["oldKernelArguments"] or [], inp["newKernelArguments"] or []
    cmd = kargs_command(old, new)
    assert cmd == exp["command"]
    assert (cmd[2:] if cmd else []) == exp["rpmOstreeKargsArgs"]
    if "proc_cmdline_contains" in exp:
        assert exp["proc_cmdline_contains"] in " ".join(parse_kargs(new))


@pytest.mark.parametrize("case", case_params(load_cases("kernel_arguments.json", kind="set_running_kargs")))
def test_set_running_kargs(case: dict[str, Any]) -> None:
    inp, exp = case["input"], case["expected"]
    running = running_kargs(inp["cmdline"], inp["requestedKargs"])
    assert running == exp["oldConfigKernelArguments"]
    requested = inp["requestedKargs"]
    # MachineConfigDiff.kargs: not (both empty or equal as ordered lists)
    kargs_diff = not ((not running and not requested) or running == requested)
    assert kargs_diff is exp["diff.kargs"]


@pytest.mark.parametrize(
    "case", case_params(load_cases("kernel_arguments.json", kind="validate_kernel_arguments"))
)
def test_validate_kernel_arguments(case: dict[str, Any]) -> None:
    inp = case["input"]
    error = missing_kargs_error(inp["rpmOstreeKargsOutput"], inp["mcKernelArguments"])
    assert error == case["expected"]["error"]


@pytest.mark.parametrize("case", case_params(load_cases("kernel_arguments.json", kind="tuning_file")))
def test_tuning_file(case: dict[str, Any]) -> None:
    inp = case["input"]
    is_el = "FCOS" not in inp["os"].upper()
    assert tuning_commands(inp["file"], inp["cmdline"], is_el) == case["expected"]["commands"]
