"""`mcd validate`: a line per problem (FILE: JSON-PATH: message), exit 1; silence and exit 0 when valid."""

from __future__ import annotations

import base64
import copy
import gzip
import hashlib
import io
import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from clirun import Run

from mcd.cli.main import main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scratch current directory holding copies of the fixtures (short file names in the output)."""
    for f in FIXTURES.iterdir():
        if f.is_file():
            shutil.copy(f, tmp_path / f.name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def valid_mc() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((FIXTURES / "valid-mc.yaml").read_text())
    return doc


def write(name: str, doc: object) -> str:
    """Write `doc` (bytes as they are, anything else as YAML) into the current directory."""
    data = doc if isinstance(doc, bytes) else yaml.safe_dump(doc).encode()
    Path(name).write_bytes(data)
    return name


def broken(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """The valid fixture with one change applied to its Ignition config."""
    doc = copy.deepcopy(valid_mc())
    change(doc["spec"]["config"])
    return doc


def files(ign: dict[str, Any]) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = ign["storage"]["files"]
    return result


def assert_no_traceback(out: str, err: str) -> None:
    assert "Traceback" not in out + err


# ---------------------------------------------------------------- valid input


@pytest.mark.parametrize(
    "name",
    [
        "valid-mc.yaml",
        "ignition-bare.json",
        "mc-list.yaml",
        "multi-doc.yaml",
        "policy-rebootless-foo.yaml",
    ],
)
def test_valid_file_is_silent(run: Run, workdir: Path, name: str) -> None:
    assert run("validate", name) == (0, "", "")


def test_an_enabled_unit_without_install_section_is_a_warning(run: Run, workdir: Path) -> None:
    # Ignition's warning: enabling it does nothing
    assert run("validate", "spec2-test-config.yaml") == (
        0,
        "",
        "spec2-test-config.yaml: spec.config.systemd.units[1].contents: warning: "
        'unit "etcd-member-tls.service" is enabled, but has no install section so enable does nothing\n',
    )


def test_several_valid_files(run: Run, workdir: Path) -> None:
    assert run("validate", "valid-mc.yaml", "ignition-bare.json", "mc-list.yaml") == (0, "", "")


def test_warnings_go_to_stderr_and_do_not_fail(run: Run, workdir: Path) -> None:
    code, out, err = run("validate", "template-spec32-unused-key.yaml")
    assert code == 0
    assert out == ""
    assert err == (
        "template-spec32-unused-key.yaml: objects[0].spec.config.storage.files[0].filesystem: "
        "warning: Unused key filesystem\n"
    )


def test_standard_input(run: Run, workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = (FIXTURES / "valid-mc.yaml").read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    assert run("validate", "-") == (0, "", "")


def test_bad_standard_input(run: Run, workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"{nope")))
    code, out, _ = run("validate", "-")
    assert code == 1
    assert out.startswith("-: invalid ")


# ---------------------------------------------------------------- one located error each


def set_mode(ign: dict[str, Any], mode: object) -> None:
    files(ign)[3]["mode"] = mode


def test_mode_beyond_0777(run: Run, workdir: Path) -> None:
    name = write("mc.yaml", broken(lambda ign: set_mode(ign, 1023)))
    code, out, err = run("validate", name)
    assert code == 1
    assert (
        out == "mc.yaml: spec.config.storage.files[3].mode: invalid mode 01777 for /usr/local/bin/hello.sh, "
        "cannot exceed 0777\n"
    )
    assert err == ""


def test_mode_of_the_wrong_type(run: Run, workdir: Path) -> None:
    name = write("mc.yaml", broken(lambda ign: set_mode(ign, "abc")))
    code, out, _ = run("validate", name)
    assert code == 1
    [line] = out.splitlines()
    assert line.startswith("mc.yaml: spec.config.storage.files[3].mode: ")
    assert '"abc"' in line


def test_files_not_a_list(run: Run, workdir: Path) -> None:
    def change(ign: dict[str, Any]) -> None:
        ign["storage"]["files"] = {"path": "/etc/a"}

    code, out, _ = run("validate", write("mc.yaml", broken(change)))
    assert code == 1
    [line] = out.splitlines()
    assert line.startswith("mc.yaml: spec.config.storage.files: ")
    assert "array" in line


def test_unknown_ignition_version(run: Run, workdir: Path) -> None:
    def change(ign: dict[str, Any]) -> None:
        ign["ignition"]["version"] = "4.0.0"

    code, out, _ = run("validate", write("mc.yaml", broken(change)))
    assert code == 1
    assert out.startswith(
        'mc.yaml: spec.config.ignition.version: unsupported Ignition config version "4.0.0" (supported: '
    )
    assert len(out.splitlines()) == 1


def test_relative_path(run: Run, workdir: Path) -> None:
    def change(ign: dict[str, Any]) -> None:
        files(ign)[1]["path"] = "etc/containers/policy.json"

    assert run("validate", write("mc.yaml", broken(change))) == (
        1,
        'mc.yaml: spec.config.storage.files[1].path: path "etc/containers/policy.json" is not absolute\n',
        "",
    )


def test_bad_base64(run: Run, workdir: Path) -> None:
    def change(ign: dict[str, Any]) -> None:
        files(ign)[1]["contents"]["source"] = "data:;base64,eyJkZWZhdWx0Ijpb*"

    code, out, _ = run("validate", write("mc.yaml", broken(change)))
    assert code == 1
    assert out.startswith(
        "mc.yaml: spec.config.storage.files[1].contents.source: could not decode contents of "
        "/etc/containers/policy.json: invalid data URL: invalid base64 data"
    )


def test_gzip_over_non_gzip_data(run: Run, workdir: Path) -> None:
    def change(ign: dict[str, Any]) -> None:
        files(ign)[0]["contents"]["compression"] = "gzip"

    code, out, _ = run("validate", write("mc.yaml", broken(change)))
    assert code == 1
    assert out.startswith(
        "mc.yaml: spec.config.storage.files[0].contents.compression: "
        "could not decompress gzip contents of /etc/motd: "
    )


def test_sha512_mismatch(run: Run, workdir: Path) -> None:
    wrong = hashlib.sha512(b"something else").hexdigest()
    actual = hashlib.sha512(b"hello world\n").hexdigest()

    def change(ign: dict[str, Any]) -> None:
        files(ign)[0]["contents"]["verification"] = {"hash": f"sha512-{wrong}"}

    assert run("validate", write("mc.yaml", broken(change))) == (
        1,
        "mc.yaml: spec.config.storage.files[0].contents.verification.hash: sha512 verification failed for "
        f"/etc/motd: contents hash to {actual}, config expects {wrong}\n",
        "",
    )


def test_duplicate_path(run: Run, workdir: Path) -> None:
    def change(ign: dict[str, Any]) -> None:
        files(ign)[2]["path"] = "/etc/motd"

    assert run("validate", write("mc.yaml", broken(change))) == (
        1,
        'mc.yaml: spec.config.storage.files[2].path: duplicate path "/etc/motd", already declared at '
        "storage.files[0].path\n",
        "",
    )


@pytest.mark.parametrize(
    ("source", "scheme"), [("https://example.com/motd", "https"), ("s3://bucket/motd", "s3")]
)
def test_remote_sources_are_refused(run: Run, workdir: Path, source: str, scheme: str) -> None:
    def change(ign: dict[str, Any]) -> None:
        files(ign)[0]["contents"]["source"] = source

    assert run("validate", write("mc.yaml", broken(change))) == (
        1,
        f'mc.yaml: spec.config.storage.files[0].contents.source: unsupported source scheme "{scheme}" for '
        "/etc/motd: the daemon cannot fetch remote contents on a running node; inline them as a data: URL\n",
        "",
    )


def test_bad_json(run: Run, workdir: Path) -> None:
    code, out, err = run("validate", write("mc.json", b'{"kind": "MachineConfig", "spec": {"config": '))
    assert code == 1
    assert out.startswith("mc.json: invalid JSON: ")
    assert len(out.splitlines()) == 1
    assert_no_traceback(out, err)


def test_bad_yaml(run: Run, workdir: Path) -> None:
    code, out, err = run("validate", write("mc.yaml", b"kind: MachineConfig\nspec:\n  config: [x\n  y: 1\n"))
    assert code == 1
    assert out.startswith("mc.yaml: invalid YAML: ")
    assert ", column " in out
    assert_no_traceback(out, err)


def test_missing_file(run: Run, workdir: Path) -> None:
    code, out, err = run("validate", "nope.yaml")
    assert (code, out) == (1, "")  # an input that cannot be read is an error, on stderr (issue 28)
    assert err.startswith("nope.yaml: cannot read: ")


def test_every_error_is_reported(run: Run, workdir: Path) -> None:
    def change(ign: dict[str, Any]) -> None:
        files(ign)[0]["path"] = "relative"
        set_mode(ign, 0o4755)

    code, out, _ = run("validate", write("mc.yaml", broken(change)))
    assert code == 1
    assert sorted(line.split(": ")[1] for line in out.splitlines()) == [
        "spec.config.storage.files[0].path",
        "spec.config.storage.files[3].mode",
    ]


# ---------------------------------------------------------------- other shapes


def test_bare_ignition_paths_start_at_the_root(run: Run, workdir: Path) -> None:
    doc = json.loads((FIXTURES / "ignition-bare.json").read_text())
    doc["storage"]["files"][0]["mode"] = 1023
    code, out, _ = run("validate", write("ign.json", json.dumps(doc).encode()))
    assert code == 1
    assert (
        out
        == "ign.json: storage.files[0].mode: invalid mode 01777 for /etc/hello-worker, cannot exceed 0777\n"
    )


def test_list_items_are_located(run: Run, workdir: Path) -> None:
    doc = yaml.safe_load((FIXTURES / "mc-list.yaml").read_text())
    doc["items"][1]["spec"]["config"] = {
        "ignition": {"version": "3.2.0"},
        "storage": {"files": [{"path": "x"}]},
    }
    assert run("validate", write("list.yaml", doc)) == (
        1,
        'list.yaml: items[1].spec.config.storage.files[0].path: path "x" is not absolute\n',
        "",
    )


def test_multi_document_yaml_is_located_per_document(run: Run, workdir: Path) -> None:
    text = (FIXTURES / "multi-doc.yaml").read_text().replace("source: data:,second", "source: s3://b/second")
    code, out, _ = run("validate", write("multi.yaml", text.encode()))
    assert code == 1
    assert out.startswith(
        "multi.yaml: <document 1>.spec.config.storage.files[0].contents.source: "
        'unsupported source scheme "s3" for /etc/second'
    )


def test_spec2_config_errors_are_located(run: Run, workdir: Path) -> None:
    doc = yaml.safe_load((FIXTURES / "spec2-test-config.yaml").read_text())
    doc["spec"]["config"]["storage"]["files"][0]["mode"] = 2048
    code, out, _ = run("validate", write("spec2.yaml", doc))
    assert code == 1
    assert out == (
        "spec2.yaml: spec.config.storage.files[0].mode: invalid mode 04000 for /etc/coreos/update.conf, "
        "cannot exceed 0777\n"
    )


def test_machineconfiguration_with_a_bad_service_name(run: Run, workdir: Path) -> None:
    code, out, _ = run("validate", "policy-bad-service.yaml")
    assert code == 1
    lines = out.splitlines()
    assert len(lines) == 2
    prefix = "policy-bad-service.yaml: spec.nodeDisruptionPolicy.files[0].actions[0].reload.serviceName: "
    assert all(line.startswith(prefix) for line in lines)
    assert lines[0] == prefix + (
        "Invalid ${SERVICETYPE} in service name. Expected format is ${NAME}${SERVICETYPE}, "
        "where ${SERVICETYPE} must be one of "
        '".service", ".socket", ".device", ".mount", ".automount", ".swap", ".target", ".path", ".timer",'
        '".snapshot", ".slice" or ".scope".'
    )


def test_machineconfiguration_in_a_template_is_located(run: Run, workdir: Path) -> None:
    doc = {
        "kind": "Template",
        "objects": [
            {"kind": "MachineConfiguration", "spec": {"nodeDisruptionPolicy": {"units": [{"name": "x"}]}}}
        ],
    }
    code, out, _ = run("validate", write("t.yaml", doc))
    assert code == 1
    assert "t.yaml: objects[0].spec.nodeDisruptionPolicy.units[0].name: " in out
    assert "t.yaml: objects[0].spec.nodeDisruptionPolicy.units[0].actions: Required value" in out


def test_unknown_kind(run: Run, workdir: Path) -> None:
    assert run("validate", write("cm.yaml", {"kind": "ConfigMap", "data": {}})) == (
        1,
        "cm.yaml: expected a MachineConfig, an Ignition config or a MachineConfiguration, "
        "got kind 'ConfigMap'\n",
        "",
    )


def test_invalid_machineconfig_field(run: Run, workdir: Path) -> None:
    doc = valid_mc()
    doc["spec"]["kernelArguments"] = "nosmt"
    assert run("validate", write("mc.yaml", doc)) == (
        1,
        "mc.yaml: spec.kernelArguments: expected a list of strings\n",
        "",
    )


# ---------------------------------------------------------------- several files, JSON and YAML output


def test_several_files_report_each_bad_one(run: Run, workdir: Path) -> None:
    bad1 = write("bad1.yaml", broken(lambda ign: set_mode(ign, 1023)))
    bad2 = write("bad2.json", b"{")
    code, out, _ = run("validate", bad1, "valid-mc.yaml", bad2)
    assert code == 1
    lines = out.splitlines()
    assert [line.split(":")[0] for line in lines] == ["bad1.yaml", "bad2.json"]


def test_json_output(run: Run, workdir: Path) -> None:
    bad = write("bad.yaml", broken(lambda ign: set_mode(ign, 1023)))
    code, out, err = run("validate", "-o", "json", "valid-mc.yaml", bad, "template-spec32-unused-key.yaml")
    assert code == 1
    assert err == ""
    assert json.loads(out) == {
        "valid": False,
        "files": [
            {"file": "valid-mc.yaml", "valid": True, "findings": []},
            {
                "file": "bad.yaml",
                "valid": False,
                "findings": [
                    {
                        "path": "spec.config.storage.files[3].mode",
                        "message": "invalid mode 01777 for /usr/local/bin/hello.sh, cannot exceed 0777",
                        "severity": "error",
                    }
                ],
            },
            {
                "file": "template-spec32-unused-key.yaml",
                "valid": True,
                "findings": [
                    {
                        "path": "objects[0].spec.config.storage.files[0].filesystem",
                        "message": "Unused key filesystem",
                        "severity": "warning",
                    }
                ],
            },
        ],
    }


def test_json_output_for_valid_files(run: Run, workdir: Path) -> None:
    code, out, _ = run("validate", "--output", "json", "valid-mc.yaml")
    assert code == 0
    assert json.loads(out) == {
        "valid": True,
        "files": [{"file": "valid-mc.yaml", "valid": True, "findings": []}],
    }


def test_yaml_output_matches_json(run: Run, workdir: Path) -> None:
    bad = write("bad.json", b"[")
    _, as_json, _ = run("validate", "-o", "json", bad)
    code, as_yaml, _ = run("validate", "-o", "yaml", bad)
    assert code == 1
    assert yaml.safe_load(as_yaml) == json.loads(as_json)


# ---------------------------------------------------------------- usage


def test_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["validate", "--help"])
    assert info.value.code == 0
    assert "usage: mcd validate" in capsys.readouterr().out


def test_no_file_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["validate"])
    assert info.value.code == 1
    assert "the following arguments are required: PATH" in capsys.readouterr().err


def test_gzip_contents_are_valid(run: Run, workdir: Path) -> None:
    def change(ign: dict[str, Any]) -> None:
        payload = base64.b64encode(gzip.compress(b"hello world\n")).decode()
        files(ign)[0]["contents"] = {
            "source": "data:;base64," + payload,
            "compression": "gzip",
            "verification": {"hash": "sha512-" + hashlib.sha512(b"hello world\n").hexdigest()},
        }

    assert run("validate", write("mc.yaml", broken(change))) == (0, "", "")


# ---------------------------------------------------------------- known bugs


def test_validate_checks_the_machineconfig_api_version(run: Run, workdir: Path) -> None:
    doc = valid_mc()
    doc["apiVersion"] = "v1"
    name = write("mc.yaml", doc)
    assert run("plan", "-", name) == (1, "", "mc.yaml: apiVersion: unexpected apiVersion 'v1'\n")
    assert run("validate", name) == (1, "mc.yaml: apiVersion: unexpected apiVersion 'v1'\n", "")


def test_deeply_nested_json_is_reported(run: Run, workdir: Path) -> None:
    code, out, _ = run("validate", write("deep.json", b"[" * 1000 + b"]" * 1000))
    assert code == 1
    assert out.startswith("deep.json: ")


def test_deeply_nested_policy_value_is_reported(run: Run, workdir: Path) -> None:
    deep = "[" * 3000 + "]" * 3000
    text = (
        f"kind: MachineConfiguration\nspec:\n  nodeDisruptionPolicy:\n    files:\n      - path: {deep}\n"
        "        actions: [{type: None}]\n"
    )
    code, out, _ = run("validate", write("p.yaml", text.encode()))
    assert code == 1
    assert out == "p.yaml: nested deeper than 100 levels\n"
