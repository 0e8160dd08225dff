"""mcd.planner.registries: decoding registries.conf and upstream's safe-change rules."""

from __future__ import annotations

import pytest

from mcd.planner.registries import (
    Mirror,
    RegistriesConf,
    RegistriesError,
    Registry,
    is_safe_registries_change,
    parse_registries_conf,
)

SEARCH = 'unqualified-search-registries = ["a.io", "b.io"]\n'


def reg(body: str) -> str:
    return SEARCH + "[[registry]]\n" + body


# --- decoding -------------------------------------------------------------------------------------


def test_parse_reads_v2_fields() -> None:
    conf = parse_registries_conf(
        SEARCH
        + """
[[registry]]
prefix = "p.io"
location = "l.io/x"
insecure = true
blocked = true
mirror-by-digest-only = true
  [[registry.mirror]]
  location = "m.io"
  pull-from-mirror = "digest-only"
  insecure = true
"""
    )
    assert conf == RegistriesConf(
        ("a.io", "b.io"),
        (
            Registry(
                prefix="p.io",
                location="l.io/x",
                insecure=True,
                blocked=True,
                mirror_by_digest_only=True,
                mirrors=(Mirror("m.io", True, "digest-only"),),
            ),
        ),
    )
    assert conf.registries[0].scope == "p.io"


@pytest.mark.parametrize("text", [None, "", "# only a comment\n"])
def test_absent_or_empty_file_is_empty_config(text: str | None) -> None:
    assert parse_registries_conf(text) == RegistriesConf()


def test_keys_match_case_insensitively_like_go() -> None:
    conf = parse_registries_conf('[[Registry]]\nLocation = "x.io"\nBlocked = true\n')
    assert conf.registries == (Registry(location="x.io", blocked=True),)


def test_v1_tables_fill_no_field() -> None:
    # upstream decodes straight into V2RegistriesConf, which has no [registries] table
    conf = parse_registries_conf(
        '[registries.search]\nregistries = ["a.io"]\n[registries.block]\nregistries = ["x"]\n'
    )
    assert conf == RegistriesConf()


def test_unknown_keys_are_ignored() -> None:
    conf = parse_registries_conf(
        'short-name-mode = "enforcing"\nfoo = 1\n[[registry]]\nlocation = "x"\nbar = 2\n'
    )
    assert conf.registries == (Registry(location="x"),)


@pytest.mark.parametrize(
    "text",
    [
        "unqualified-search-registries = [",  # syntax error
        'unqualified-search-registries = "a.io"',  # not a list
        '[[registry]]\nblocked = "yes"\n',  # bool field given a string
        "[[registry]]\nlocation = 1\n",
        '[registry]\nlocation = "x"\n',  # a table where an array of tables is needed
        '[[registry]]\nlocation = "x"\n[registry.mirror]\nlocation = "m"\n',
        "[[registry]]\n[[registry.mirror]]\npull-from-mirror = true\n",
        "short-name-mode = 3\n",
        "[aliases]\nx = 1\n",
    ],
)
def test_decode_errors_raise_with_upstream_wording(text: str) -> None:
    with pytest.raises(RegistriesError, match=r"^Failed decoding TOML content from file /etc/containers/"):
        parse_registries_conf(text)


def test_undecodable_content_is_not_safe() -> None:
    assert is_safe_registries_change(SEARCH, "this is = not toml [") is False
    assert is_safe_registries_change("[[registry]]\nblocked = 1\n", SEARCH) is False


# --- unqualified-search-registries ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "safe"),
    [
        (["a", "b"], ["a", "b"], True),
        (["a", "b"], ["a", "b", "c"], True),  # appended
        ([], ["a"], True),
        (["a", "b"], ["b", "a"], False),  # reordered
        (["a", "b"], ["a"], False),  # removed
        (["a", "b"], ["c", "a", "b"], False),  # prepended shifts lookup order
    ],
)
def test_search_list_may_only_grow_at_the_end(old: list[str], new: list[str], safe: bool) -> None:
    def conf(items: list[str]) -> str:
        return "unqualified-search-registries = [" + ", ".join(f'"{i}"' for i in items) + "]\n"

    assert is_safe_registries_change(conf(old), conf(new)) is safe


# --- existing registries --------------------------------------------------------------------------


def test_identical_files_are_safe() -> None:
    text = reg('location = "r.io"\n[[registry.mirror]]\nlocation = "m.io"\n')
    assert is_safe_registries_change(text, text) is True


def test_unchanged_registry_without_digest_only_stays_safe() -> None:
    old = reg('location = "r.io"\n')
    new = old + '[[registry]]\nlocation = "n.io"\nmirror-by-digest-only = true\n'
    assert is_safe_registries_change(old, new) is True


def test_removed_registry_is_unsafe() -> None:
    assert is_safe_registries_change(reg('location = "r.io"\n'), SEARCH) is False


