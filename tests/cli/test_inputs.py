"""mcd.cli.inputs reads path arguments as pathlib does, without importing it: its names, its
suffixes, its directory listings and its errors, compared with pathlib's own."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcd.cli import inputs
from mcd.config.findings import InputError

PATHS = st.text(alphabet="/.ab", max_size=12)
NAMES = st.text(alphabet=".ayml~", min_size=1, max_size=8).filter(lambda n: n not in (".", ".."))


@settings(max_examples=500, deadline=None)
@given(PATHS)
def test_a_name_is_pathlibs(path: str) -> None:
    assert inputs.pathlib_name(path) == str(PurePosixPath(path))


@settings(max_examples=500, deadline=None)
@given(PATHS, NAMES)
def test_a_child_is_pathlibs(directory: str, name: str) -> None:
    assert inputs.child_name(directory, name) == str(PurePosixPath(directory) / name)


@settings(max_examples=500, deadline=None)
@given(NAMES)
def test_a_suffix_is_pathlibs(name: str) -> None:
    assert inputs.suffix(name) == PurePosixPath(name).suffix


def _pathlib_files_of(arg: str) -> list[str]:
    """The listing as it was written with pathlib."""
    if arg != "-" and Path(arg).is_dir():
        names = sorted(p.name for p in Path(arg).iterdir() if p.suffix in inputs.SUFFIXES and p.is_file())
        return [str(Path(arg) / name) for name in names]
    return [arg]


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    pool = tmp_path / "pool"
    pool.mkdir()
    for name in ("b.yaml", "a.json", "c.yml", ".yaml", "d.txt", "e.yaml.", "..yaml"):
        (pool / name).write_text("{}")
    (pool / "sub.yaml").mkdir()
    (pool / "gone.yaml").symlink_to(tmp_path / "missing")
    (pool / "link.json").symlink_to(pool / "a.json")
    (tmp_path / "one.yaml").write_text("{}")
    return tmp_path


ARGS = ["pool", "pool/", "pool//", "./pool/.", "one.yaml", "one.yaml/", "", ".", "-", "missing"]
FILES = ["one.yaml", "one.yaml/", "./one.yaml", "missing", "pool", "", "pool//b.yaml"]


@pytest.mark.parametrize("arg", ARGS)
def test_a_listing_is_pathlibs(tree: Path, arg: str) -> None:
    del tree
    try:
        theirs: object = _pathlib_files_of(arg)
    except OSError as exc:
        theirs = type(exc)
    try:
        mine: object = inputs.files_of(arg)
    except InputError:
        mine = "no config file" if theirs == [] else "error"
    assert mine == (theirs if theirs != [] else "no config file")


@pytest.mark.parametrize("arg", FILES)
def test_a_file_reads_as_pathlib_reads_it(tree: Path, arg: str) -> None:
    del tree

    def outcome(read: object) -> object:
        try:
            return read()  # type: ignore[operator]
        except OSError as exc:
            return (type(exc), exc.errno)

    assert outcome(lambda: inputs.read_file(arg)) == outcome(lambda: Path(arg).read_bytes())


def test_an_entry_that_cannot_be_examined_fails_as_with_pathlib(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As in a directory that can be listed but not searched (r--): pathlib raises, not skips."""
    real_stat = os.stat

    def stat(path: object, *args: object, **kwargs: object) -> os.stat_result:
        if os.fspath(path).startswith("pool/"):  # type: ignore[call-overload]
            raise PermissionError(13, "Permission denied")
        return real_stat(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "stat", stat)
    with pytest.raises(PermissionError):
        _pathlib_files_of("pool")
    with pytest.raises(InputError) as raised:
        inputs.files_of("pool")
    assert raised.value.findings[0].message == "cannot read: Permission denied"
