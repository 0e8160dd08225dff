"""kubectl's habits on every read command (issue 28 item 5): for people by default, `-o json|yaml`
for machines with the old bytes, one default root, `validate` of a directory, usage errors as one
line and a hint that names what is missing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from clirun import Run

from mcd.cli.main import main

REPO = Path(__file__).resolve().parents[2]
EX = REPO / "examples"
POOL = EX / "pool"
OLD, NEW = str(EX / "old.yaml"), str(EX / "new.yaml")


def test_plan_is_for_people_by_default_and_json_under_its_flag(run: Run) -> None:
    code, text, _ = run("plan", OLD, NEW)
    assert code == 0
    assert text.startswith("plan rendered-worker-1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d -> ")
    assert run("plan", OLD, NEW, "-o", "text") == (0, text, "")
    code, out, _ = run("plan", OLD, NEW, "-o", "json")
    assert json.loads(out)["reconcilable"] is True
    assert out.startswith("{\n  ")  # the old default's bytes: indented JSON


def test_render_is_a_summary_by_default_and_the_object_under_o_yaml(run: Run) -> None:
    code, text, _ = run("render", "--pool", "worker", str(POOL))
    assert code == 0
    first, counts, _, hint = text.splitlines()
    assert first.startswith("rendered-worker-") and first.endswith("  (pool worker)")
    assert counts == "  files: 1, units: 1, users: 1, kernel arguments: 1, extensions: 0"
    assert "-o yaml" in hint
    code, out, _ = run("render", "--pool", "worker", str(POOL), "-o", "yaml")
    assert yaml.safe_load(out)["metadata"]["name"] == first.split()[0]


@pytest.mark.parametrize("command", ["status", "check-disk", "firstboot-complete-machineconfig"])
def test_one_default_root_for_every_command(run: Run, command: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """/rootfs (upstream's, where the pod mounts the node), or $MCD_ROOT_MOUNT, for every command:
    `mcd status` no longer defaults to / alone."""
    code, _, err = run(command)
    assert code == 1
    assert err.startswith("mcd: --root-mount /rootfs is not a directory")
    monkeypatch.setenv("MCD_ROOT_MOUNT", "/nonexistent-root")
    code, _, err = run(command)
    assert err.startswith("mcd: --root-mount /nonexistent-root is not a directory")


def test_validate_takes_a_directory(run: Run, tmp_path: Path) -> None:
    assert run("validate", str(POOL)) == (0, "", "")
    code, out, _ = run("validate", str(POOL), "-o", "json")
    assert [f["file"] for f in json.loads(out)["files"]] == [str(p) for p in sorted(POOL.glob("*.yaml"))]
    (tmp_path / "bad.yaml").write_text("kind: MachineConfig\nspec: 3\n")
    (tmp_path / "notes.txt").write_text("not a config")
    code, out, err = run("validate", str(tmp_path))
    assert code == 1
    assert out.startswith(f"{tmp_path / 'bad.yaml'}: spec: ")
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out, err = run("validate", str(empty))
    assert (code, out) == (1, "")
    assert err == f"{empty}: no *.yaml, *.yml or *.json file in this directory\n"


def test_an_unreadable_input_is_said_on_stderr(run: Run, tmp_path: Path) -> None:
    code, out, err = run("validate", str(tmp_path / "nope.yaml"))
    assert (code, out) == (1, "")
    assert err == f"{tmp_path / 'nope.yaml'}: cannot read: No such file or directory\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--root-mount", "/"], "NEW is missing: mcd plan --root-mount DIR NEW (the node at DIR gives OLD)"),
        ([], "OLD and NEW are missing: mcd plan OLD NEW, or mcd plan --root-mount DIR NEW"),
        ([OLD], "NEW is missing: mcd plan OLD NEW, or mcd plan --root-mount DIR NEW"),
    ],
)
def test_plan_says_which_file_is_missing(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["plan", *argv])
    assert exited.value.code == 1
    assert capsys.readouterr().err == f"mcd plan: error: {message}\nSee 'mcd plan --help'.\n"