@pytest.mark.parametrize(
    ("old_body", "new_body"),
    [
        ('location = "r.io"\n', 'location = "r.io"\nblocked = true\n'),
        ('location = "r.io"\ninsecure = true\n', 'location = "r.io"\n'),
        # keyed by prefix, so the location can change under the same key
        ('prefix = "p.io"\nlocation = "r.io"\n', 'prefix = "p.io"\nlocation = "s.io"\n'),
        # keyed by location when the prefix is empty: a prefix equal to the old location matches
        ('location = "r.io"\n', 'prefix = "r.io"\nlocation = "s.io"\n'),
    ],
)
def test_changed_registry_attributes_are_unsafe(old_body: str, new_body: str) -> None:
    assert is_safe_registries_change(reg(old_body), reg(new_body)) is False


def test_changing_only_mirror_by_digest_only_is_safe_quirk() -> None:
    base = 'location = "r.io"\n[[registry.mirror]]\nlocation = "m.io"\n'
    assert is_safe_registries_change(reg(base), reg("mirror-by-digest-only = true\n" + base)) is True
    assert is_safe_registries_change(reg("mirror-by-digest-only = true\n" + base), reg(base)) is True


def test_removed_mirror_is_unsafe() -> None:
    old = reg(
        'location = "r.io"\n[[registry.mirror]]\nlocation = "m1"\n[[registry.mirror]]\nlocation = "m2"\n'
    )
    new = reg('location = "r.io"\n[[registry.mirror]]\nlocation = "m2"\n')
    assert is_safe_registries_change(old, new) is False


@pytest.mark.parametrize(
    ("registry_flag", "mirror_pull", "safe"),
    [
        ("", 'pull-from-mirror = "digest-only"\n', True),
        ("mirror-by-digest-only = true\n", "", True),
        ("", "", False),
        ("", 'pull-from-mirror = "all"\n', False),
        ("", 'pull-from-mirror = "tag-only"\n', False),
    ],
)
def test_added_mirror_must_serve_digests_only(registry_flag: str, mirror_pull: str, safe: bool) -> None:
    old = reg(f'location = "r.io"\n{registry_flag}[[registry.mirror]]\nlocation = "m1"\n')
    new = old + f'[[registry.mirror]]\nlocation = "m2"\n{mirror_pull}'
    assert is_safe_registries_change(old, new) is safe


def test_reordering_mirrors_is_safe() -> None:
    old = reg(
        'location = "r.io"\n[[registry.mirror]]\nlocation = "m1"\n[[registry.mirror]]\nlocation = "m2"\n'
    )
    new = reg(
        'location = "r.io"\n[[registry.mirror]]\nlocation = "m2"\n[[registry.mirror]]\nlocation = "m1"\n'
    )
    assert is_safe_registries_change(old, new) is True


@pytest.mark.parametrize(
    ("before", "after", "safe"),
    [
        ("", "digest-only", True),
        ("all", "digest-only", True),
        ("digest-only", "all", False),
        ("digest-only", "", False),
        ("", "all", False),  # "" and "all" mean the same to podman, but upstream compares strings
        ("tag-only", "all", False),
    ],
)
def test_kept_mirror_may_only_narrow_to_digest_only(before: str, after: str, safe: bool) -> None:
    def conf(pull: str) -> str:
        line = f'pull-from-mirror = "{pull}"\n' if pull else ""
        return reg(f'location = "r.io"\n[[registry.mirror]]\nlocation = "m.io"\n{line}')

    assert is_safe_registries_change(conf(before), conf(after)) is safe


# --- new registries -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "safe"),
    [
        ("mirror-by-digest-only = true\n", True),
        ("", False),
        ('[[registry.mirror]]\nlocation = "m"\npull-from-mirror = "digest-only"\n', True),
        ('[[registry.mirror]]\nlocation = "m"\n', False),
        # with mirrors, each must say digest-only itself; the registry-wide flag does not count
        ('mirror-by-digest-only = true\n[[registry.mirror]]\nlocation = "m"\n', False),
        (
            '[[registry.mirror]]\nlocation = "m1"\npull-from-mirror = "digest-only"\n'
            '[[registry.mirror]]\nlocation = "m2"\npull-from-mirror = "all"\n',
            False,
        ),
    ],
)
def test_added_registry(body: str, safe: bool) -> None:
    assert is_safe_registries_change(SEARCH, reg('location = "new.io"\n' + body)) is safe


def test_file_removed_entirely_is_unsafe_when_it_had_content() -> None:
    assert is_safe_registries_change(SEARCH, None) is False
    assert is_safe_registries_change(None, SEARCH) is True


def test_duplicate_scope_last_entry_wins() -> None:
    old = reg('location = "r.io"\n')
    # the second entry for r.io replaces the first, so only its (blocked) attributes are compared
    new = reg('location = "r.io"\n[[registry]]\nlocation = "r.io"\nblocked = true\n')
    assert is_safe_registries_change(old, new) is False
