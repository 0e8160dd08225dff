"""Path rules of a config (mcd.config.paths) and the path checks of the parser: the fast paths
taken for ordinary paths give the verdicts of the plain rules."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from mcd.config.ignition import parse_ignition
from mcd.config.paths import (
    LOCK_FILE,
    NAME_MAX,
    PATH_MAX,
    STATE_DIR,
    STATE_FILES,
    STATE_TREES,
    clean,
    is_clean,
    path_problem,
    state_problem,
)
from mcd.config.text import shown


def plain_path_problem(path: str) -> str | None:
    """The rules one by one, as mcd checked them before the fast path."""
    if not path.startswith("/"):
        return f'path "{shown(path)}" is not absolute'
    if "\0" in path:
        return f'path "{shown(path)}" contains a NUL byte'
    if clean(path) != path:
        return f'path "{shown(path)}" is not clean (want "{shown(clean(path))}")'
    if path == "/":
        return 'path "/" is the root directory itself'
    if len(path.encode("utf-8", "surrogatepass")) >= PATH_MAX:
        return f'path "{shown(path, 60)}" is longer than {PATH_MAX - 1} bytes'
    for part in path.split("/"):
        if len(part.encode("utf-8", "surrogatepass")) > NAME_MAX:
            return f'path component "{shown(part, 60)}" is longer than {NAME_MAX} bytes'
    return None


def plain_state_problem(path: str, kind: str) -> str | None:
    def at_or_under(p: str, top: str) -> bool:
        return p == top or p.startswith(top + "/")

    if path in STATE_FILES or path == STATE_DIR or any(at_or_under(path, t) for t in STATE_TREES):
        return f"{path} is the daemon's own state ({STATE_DIR}): a config cannot write it"
    if at_or_under(path, LOCK_FILE):
        return f"{path} is the daemon's lock on the root ({LOCK_FILE}): a config cannot write it"
    if kind != "directory" and at_or_under(LOCK_FILE, path):
        return f"{path} holds the daemon's lock ({LOCK_FILE}): a config cannot replace it by a {kind}"
    if kind != "directory" and at_or_under(STATE_DIR, path):
        return f"{path} holds the daemon's own state ({STATE_DIR}): a config cannot replace it by a {kind}"
    return None


_PARTS = st.sampled_from(["/", ".", "..", "a", "etc", "\0", "é", "x" * 200, "machine-config-daemon", "orig"])
_PATHS = st.lists(_PARTS, max_size=30).map("".join)


@given(path=_PATHS)
@example(path="//a")
@example(path="/..")
@example(path="/a/...")
@example(path="/")
def test_is_clean_is_path_clean_unchanged(path: str) -> None:
    path = "/" + path
    assert is_clean(path) == (clean(path) == path)


@given(path=_PATHS)
@example(path="/" + "a" * 256)
@example(path="/" + "é" * 128)
@example(path="/a/" + "b/" * 2100)
def test_path_problem_is_the_plain_rules(path: str) -> None:
    assert path_problem(path) == plain_path_problem(path)
    assert path_problem("/" + path) == plain_path_problem("/" + path)


@given(
    path=st.lists(
        st.sampled_from(
            ["/", "etc", "machine-config-daemon", "orig", "noorig", "currentconfig", "x", "run", "mcd.lock"]
        )
    ).map("".join),
    kind=st.sampled_from(["file", "directory", "link"]),
)
@example(path="/etc", kind="link")
@example(path="/etc/machine-config-daemon/orig/x", kind="file")
def test_state_problem_is_the_plain_rules(path: str, kind: str) -> None:
    assert state_problem(path, kind) == plain_state_problem(path, kind)


def _storage(**sections: Any) -> dict[str, Any]:
    return {"ignition": {"version": "3.5.0"}, "storage": sections}


def _errors(doc: dict[str, Any]) -> list[tuple[tuple[str | int, ...], str]]:
    return [(f.path, f.message) for f in parse_ignition(doc).findings if f.severity == "error"]


def test_every_path_below_a_file_or_through_a_link_is_reported() -> None:
    files = [{"path": "/etc/a"}, {"path": "/etc/a/b/one"}, {"path": "/etc/a/b/two"}, {"path": "/etc/l/x/y"}]
    errors = _errors(_storage(files=files, links=[{"path": "/etc/l", "target": "/tmp"}]))
    assert errors == [
        (
            ("storage", "files", 1, "path"),
            'path "/etc/a/b/one" is below file "/etc/a" (storage.files[0].path)',
        ),
        (
            ("storage", "files", 2, "path"),
            'path "/etc/a/b/two" is below file "/etc/a" (storage.files[0].path)',
        ),
        (("storage", "files", 3), "file path includes link in config"),
    ]


def test_a_link_is_reported_before_a_file_further_up() -> None:
    files = [{"path": "/srv"}, {"path": "/srv/l/x"}]
    errors = _errors(_storage(files=files, links=[{"path": "/srv/l", "target": "/tmp"}]))
    assert errors == [
        (("storage", "files", 1), "file path includes link in config"),
        (("storage", "links", 0, "path"), 'path "/srv/l" is below file "/srv" (storage.files[0].path)'),
    ]


def test_a_path_of_thousands_of_components_is_checked_without_recursion() -> None:
    deep = "/a" * 2000  # 4000 bytes: a valid path
    assert _errors(_storage(files=[{"path": "/a"}, {"path": deep}])) == [
        (("storage", "files", 1, "path"), f'path "{shown(deep)}" is below file "/a" (storage.files[0].path)')
    ]
    assert _errors(_storage(files=[{"path": deep}])) == []
