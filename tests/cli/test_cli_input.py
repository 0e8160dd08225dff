"""Bad input and bad flags, tried as a new user would: one clear line each, exit 1, no traceback."""

from __future__ import annotations

import errno
from collections.abc import Callable
from pathlib import Path

import pytest

from mcd.cli import _describe_error, main
from mcd.config.findings import Finding

Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]) -> Run:
    def go(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return go


def test_a_finding_about_the_whole_document_has_no_path_marker() -> None:
    assert Finding((), "empty document").render("a.yaml") == "a.yaml: empty document"
    assert Finding(("spec",), "expected an object").render("a.yaml") == "a.yaml: spec: expected an object"


def test_control_characters_from_the_input_are_escaped() -> None:
    line = Finding(("storage", "files", 0, "path"), 'path "/etc/\x1b[2Jx\r" is bad').render("f\x07.yaml")
    assert line == 'f\\x07.yaml: storage.files[0].path: path "/etc/\\x1b[2Jx\\r" is bad'
    assert line.isprintable()


def test_sandbox_on_a_file_says_it_is_not_a_directory(run: Run, tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    code, out, err = run("sandbox", str(target))
    assert code == 1
    assert out == ""
    assert err == f"{target}: not a directory: give a new or an existing directory\n"


def test_sandbox_below_a_file_names_the_file(run: Run, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    code, _, err = run("sandbox", str(tmp_path / "file" / "root"))
    assert code == 1
    assert f"({tmp_path / 'file'} is not a directory)" in err
    assert "Errno" not in err


def test_a_missing_root_mount_names_the_flag(run: Run, tmp_path: Path) -> None:
    missing = str(tmp_path / "nope")
    code, _, err = run("check-disk", "--root-mount", missing)
    assert code == 1
    assert err == f"{missing}: not a directory (give the node's root with --root-mount DIR)\n"


def test_a_name_too_long_is_not_printed_whole() -> None:
    long_path = "/etc/" + "a" * 5000
    text = _describe_error(OSError(errno.ENAMETOOLONG, "File name too long", long_path))
    assert text.startswith("File name too long: /etc/aaa")
    assert text.endswith("…")
    assert len(text) < 200


def test_an_error_text_with_control_characters_is_escaped() -> None:
    assert _describe_error(RuntimeError("bad\x1b]0;title\x07")) == "bad\\x1b]0;title\\x07"
