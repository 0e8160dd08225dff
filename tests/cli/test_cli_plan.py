"""`mcd plan OLD NEW`: the JSON contract, exit codes, node facts, policies, text and YAML output."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from builders import ign_file, mc_object
from clirun import Run

from mcd.cli.main import main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FIPS_MESSAGE = "detected change to FIPS flag; refusing to modify FIPS on a running cluster"


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for f in FIXTURES.iterdir():
        if f.is_file():
            shutil.copy(f, tmp_path / f.name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write(name: str, doc: object) -> str:
    data = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    Path(name).write_bytes(data)
    return name


def foo_pair(old_text: str = "foo\n", new_text: str = "bar\n", **new_spec: Any) -> tuple[str, str]:
    """old.json/new.json differing in /etc/foo (and in whatever `new_spec` sets)."""
    return (
        write("old.json", mc_object("rendered-old", files=[ign_file("/etc/foo", old_text)])),
        write("new.json", mc_object("rendered-new", files=[ign_file("/etc/foo", new_text)], **new_spec)),
    )


def plan_json(run: Run, *argv: str, code: int = 0) -> dict[str, Any]:
    got, out, err = run("plan", "-o", "json", *argv)
    assert got == code, err
    assert err == ""
    result: dict[str, Any] = json.loads(out)
    return result


# ---------------------------------------------------------------- the JSON contract


def test_json_contract(run: Run, workdir: Path) -> None:
    old, new = foo_pair()
    out = plan_json(run, old, new)
    assert {"reconcilable", "errors", "diff", "actions", "drain", "changes", "commands"} <= set(out)
    assert set(out["diff"]) == {
        "osUpdate",
        "kargs",
        "fips",
        "passwd",
        "files",
        "units",
        "kernelType",
        "extensions",
    }
    assert out["reconcilable"] is True
    assert out["errors"] == []
    assert out["diff"]["files"] is True
    assert out["actions"] == [{"type": "Reboot"}]
    assert out["drain"] is True
    assert out["changes"] == [
        {
            "kind": "file",
            "name": "/etc/foo",
            "change": "modified",
            "actions": [{"type": "Reboot"}],
            "rule": "no policy for /etc/foo: reboot",
            "details": ["contents"],
        }
    ]
    for change in out["changes"]:
        assert {"kind", "name", "change", "actions", "rule"} <= set(change)
    assert out["commands"][-1][:3] == ["systemd-run", "--unit", "machine-config-daemon-reboot"]
    assert out["commands"][-1][4] == "machine-config-daemon: Node will reboot into config rendered-new"


def test_fixture_pair(run: Run, workdir: Path) -> None:
    out = plan_json(run, "valid-mc.yaml", "spec2-test-config.yaml")
    assert out["old"] == "rendered-worker-1"
    assert out["new"] == "test-config"
    assert out["diff"]["osUpdate"] and out["diff"]["kargs"] and out["diff"]["units"]
    assert ["rpm-ostree", "kargs", "--delete-if-present=nosmt", "--append=foo=bar", "--append=nosmt"] in out[
        "commands"
    ]
    assert [c["kind"] for c in out["changes"]][:2] == ["osImageURL", "kernelArguments"]


def test_old_dash_is_the_empty_config(run: Run, workdir: Path) -> None:
    out = plan_json(run, "-", "valid-mc.yaml")
    assert out["old"] == "mco-empty-mc"
    assert out["reconcilable"] is True
    assert {(c["kind"], c["change"]) for c in out["changes"]} >= {
        ("file", "added"),
        ("unit", "added"),
        ("sshkey", "added"),
    }
    assert [
        "rpm-ostree",
        "rebase",
        "--experimental",
        "ostree-unverified-registry:quay.io/example/rhcos@sha256:" + "1" * 64,
    ] in out["commands"]


def test_same_config_needs_nothing(run: Run, workdir: Path) -> None:
    out = plan_json(run, "valid-mc.yaml", "valid-mc.yaml")
    assert out["actions"] == [{"type": "None"}]
    assert out["drain"] is False
    assert out["changes"] == []
    assert out["commands"] == []
    assert not any(out["diff"].values())


# ---------------------------------------------------------------- exit codes


def test_unreconcilable_exits_2_and_still_prints_the_plan(run: Run, workdir: Path) -> None:
    old, new = foo_pair(fips=True)
    out = plan_json(run, old, new, code=2)
    assert out["reconcilable"] is False
    assert out["errors"] == [
        f'new machineconfig "rendered-old" is not reconcilable against "rendered-new": {FIPS_MESSAGE}'
    ]
    assert out["reason"].startswith("can't reconcile config rendered-old with rendered-new: ")
    assert out["actions"] == []
    assert out["drain"] is False
    assert out["commands"] == []


def test_invalid_new_ignition_is_bad_input_and_the_document_says_unreconcilable(
    run: Run, workdir: Path
) -> None:
    # exit 1 (bad input, as `validate`), the findings on stderr; the JSON still carries upstream's text
    new = write("new.json", mc_object("rendered-new", files=[ign_file("/etc/foo", mode=0o1777)]))
    code, stdout, err = run("plan", "-o", "json", "-", new)
    assert code == 1
    finding = (
        "new.json: spec.config.storage.files[0].mode: invalid mode 01777 for /etc/foo, cannot exceed 0777"
    )
    assert err == finding + "\n"
    out = json.loads(stdout)
    assert out["reconcilable"] is False
    assert out["errors"] == [
        'validating new Ignition config from machineconfig "rendered-new" failed: '
        "invalid mode 01777 for /etc/foo, cannot exceed 0777"
    ]
    assert out["inputErrors"] == [finding]


def test_unsupported_version_is_bad_input(run: Run, workdir: Path) -> None:
    new = write("new.json", mc_object("rendered-new", ignition={"ignition": {"version": "4.0.0"}}))
    code, stdout, err = run("plan", "-o", "json", "valid-mc.yaml", new)
    assert code == 1
    assert err.startswith(
        'new.json: spec.config.ignition.version: unsupported Ignition config version "4.0.0"'
    )
    out = json.loads(stdout)
    assert out["reconcilable"] is False
    assert out["errors"][0].startswith(
        'parsing new Ignition config from machineconfig "rendered-new" failed: '
        "failed to parse Ignition config: "
    )


def test_validate_and_plan_give_one_answer(run: Run, workdir: Path) -> None:
    # the README's bad.yaml: the same findings from both commands, exit 1 from both
    bad = mc_object("rendered-new", files=[ign_file("etc/foo", mode=0o4777)])
    write("bad.json", bad)
    code, validate_out, _ = run("validate", "bad.json")
    assert code == 1
    code, _, plan_err = run("plan", "-", "bad.json", "-o", "text")
    assert code == 1
    assert plan_err == validate_out
    assert validate_out.count("\n") == 2


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"kind": ', "bad.json: invalid JSON: "),
        (b"kind: [\n", "bad.json: invalid YAML: "),
        (
            b'{"kind": "ConfigMap"}',
            "bad.json: expected a MachineConfig or an Ignition config, got kind 'ConfigMap'",
        ),
        (b'{"kind": "MachineConfig", "spec": {"fips": "yes"}}', "bad.json: spec.fips: expected a boolean"),
    ],
)
def test_bad_input_exits_1_with_a_located_message(
    run: Run, workdir: Path, content: bytes, message: str
) -> None:
    write("bad.json", content)
    code, out, err = run("plan", "-o", "json", "valid-mc.yaml", "bad.json")
    assert code == 1
    assert out == ""
    assert err.startswith(message)
    assert "Traceback" not in err


def test_bad_old_file(run: Run, workdir: Path) -> None:
    code, out, err = run("plan", "-o", "json", "missing.yaml", "valid-mc.yaml")
    assert (code, out) == (1, "")
    assert err.startswith("missing.yaml: cannot read: ")


def test_new_must_be_a_single_machineconfig(run: Run, workdir: Path) -> None:
    assert run("plan", "-o", "json", "-", "mc-list.yaml") == (
        1,
        "",
        "mc-list.yaml: expected one MachineConfig, found 2\n",
    )


# ---------------------------------------------------------------- --policy


def test_policy_makes_a_path_rebootless(run: Run, workdir: Path) -> None:
    old, new = foo_pair()
    without = plan_json(run, old, new)
    assert (without["actions"], without["drain"]) == ([{"type": "Reboot"}], True)
    out = plan_json(run, old, new, "--policy", "policy-rebootless-foo.yaml")
    assert out["actions"] == [{"type": "None"}]
    assert out["drain"] is False
    assert out["changes"][0]["rule"] == "user policy /etc/foo"
    assert out["commands"] == []


def test_policy_inside_a_template(run: Run, workdir: Path) -> None:
    shutil.copy(Path("policy-rebootless-foo.yaml"), "p.yaml")
    inner = yaml.safe_load(Path("p.yaml").read_text())
    write("template.json", {"kind": "Template", "objects": [inner]})
    old, new = foo_pair()
    assert plan_json(run, old, new, "--policy", "template.json")["actions"] == [{"type": "None"}]


def test_invalid_policy_is_bad_input(run: Run, workdir: Path) -> None:
    old, new = foo_pair()
    code, out, err = run("plan", "-o", "json", old, new, "--policy", "policy-bad-service.yaml")
    assert (code, out) == (1, "")
    lines = err.splitlines()
    assert len(lines) == 2
    assert all(
        line.startswith(
            "policy-bad-service.yaml: spec.nodeDisruptionPolicy.files[0].actions[0].reload"
            ".serviceName: Invalid "
        )
        for line in lines
    )


def test_policy_file_without_machineconfiguration(run: Run, workdir: Path) -> None:
    old, new = foo_pair()
    assert run("plan", "-o", "json", old, new, "--policy", "valid-mc.yaml") == (
        1,
        "",
        "valid-mc.yaml: expected one MachineConfiguration, found 0\n",
    )


def test_policy_storage_overrides(run: Run, workdir: Path) -> None:
    old = write("old.json", mc_object("o"))
    new = write(
        "new.json",
        mc_object(
            "n", ignition={"ignition": {"version": "3.5.0"}, "storage": {"disks": [{"device": "/dev/sdb"}]}}
        ),
    )
    plan_json(run, old, new, code=2)
    write(
        "policy.json",
        {
            "kind": "MachineConfiguration",
            "spec": {"irreconcilableValidationOverrides": {"storage": ["Disks"]}},
        },
    )
    assert plan_json(run, old, new, "--policy", "policy.json")["reconcilable"] is True


def test_policy_from_status_is_used_as_is(run: Run, workdir: Path) -> None:
    write(
        "policy.json",
        {
            "kind": "MachineConfiguration",
            "status": {
                "nodeDisruptionPolicyStatus": {
                    "clusterPolicies": {
                        "files": [
                            {
                                "path": "/etc",
                                "actions": [{"type": "Restart", "restart": {"serviceName": "x.service"}}],
                            }
                        ],
                    }
                }
            },
        },
    )
    old, new = foo_pair()
    out = plan_json(run, old, new, "--policy", "policy.json")
    assert out["actions"] == [{"type": "Restart", "restart": {"serviceName": "x.service"}}]
    assert out["commands"] == [["systemctl", "restart", "x.service"]]


# ---------------------------------------------------------------- node facts and modes


def test_legacy(run: Run, workdir: Path) -> None:
    old = write("old.json", mc_object("o", files=[ign_file("/etc/containers/policy.json", "{}")]))
    new = write("new.json", mc_object("n", files=[ign_file("/etc/containers/policy.json", "{ }")]))
    out = plan_json(run, old, new, "--legacy")
    assert out["mode"] == "legacy"
    assert out["actions"] == ["reload crio"]
    assert out["changes"][0]["actions"] == ["reload crio"]
    assert out["drain"] is False
    assert out["commands"] == [["systemctl", "reload", "crio.service"]]
    assert plan_json(run, old, new)["actions"] == [
        {"type": "Reload", "reload": {"serviceName": "crio.service"}}
    ]


def test_forcefile(run: Run, workdir: Path) -> None:
    out = plan_json(run, "valid-mc.yaml", "valid-mc.yaml", "--forcefile")
    assert out["diff"]["osUpdate"] is True
    assert out["actions"] == [{"type": "Reboot"}]
    assert out["actionRule"] == "forcefile /run/machine-config-daemon-force present: reboot"
    assert out["drain"] is True
    assert [
        "rpm-ostree",
        "rebase",
        "--experimental",
        "ostree-unverified-registry:quay.io/example/rhcos@sha256:" + "1" * 64,
    ] in out["commands"]


def test_node_fips_differs_from_target(run: Run, workdir: Path) -> None:
    old, new = foo_pair()
    out = plan_json(run, old, new, "--node-fips", "1", code=2)
    assert out["errors"] == [FIPS_MESSAGE]


def test_node_fips_already_matches_target(run: Run, workdir: Path) -> None:
    old, new = foo_pair(fips=True)
    plan_json(run, old, new, code=2)
    out = plan_json(run, old, new, "--node-fips", "1")
    assert out["reconcilable"] is True
    assert out["diff"]["fips"] is False


def test_single_replica_skips_the_drain(run: Run, workdir: Path) -> None:
    old, new = foo_pair()
    out = plan_json(run, old, new, "--topology", "SingleReplica")
    assert out["actions"] == [{"type": "Reboot"}]
    assert out["drain"] is False
    assert out["drainRule"] == "single-node topology (SingleReplica): drain skipped"


def test_registries_digest_only_mirror(run: Run, workdir: Path) -> None:
    base = 'unqualified-search-registries = ["registry.access.redhat.com"]\n'
    base += '[[registry]]\nlocation = "quay.io/x"\n'
    mirror = base + '[[registry.mirror]]\nlocation = "mirror.example.com/x"\n'
    path = "/etc/containers/registries.conf"
    old = write("old.json", mc_object("o", files=[ign_file(path, base)]))
    safe = write(
        "safe.json", mc_object("n", files=[ign_file(path, mirror + 'pull-from-mirror = "digest-only"\n')])
    )
    unsafe = write("unsafe.json", mc_object("n", files=[ign_file(path, mirror)]))
    out = plan_json(run, old, safe)
    assert (out["actions"], out["drain"], out["commands"]) == (
        [{"type": "Special"}],
        False,
        [["systemctl", "reload", "crio.service"]],
    )
    assert plan_json(run, old, unsafe)["drain"] is True


# ---------------------------------------------------------------- text and YAML output


def test_text_output(run: Run, workdir: Path) -> None:
    old = write(
        "old.json",
        mc_object(
            "rendered-old", files=[ign_file("/etc/foo", "1"), ign_file("/etc/containers/policy.json", "{}")]
        ),
    )
    new = write(
        "new.json",
        mc_object(
            "rendered-new", files=[ign_file("/etc/foo", "2"), ign_file("/etc/containers/policy.json", "{ }")]
        ),
    )
    code, out, err = run("plan", "-o", "text", old, new)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == "plan rendered-old -> rendered-new: reconcilable"
    header = next(i for i, line in enumerate(lines) if line.startswith("KIND"))
    assert lines[header].split() == ["KIND", "CHANGE", "NAME", "ACTIONS", "RULE"]
    foo, policy_json = lines[header + 1], lines[header + 2]
    assert foo.split()[:4] == ["file", "modified", "/etc/foo", "Reboot"]
    assert foo.endswith("no policy for /etc/foo: reboot")
    assert policy_json.split()[:5] == [
        "file",
        "modified",
        "/etc/containers/policy.json",
        "Reload",
        "crio.service",
    ]
    assert policy_json.endswith("default policy /etc/containers/policy.json")
    # columns line up
    assert (
        foo.index("/etc/foo")
        == policy_json.index("/etc/containers/policy.json")
        == lines[header].index("NAME")
    )
    assert "action: Reboot  (reboot required by /etc/foo)" in lines
    assert "drain:  yes  (a reboot or drain action drains the node)" in lines
    assert lines.index("action: Reboot  (reboot required by /etc/foo)") > header + 2
    # the steps the update runs, in order, as `-o json` lists them
    steps = lines[lines.index("steps:") + 1 :]
    assert steps == [
        "  1. drain the node",
        "  2. write 2 file(s): /etc/foo /etc/containers/policy.json",
        "  3. reboot: Node will reboot into config rendered-new",
    ]
    kinds = [s["kind"] for s in plan_json(run, old, new)["steps"]]
    assert kinds == ["drain", "write-files", "reboot"]


def test_text_output_with_policy(run: Run, workdir: Path) -> None:
    old, new = foo_pair()
    code, out, _ = run("plan", old, new, "--policy", "policy-rebootless-foo.yaml", "-o", "text")
    assert code == 0
    assert "action: None  (combined node disruption policy actions of every change)" in out.splitlines()
    assert "drain:  no  (no action needs a drain)" in out.splitlines()


def test_text_output_unreconcilable(run: Run, workdir: Path) -> None:
    old, new = foo_pair(fips=True)
    code, out, _ = run("plan", "-o", "text", old, new)
    assert code == 2
    lines = out.splitlines()
    assert lines[0] == "plan rendered-old -> rendered-new: UNRECONCILABLE"
    assert (
        lines[1]
        == '  error: new machineconfig "rendered-old" is not reconcilable against "rendered-new": '
        + FIPS_MESSAGE
    )
    assert lines[2].startswith(
        "node state would be Unreconcilable, reason: can't reconcile config rendered-old"
    )


def test_yaml_output_matches_json(run: Run, workdir: Path) -> None:
    old, new = foo_pair()
    as_json = plan_json(run, old, new, "-o", "json")
    code, out, _ = run("plan", old, new, "-o", "yaml")
    assert code == 0
    assert yaml.safe_load(out) == as_json


# ---------------------------------------------------------------- usage


@pytest.mark.parametrize("argv", [["--help"], ["-h"], ["plan", "--help"], ["validate", "--help"]])
def test_help_everywhere(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: mcd")


def test_plan_help_lists_the_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["plan", "--help"])
    out = capsys.readouterr().out
    for option in ("--policy", "--legacy", "--forcefile", "--node-fips", "--topology", "--output"):
        assert option in out


def test_no_command_prints_help_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 1
    assert "usage: mcd" in capsys.readouterr().err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.startswith("mcd ")


@pytest.mark.parametrize(
    "argv",
    [
        ["plan", "a"],
        ["plan", "a", "b", "--topology", "Nope"],
        ["plan", "a", "b", "--node-fips", "2"],
        ["plan", "a", "b", "-o", "xml"],
        ["frobnicate"],
    ],
)
def test_usage_errors_exit_1(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 1
    assert "error:" in capsys.readouterr().err


# ---------------------------------------------------------------- known bugs


def test_unknown_extension_is_reported(run: Run, workdir: Path) -> None:
    new = write("new.json", mc_object("n", extensions=["bogus"]))
    code, out, err = run("plan", "-o", "json", "-", new)
    # bad input (upstream's controller and daemon refuse it); the plan still says the update would fail
    assert code == 1
    assert err.startswith("new.json: spec.extensions[0]: invalid extension 'bogus': supported are ")
    assert (
        "the update would fail on the node: invalid extensions found: [bogus]" in json.loads(out)["warnings"]
    )


def test_64k_pages_on_x86_64_is_reported(run: Run, workdir: Path) -> None:
    new = write("new.json", mc_object("n", kernelType="64k-pages"))
    code, out, _ = run("plan", "-o", "json", "-", new)
    assert code == 0
    assert any(
        "64k-pages is only supported for aarch64 architecture" in w for w in json.loads(out)["warnings"]
    )
    code, out, _err = run("plan", "-o", "json", "--arch", "aarch64", "-", new)
    assert code == 0
    assert json.loads(out)["warnings"] == []
    assert any("kernel-64k-core" in c for cmd in json.loads(out)["commands"] for c in cmd)
