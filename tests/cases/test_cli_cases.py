"""Case tables through the command line: `mcd plan OLD NEW [--policy FILE] [--legacy] ...`.

The pure-stack test (test_plan_cases.py) calls `plan()` with the overrides as an argument; this one
goes the way an admin does, with the storage overrides in a MachineConfiguration file, so the
parse, the policy file and the exit codes are exercised too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from builders import data_url, mc_object
from casebuilders import ndp_configs
from casefiles import case_params, load_cases

from mcd.cli.main import main


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
        "plan", "-o", "json",
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


def _legacy_side(path: Path, side: dict[str, Any]) -> str:
    files = [
        {"path": f["path"], "contents": {"source": data_url(f["contents"])}, "mode": f.get("mode", 420)}
        for f in side.get("files", [])
    ]
    spec = {
        k: side[k]
        for k in ("osImageURL", "kernelArguments", "kernelType", "extensions", "fips")
        if side.get(k)
    }
    obj = mc_object(
        side["name"],
        files=files,
        units=side.get("units") or None,
        ssh_keys=side.get("core_ssh_keys") or None,
        **spec,
    )
    path.write_text(json.dumps(obj))
    return str(path)


@pytest.mark.parametrize("case", case_params(load_cases("post_config_action_legacy.json")))
def test_legacy_actions_through_mcd_plan(
    case: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = _legacy_side(tmp_path / "old.json", case["input"]["old"])
    new = _legacy_side(tmp_path / "new.json", case["input"]["new"])
    code = main(["plan", "-o", "json", "--legacy", old, new])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["actions"] == case["expected"]["actions"]


@pytest.mark.parametrize(
    "case", case_params(load_cases("node_disruption_policy.json", kind="node_disruption_actions"))
)
def test_node_disruption_actions_through_mcd_plan(
    case: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inp, want = case["input"], case["expected"]
    old, new = ndp_configs(inp["diff"])
    argv = ["plan", "-o", "json"]
    for name, mc in (("old", old), ("new", new)):
        (tmp_path / f"{name}.json").write_text(json.dumps(dict(mc.raw)))
        argv.append(str(tmp_path / f"{name}.json"))
    if inp["clusterPolicies"] != "defaults":
        policy = {
            "apiVersion": "operator.openshift.io/v1",
            "kind": "MachineConfiguration",
            "metadata": {"name": "cluster"},
            "status": {"nodeDisruptionPolicyStatus": {"clusterPolicies": inp["clusterPolicies"]}},
        }
        (tmp_path / "policy.json").write_text(json.dumps(policy))
        argv += ["--policy", str(tmp_path / "policy.json")]
    if inp["diff"].get("forcefile"):
        argv.append("--forcefile")
    code = main(argv)
    out, err = capsys.readouterr()
    doc = json.loads(out)
    if inp["diff"].get("fips"):
        assert (code, doc["reconcilable"]) == (2, False)  # a FIPS flip is refused first
        return
    assert code == 0, err
    assert doc["actions"] == want["actions"]
    if isinstance(want.get("drainRequired"), bool):
        assert doc["drain"] is want["drainRequired"]
