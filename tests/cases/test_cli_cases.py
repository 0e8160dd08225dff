"""reconcilable.json through the command line: `mcd plan OLD NEW [--policy FILE] [--node-fips N]`.

The pure-stack test (test_plan_cases.py) calls `plan()` with the overrides as an argument; this one
goes the way an admin does, with the storage overrides in a MachineConfiguration file, so the
parse, the policy file and the exit codes are exercised too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from builders import mc_object
from casefiles import case_params, load_cases

from mcd.cli import main


def _write_side(path: Path, name: str, side: dict[str, Any]) -> str:
    spec = {k: side[k] for k in ("fips", "kernelArguments", "osImageURL") if k in side}
    obj = mc_object(name, ignition=side["ignition"], **spec)
    if "annotations" in side:
        obj["metadata"]["annotations"] = side["annotations"]
    path.write_text(json.dumps(obj))
    return str(path)


@pytest.mark.parametrize("case", case_params(load_cases("reconcilable.json")))
def test_reconcilable_through_mcd_plan(
    case: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inp, want = case["input"], case["expected"]
    argv = [
        "plan",
        _write_side(tmp_path / "old.json", "old", inp["old"]),
        _write_side(tmp_path / "new.json", "new", inp["new"]),
    ]
    overrides = inp.get("irreconcilableValidationOverrides")
    if overrides:
        policy = {
            "apiVersion": "operator.openshift.io/v1",
            "kind": "MachineConfiguration",
            "metadata": {"name": "cluster"},
            "spec": {"irreconcilableValidationOverrides": overrides},
        }
        (tmp_path / "policy.json").write_text(json.dumps(policy))
        argv += ["--policy", str(tmp_path / "policy.json")]
    fips = inp["old"].get("node_proc_sys_crypto_fips_enabled")
    if fips is not None:
        argv += ["--node-fips", fips.strip()]
    code = main(argv)
    out, err = capsys.readouterr()
    doc = json.loads(out)
    if "reconcilable" in want:
        assert doc["reconcilable"] is want["reconcilable"], doc["errors"]
        # invalid input is exit 1 (findings on stderr); a valid config gets 0 or 2
        expected_code = 1 if doc.get("inputErrors") else (0 if want["reconcilable"] else 2)
        assert code == expected_code, err
    if "errorContains" in want:
        assert any(want["errorContains"] in e for e in doc["errors"]), doc["errors"]
    for flag, value in want.get("diff", {}).items():
        if flag in doc["diff"]:
            assert doc["diff"][flag] is value, flag
