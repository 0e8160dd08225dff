"""mcd.host.root: config paths map under the root; symlinks resolve as if the root were `/`."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcd.host.root import MAX_SYMLINKS, DirCache, HostRoot, PathEscapeError


@pytest.fixture
def root(tmp_path: Path) -> HostRoot:
    (tmp_path / "etc").mkdir()
    (tmp_path / "usr" / "etc").mkdir(parents=True)
    return HostRoot(tmp_path)


def link(root: HostRoot, at: str, target: str) -> None:
    path = root.prefix / at.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, path)


# --- plain joins ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config_path", "under"),
    [
        ("/", ""),
        ("/etc/hosts", "etc/hosts"),
        ("//etc//./hosts", "etc/hosts"),
        ("/etc/", "etc"),
        ("/no/such/dir/file", "no/such/dir/file"),
    ],
)
def test_join_plain_paths(root: HostRoot, config_path: str, under: str) -> None:
    assert root.join(config_path) == root.prefix / under


def test_nonexistent_component_below_a_regular_file_is_joined_literally(root: HostRoot) -> None:
    (root.prefix / "etc" / "passwd").write_text("")
    assert root.join("/etc/passwd/x") == root.prefix / "etc/passwd/x"


@pytest.mark.parametrize(
    ("config_path", "message"),
    [
        ("etc/hosts", "not an absolute path"),
        ("", "not an absolute path"),
        ("/etc/../../x", '".." components are not allowed'),
        ("/..", '".." components are not allowed'),
        ("/etc/\0x", "NUL"),
    ],
)
def test_join_refuses_bad_config_paths(root: HostRoot, config_path: str, message: str) -> None:
    with pytest.raises(PathEscapeError, match=message):
        root.join(config_path)


def test_path_escape_error_is_a_value_error() -> None:
    assert issubclass(PathEscapeError, ValueError)


# --- symlinks inside the root ---------------------------------------------------------------------


def test_relative_parent_link_resolves_from_the_links_directory(root: HostRoot) -> None:
    link(root, "/etc/ssh", "../usr/etc")
    assert root.join("/etc/ssh/sshd_config") == root.prefix / "usr/etc/sshd_config"


def test_absolute_parent_link_is_rerooted_under_the_prefix(root: HostRoot) -> None:
    link(root, "/var", "/tmp")  # the host's /tmp must never be reached
    assert root.join("/var/lib/x") == root.prefix / "tmp/lib/x"


def test_chained_links_are_followed(root: HostRoot) -> None:
    link(root, "/a", "b")
    link(root, "/b", "/usr/c")
    link(root, "/usr/c", "etc")
    assert root.join("/a/f") == root.prefix / "usr/etc/f"


def test_dotdot_inside_a_link_target_stays_in_bounds(root: HostRoot) -> None:
    link(root, "/etc/x", "../usr/./etc/../etc")
    assert root.join("/etc/x/f") == root.prefix / "usr/etc/f"


def test_dotdot_at_the_root_is_fine_when_it_does_not_climb_above(root: HostRoot) -> None:
    link(root, "/etc/up", "..")
    assert root.join("/etc/up/usr") == root.prefix / "usr"


def test_final_symlink_is_not_followed_by_default(root: HostRoot) -> None:
    link(root, "/etc/localtime", "../../../outside")
    assert root.join("/etc/localtime") == root.prefix / "etc/localtime"


def test_final_symlink_followed_on_request(root: HostRoot) -> None:
    link(root, "/etc/localtime", "/usr/share/zoneinfo/UTC")
    assert root.join("/etc/localtime", follow_final=True) == root.prefix / "usr/share/zoneinfo/UTC"


def test_link_pointing_at_the_root_itself(root: HostRoot) -> None:
    link(root, "/self", "/")
    assert root.join("/self/etc", follow_final=True) == root.prefix / "etc"
    assert root.join("/self", follow_final=True) == root.prefix


def test_chain_of_exactly_the_limit_is_followed(root: HostRoot) -> None:
    for i in range(MAX_SYMLINKS - 1):
        link(root, f"/l{i}", f"l{i + 1}")
    link(root, f"/l{MAX_SYMLINKS - 1}", "etc")
    assert root.join("/l0/f") == root.prefix / "etc/f"


# --- refusals -------------------------------------------------------------------------------------


def test_relative_dotdot_chain_escape_is_refused_with_the_link_named(root: HostRoot) -> None:
    link(root, "/etc/sub", "../../..")
    with pytest.raises(PathEscapeError) as info:
        root.join("/etc/sub/x")
    assert (
        str(info.value) == f"refusing /etc/sub/x: symlink /etc/sub -> ../../.. leaves the root {root.prefix}"
    )


def test_example_message_from_the_brief(tmp_path: Path) -> None:
    root = HostRoot(tmp_path)
    os.symlink("../../..", tmp_path / "etc")
    with pytest.raises(PathEscapeError) as info:
        root.join("/etc/x")
    assert (
        str(info.value) == f"refusing /etc/x: symlink /etc -> ../../.. leaves the root {tmp_path.resolve()}"
    )


def test_absolute_target_climbing_above_the_root_is_refused(root: HostRoot) -> None:
    link(root, "/etc/abs", "/../etc")
    with pytest.raises(PathEscapeError, match=r"symlink /etc/abs -> /\.\./etc leaves the root"):
        root.join("/etc/abs/f")


def test_escape_through_a_symlinked_parent_names_the_inner_link(root: HostRoot) -> None:
    link(root, "/etc/d", "/usr/etc")
    link(root, "/usr/etc/out", "../../../x")
    with pytest.raises(PathEscapeError, match=r"symlink /usr/etc/out -> \.\./\.\./\.\./x leaves"):
        root.join("/etc/d/out/f")


def test_escaping_final_link_is_refused_only_when_followed(root: HostRoot) -> None:
    link(root, "/etc/f", "../../x")
    assert root.join("/etc/f") == root.prefix / "etc/f"
    with pytest.raises(PathEscapeError, match="leaves the root"):
        root.join("/etc/f", follow_final=True)


@pytest.mark.parametrize(
    "links",
    [
        {"/a": "a"},
        {"/a": "b", "/b": "a"},
        {"/a": "/b/x", "/b": "/a"},
    ],
    ids=["self", "pair", "absolute"],
)
def test_symlink_loops_are_refused(root: HostRoot, links: dict[str, str]) -> None:
    for at, target in links.items():
        link(root, at, target)
    with pytest.raises(PathEscapeError, match="too many levels of symbolic links"):
        root.join("/a/f")


def test_chain_longer_than_the_limit_is_refused(root: HostRoot) -> None:
    for i in range(MAX_SYMLINKS):
        link(root, f"/l{i}", f"l{i + 1}")
    link(root, f"/l{MAX_SYMLINKS}", "etc")
    with pytest.raises(PathEscapeError, match="too many levels"):
        root.join("/l0/f")


# --- the root itself and the inverse --------------------------------------------------------------


def test_prefix_is_absolute_and_resolved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "real").mkdir()
    os.symlink("real", tmp_path / "alias")
    monkeypatch.chdir(tmp_path)
    assert HostRoot("alias").prefix == (tmp_path / "real").resolve()
    assert HostRoot(tmp_path / "alias") == HostRoot(tmp_path / "real")


def test_is_live_only_for_slash(tmp_path: Path) -> None:
    assert HostRoot("/").is_live
    assert not HostRoot(tmp_path).is_live


def test_live_root_joins_to_the_host_path() -> None:
    assert HostRoot("/").join("/etc/machine-config-daemon/currentconfig") == Path(
        "/etc/machine-config-daemon/currentconfig"
    )


@pytest.mark.parametrize("config_path", ["/", "/etc/hosts", "/a/b/c"])
def test_relative_inverts_join(root: HostRoot, config_path: str) -> None:
    assert root.relative(root.join(config_path)) == config_path


def test_relative_refuses_paths_outside_the_root(root: HostRoot, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not under the root"):
        root.relative(tmp_path.parent / "elsewhere")
    with pytest.raises(ValueError, match="not a normalised absolute path"):
        root.relative(root.prefix / "etc" / ".." / ".." / "x")
    with pytest.raises(ValueError, match="not a normalised absolute path"):
        root.relative(Path("etc/hosts"))


# --- property: whatever the links, a join never leaves the root -----------------------------------

NAMES = ["a", "b", "c"]
targets = st.builds(
    lambda absolute, parts: ("/" if absolute else "") + "/".join(parts),
    st.booleans(),
    st.lists(st.sampled_from([*NAMES, "..", "."]), min_size=1, max_size=4),
)
locations = st.lists(st.sampled_from(NAMES), min_size=1, max_size=3).map(lambda p: "/" + "/".join(p))


@settings(max_examples=300, deadline=None)
@given(
    links=st.dictionaries(locations, targets, max_size=6),
    query=st.lists(st.sampled_from(NAMES), min_size=1, max_size=5).map(lambda p: "/" + "/".join(p)),
    follow_final=st.booleans(),
)
def test_join_never_resolves_outside_the_root(links: dict[str, str], query: str, follow_final: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = HostRoot(Path(tmp) / "root")
        (root.prefix / "a" / "b").mkdir(parents=True)
        (root.prefix / "c").mkdir()
        for at, target in links.items():
            path = root.prefix / at.lstrip("/")
            if path.parent.is_dir() and not os.path.lexists(path):
                os.symlink(target, path)
        try:
            result = root.join(query, follow_final=follow_final)
        except PathEscapeError:
            return
        assert result == root.prefix or root.prefix in result.parents
        # Every component but a final unfollowed one is resolved: the host agrees on the parent.
        resolved = result if follow_final else result.parent
        assert os.path.realpath(resolved) == str(resolved)


def test_caching_dirs_gives_the_same_answers(tmp_path: Path) -> None:
    """Within caching_dirs() joins resolve as without it, for links, missing parts and refusals."""
    import itertools

    root_dir = tmp_path / "r"
    (root_dir / "etc" / "real").mkdir(parents=True)
    (root_dir / "usr" / "lib").mkdir(parents=True)
    os.symlink("/usr/lib", root_dir / "etc" / "abs")
    os.symlink("real", root_dir / "etc" / "rel")
    os.symlink("../../../..", root_dir / "etc" / "escape")
    root = HostRoot(root_dir)
    paths = [
        "/etc/abs/x",
        "/etc/rel/y",
        "/etc/missing/z",
        "/etc/real/f",
        "/top",
        "/etc/escape/x",
        "/etc/../x",
        "/etc/abs",
        "/etc/a\0b",
    ]

    def outcome(p: str, follow: bool) -> object:
        try:
            return root.join(p, follow_final=follow)
        except PathEscapeError as exc:
            return type(exc)

    def as_str(p: str, dirs: DirCache | None = None) -> object:
        try:
            return root.join_str(p, dirs)
        except PathEscapeError as exc:
            return type(exc)

    plain = {(p, f): outcome(p, f) for p, f in itertools.product(paths, (False, True))}
    # join_str: the same answer as a string, with no cache, its own cache or caching_dirs'
    strings = {p: str(r) if isinstance(r, Path) else r for (p, f), r in plain.items() if not f}
    own: DirCache = {}
    assert {p: as_str(p) for p in paths} == strings
    assert {p: as_str(p, own) for p in paths * 2} == strings
    with root.caching_dirs():
        cached = {(p, f): outcome(p, f) for p, f in itertools.product(paths * 2, (False, True))}
        assert {p: as_str(p) for p in paths} == strings
    assert cached == plain


@settings(max_examples=300, deadline=None)
@given(
    links=st.dictionaries(locations, targets, max_size=6),
    queries=st.lists(
        st.tuples(
            st.lists(st.sampled_from([*NAMES, "d"]), min_size=1, max_size=5).map(lambda p: "/" + "/".join(p)),
            st.booleans(),
        ),
        min_size=1,
        max_size=8,
    ),
)
def test_caching_dirs_gives_the_same_answers_whatever_the_links(
    links: dict[str, str], queries: list[tuple[str, bool]]
) -> None:
    """Directories resolved from their cached parents: the same paths and refusals (with their
    messages) as a walk from the root, in any order of queries."""
    with tempfile.TemporaryDirectory() as tmp:
        root = HostRoot(Path(tmp) / "root")
        (root.prefix / "a" / "b").mkdir(parents=True)
        (root.prefix / "c").mkdir()
        for at, target in links.items():
            path = root.prefix / at.lstrip("/")
            if path.parent.is_dir() and not os.path.lexists(path):
                os.symlink(target, path)

        def outcome(query: str, follow: bool) -> object:
            try:
                return root.join(query, follow_final=follow)
            except PathEscapeError as exc:
                return str(exc)

        def as_str(query: str, dirs: DirCache) -> object:
            try:
                return root.join_str(query, dirs)
            except PathEscapeError as exc:
                return str(exc)

        plain = [outcome(q, f) for q, f in queries]
        pairs = zip(plain, queries, strict=True)
        unfollowed = [str(r) if isinstance(r, Path) else r for r, (_, f) in pairs if not f]
        own: DirCache = {}
        assert [as_str(q, own) for q, f in queries if not f] == unfollowed
        with root.caching_dirs():
            assert [outcome(q, f) for q, f in queries] == plain
