"""Bad input and bad flags, tried as a new user would: one clear line each, exit 1, no traceback."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest
from clirun import Run
from mcd_sim.sandbox import make_sandbox_root

from mcd.cli.main import _describe_error, main
from mcd.config.findings import Finding


def test_a_finding_about_the_whole_document_has_no_path_marker() -> None:
    assert Finding((), "empty document").render("a.yaml") == "a.yaml: empty document"
    assert Finding(("spec",), "expected an object").render("a.yaml") == "a.yaml: spec: expected an object"


def test_control_characters_from_the_input_are_escaped() -> None:
    line = Finding(("storage", "files", 0, "path"), 'path "/etc/\x1b[2Jx\r" is bad').render("f\x07.yaml")
    assert line == 'f\\x07.yaml: storage.files[0].path: path "/etc/\\x1b[2Jx\\r" is bad'
    assert line.isprintable()


def test_sandbox_on_a_file_says_it_is_not_a_directory(sim: Run, tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    code, out, err = sim("sandbox", str(target))
    assert code == 1
    assert out == ""
    assert err == f"{target}: not a directory: give a new or an existing directory\n"


def test_sandbox_below_a_file_names_the_file(sim: Run, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    code, _, err = sim("sandbox", str(tmp_path / "file" / "root"))
    assert code == 1
    assert f"({tmp_path / 'file'} is not a directory)" in err
    assert "Errno" not in err


def test_a_missing_root_mount_names_the_flag(run: Run, tmp_path: Path) -> None:
    missing = str(tmp_path / "nope")
    code, _, err = run("check-disk", "--root-mount", missing)
    assert code == 1
    assert (
        err
        == f"mcd: --root-mount {missing} is not a directory (give the node's root with --root-mount DIR)\n"
    )


def test_a_name_too_long_is_not_printed_whole() -> None:
    long_path = "/etc/" + "a" * 5000
    text = _describe_error(OSError(errno.ENAMETOOLONG, "File name too long", long_path))
    assert text.startswith("File name too long: /etc/aaa")
    assert text.endswith("…")
    assert len(text) < 200


def test_an_error_text_with_control_characters_is_escaped() -> None:
    assert _describe_error(RuntimeError("bad\x1b]0;title\x07")) == "bad\\x1b]0;title\\x07"


def _tree(root: Path) -> list[tuple[str, bytes]]:
    return sorted((str(p.relative_to(root)), p.read_bytes() if p.is_file() else b"") for p in root.rglob("*"))


def _config_with_file(path: str, **extra: object) -> str:
    entry = {"path": path, "contents": {"source": "data:,x"}, **extra}
    mc = {
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": "bad"},
        "spec": {"config": {"ignition": {"version": "3.5.0"}, "storage": {"files": [entry]}}},
    }
    return json.dumps(mc)


@pytest.mark.parametrize(
    ("path", "extra", "message"),
    [
        ("/", {}, 'path "/" is the root directory itself'),
        ("/etc/a\0b", {}, "contains a NUL byte"),
        ("/etc/" + "n" * 300, {}, "is longer than 255 bytes"),
        ("/etc/machine-config-daemon/currentconfig", {}, "the daemon's own state"),
        ("/etc/machine-config-daemon/orig/etc/hosts.mcdorig", {}, "the daemon's own state"),
        ("/etc/a", {"user": {"id": -1}}, "invalid user id -1"),
        ("/etc/a", {"user": {"id": 0, "name": "core"}}, "cannot set both id and name"),
    ],
    ids=["root", "nul", "long-name", "currentconfig", "orig-backup", "negative-id", "id-and-name"],
)
def test_validate_and_start_refuse_alike_and_start_writes_nothing(
    run: Run, tmp_path: Path, path: str, extra: dict[str, object], message: str
) -> None:
    config = tmp_path / "bad.json"
    config.write_text(_config_with_file(path, **extra))
    code, out, _ = run("validate", str(config))
    assert code == 1
    assert message in out
    assert "\0" not in out
    root = tmp_path / "root"
    make_sandbox_root(root)
    before = _tree(root)
    code, out, err = run("start", "--once-from", str(config), "--root-mount", str(root), "--skip-reboot")
    assert code == 1
    assert message in err
    assert _tree(root) == before


def _gzip_config(size: int) -> str:
    import base64
    import gzip

    source = "data:;base64," + base64.b64encode(gzip.compress(b"\0" * size)).decode()
    mc = json.loads(_config_with_file("/etc/big"))
    mc["spec"]["config"]["storage"]["files"][0]["contents"] = {"source": source, "compression": "gzip"}
    return json.dumps(mc)


def test_max_file_size_refuses_a_larger_file_with_its_location(run: Run, tmp_path: Path) -> None:
    config = tmp_path / "big.json"
    config.write_text(_gzip_config(4096))
    assert run("validate", str(config))[0] == 0
    code, out, _ = run("validate", "--max-file-size", "2K", str(config))
    assert code == 1
    assert out == (
        f"{config}: spec.config.storage.files[0].contents.source: contents of /etc/big are larger than "
        "the maximum file size of 2048 bytes (--max-file-size)\n"
    )
    code, _, err = run("plan", "-o", "json", "--max-file-size", "2K", "-", str(config))
    assert code == 1
    assert "larger than the maximum file size of 2048 bytes" in err


def test_a_bad_max_file_size_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["validate", "--max-file-size", "lots", "x.yaml"])
    assert info.value.code == 1
    assert "invalid size 'lots'" in capsys.readouterr().err


def _mc(spec: dict[str, object], **top: object) -> str:
    return json.dumps(
        {
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfig",
            "metadata": {"name": "x"},
            "spec": spec,
            **top,
        }
    )


@pytest.mark.parametrize(
    ("doc", "where", "message"),
    [
        (_mc({"kernelArgument": ["nosmt"]}), "spec.kernelArgument", 'unknown field "spec.kernelArgument"'),
        (_mc({}, status={}), "status", 'unknown field "status"'),
        (_mc({"kernelType": "rt"}), "spec.kernelType", "kernelType=rt is invalid"),
        (_mc({"extensions": ["usbguard", "nope"]}), "spec.extensions[1]", "invalid extension 'nope'"),
    ],
    ids=["unknown-spec-field", "unknown-top-field", "kernel-type-rt", "unknown-extension"],
)
def test_what_the_api_server_or_the_node_refuses_is_an_error_everywhere(
    run: Run, tmp_path: Path, doc: str, where: str, message: str
) -> None:
    config = tmp_path / "mc.json"
    config.write_text(doc)
    code, out, _ = run("validate", str(config))
    assert code == 1
    assert out.startswith(f"{config}: {where}: {message}")
    code, _, err = run("plan", "-o", "json", "-", str(config))
    assert code == 1
    assert err.startswith(f"{config}: {where}: {message}")
    root = tmp_path / "root"
    make_sandbox_root(root)
    before = _tree(root)
    code, _, err = run("start", "--once-from", str(config), "--root-mount", str(root), "--skip-reboot")
    assert code == 1
    assert message in err
    assert _tree(root) == before


def test_an_unknown_ignition_key_stays_a_warning_as_in_ignition(run: Run, tmp_path: Path) -> None:
    config = tmp_path / "mc.json"
    config.write_text(_mc({"config": {"ignition": {"version": "3.5.0"}, "storage": {"file": []}}}))
    code, out, err = run("validate", str(config))
    assert (code, out) == (0, "")
    assert err == f"{config}: spec.config.storage.file: warning: Unused key file\n"


def test_kernel_arguments_of_a_spec_that_lacks_them_are_ignored_by_validate_and_plan(
    run: Run, tmp_path: Path
) -> None:
    # Ignition 3.2 has no kernelArguments: an unused key for validate, and no kargs change for plan
    config = tmp_path / "mc.json"
    ign = {"ignition": {"version": "3.2.0"}, "kernelArguments": {"shouldExist": ["nosmt"]}}
    config.write_text(_mc({"config": ign}))
    code, _, err = run("validate", str(config))
    assert code == 0
    assert "warning: Unused key kernelArguments" in err
    code, out, _ = run("plan", "-o", "json", "-", str(config))
    assert code == 0
    assert json.loads(out)["reconcilable"] is True
    ign["ignition"] = {"version": "3.3.0"}
    config.write_text(_mc({"config": ign}))
    code, out, _ = run("plan", "-o", "json", "-", str(config))
    assert code == 2
    assert json.loads(out)["errors"][0].endswith("ignition kargs section contains changes")


def test_an_old_config_upstream_would_not_revalidate_is_not_bad_input(run: Run, tmp_path: Path) -> None:
    # upstream holds the running config to parsing only: a mode beyond 0777 there is no input error
    old = tmp_path / "old.json"
    old.write_text(_config_with_file("/etc/a", mode=0o4755))
    new = tmp_path / "new.json"
    new.write_text(_config_with_file("/etc/a", mode=0o755))
    code, out, err = run("plan", "-o", "json", str(old), str(new))
    assert (code, err) == (0, "")
    assert "inputErrors" not in json.loads(out)
    code, _, err = run("plan", "-o", "json", "-", str(old))
    assert code == 1
    assert "cannot exceed 0777" in err


def test_storage_override_values_are_checked(run: Run, tmp_path: Path) -> None:
    policy = tmp_path / "mc.yaml"
    policy.write_text(
        json.dumps(
            {
                "apiVersion": "operator.openshift.io/v1",
                "kind": "MachineConfiguration",
                "metadata": {"name": "cluster"},
                "spec": {"irreconcilableValidationOverrides": {"storage": ["Disks", "Partitions"]}},
            }
        )
    )
    line = (
        f"{policy}: spec.irreconcilableValidationOverrides.storage[1]: "
        'Unsupported value: "Partitions": supported values: "Disks", "FileSystems", "Raid"\n'
    )
    assert run("validate", str(policy)) == (1, line, "")
    config = tmp_path / "new.json"
    config.write_text(_config_with_file("/etc/a"))
    code, _, err = run("plan", "-o", "json", "--policy", str(policy), "-", str(config))
    assert (code, err) == (1, line)
