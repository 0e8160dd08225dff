"""mcd.planner.registries: the decode errors word for word, and the decoding corners the rules rely on.

The expected texts are written out in full: the update's failure message is this string, so a
change to any part of it must fail here.
"""

from __future__ import annotations

import pytest

from mcd.planner.registries import (
    Mirror,
    RegistriesConf,
    RegistriesError,
    Registry,
    is_safe_registries_change,
    parse_registries_conf,
    registries_change_is_safe,
)

PREFIX = "Failed decoding TOML content from file /etc/containers/registries.conf: "


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("registry = [1]", "registry: expected an array of tables, got list"),
        ('registry = "r.io"', "registry: expected an array of tables, got str"),
        ('[[registry]]\nmirror = ["x"]', "mirror: expected an array of tables, got list"),
        ('registry = [{mirror = "x"}]', "mirror: expected an array of tables, got str"),
        ("credential-helpers = 1", "credential-helpers: expected an array of strings, got int"),
        ('credential-helpers = ["a", 1]', "credential-helpers: expected an array of strings, got list"),
        ("short-name-mode = 3", "short-name-mode: expected a string, got int"),
        ("aliases = 1", "aliases: expected a table of strings, got int"),
        ('[aliases]\nx = "a"\ny = 1', "aliases: expected a table of strings, got dict"),
        (
            'unqualified-search-registries = "a.io"',
            "unqualified-search-registries: expected an array of strings, got str",
        ),
        (
            "unqualified-search-registries = [1]",
            "unqualified-search-registries: expected an array of strings, got list",
        ),
        ("[[registry]]\nprefix = 1", "prefix: expected a string, got int"),
        ("[[registry]]\nlocation = 1.5", "location: expected a string, got float"),
        ('[[registry]]\ninsecure = "x"', "insecure: expected a boolean, got str"),
        ("[[registry]]\nblocked = 1", "blocked: expected a boolean, got int"),
        ("[[registry]]\nmirror-by-digest-only = 1", "mirror-by-digest-only: expected a boolean, got int"),
        ("[[registry]]\npull-from-mirror = 1", "pull-from-mirror: expected a string, got int"),
        ("[[registry]]\n[[registry.mirror]]\nlocation = 1", "location: expected a string, got int"),
        ("[[registry]]\n[[registry.mirror]]\ninsecure = 1", "insecure: expected a boolean, got int"),
        (
            "[[registry]]\n[[registry.mirror]]\npull-from-mirror = true",
            "pull-from-mirror: expected a string, got bool",
        ),
        # a key matches its field case-insensitively, and is then checked under the field's name
        ("[[Registry]]\nBLOCKED = 1", "blocked: expected a boolean, got int"),
        (
            "[[registry]]\n[[registry.Mirror]]\nPull-From-Mirror = 2",
            "pull-from-mirror: expected a string, got int",
        ),
    ],
)
def test_wrong_types_are_named_word_for_word(text: str, message: str) -> None:
    with pytest.raises(RegistriesError) as exc:
        parse_registries_conf(text)
    assert str(exc.value) == PREFIX + message
    assert is_safe_registries_change("", text) is False
    assert is_safe_registries_change(text, "") is False


def test_toml_syntax_errors_carry_the_same_prefix() -> None:
    with pytest.raises(RegistriesError) as exc:
        parse_registries_conf("x = [")
    assert str(exc.value).startswith(PREFIX)
    assert len(str(exc.value)) > len(PREFIX)
    assert isinstance(exc.value.__cause__, ValueError)


@pytest.mark.parametrize(
    ("text", "conf"),
    [
        # absent keys take Go's zero values
        ("[[registry]]\n[[registry.mirror]]\n", RegistriesConf((), (Registry(mirrors=(Mirror(),)),))),
        (
            '[[registry]]\nLOCATION = "r.io"\nInsecure = true\nPull-From-Mirror = "all"\nPREFIX = "p"\n'
            'Mirror-By-Digest-Only = true\n[[registry.MIRROR]]\nLocation = "m"\nINSECURE = true\n',
            RegistriesConf(
                (),
                (
                    Registry(
                        prefix="p",
                        location="r.io",
                        insecure=True,
                        mirror_by_digest_only=True,
                        pull_from_mirror="all",
                        mirrors=(Mirror("m", True, ""),),
                    ),
                ),
            ),
        ),
        ('Unqualified-Search-Registries = ["a"]\nCredential-Helpers = ["x"]\n', RegistriesConf(("a",))),
        # the exact key is used whatever case-insensitive keys come before it
        ('[[registry]]\nLOCATION = "a"\nlocation = "b"\n', RegistriesConf((), (Registry(location="b"),))),
        ('[[registry]]\nlocation = "b"\nprefix = "p"\n', RegistriesConf((), (Registry("p", "b"),))),
    ],
)
def test_decoded_fields(text: str, conf: RegistriesConf) -> None:
    assert parse_registries_conf(text) == conf


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # each rule's False answer is a bool, not merely falsy
        (RegistriesConf(("a",)), RegistriesConf(())),
        (RegistriesConf((), (Registry(location="r"),)), RegistriesConf()),
        (RegistriesConf(), RegistriesConf((), (Registry(location="r"),))),
        (
            RegistriesConf((), (Registry(location="r"),)),
            RegistriesConf((), (Registry(location="r", insecure=True),)),
        ),
        (
            RegistriesConf((), (Registry(location="r", mirrors=(Mirror("m"),)),)),
            RegistriesConf((), (Registry(location="r"),)),
        ),
        (
            RegistriesConf((), (Registry(location="r"),)),
            RegistriesConf((), (Registry(location="r", mirrors=(Mirror("m"),)),)),
        ),
        (
            RegistriesConf(
                (), (Registry(location="r", mirrors=(Mirror("m", pull_from_mirror="digest-only"),)),)
            ),
            RegistriesConf((), (Registry(location="r", mirrors=(Mirror("m", pull_from_mirror="all"),)),)),
        ),
    ],
)
def test_unsafe_answers_are_false(old: RegistriesConf, new: RegistriesConf) -> None:
    assert registries_change_is_safe(old, new) is False


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (RegistriesConf(), RegistriesConf()),
        (RegistriesConf(("a",)), RegistriesConf(("a", "b"))),
        (RegistriesConf(), RegistriesConf((), (Registry(location="r", mirror_by_digest_only=True),))),
        (
            RegistriesConf((), (Registry(location="r"),)),
            RegistriesConf(
                (), (Registry(location="r", mirrors=(Mirror("m", pull_from_mirror="digest-only"),)),)
            ),
        ),
        # a new mirror serving tags is safe when the registry pulls by digest only
        (
            RegistriesConf((), (Registry(location="r", mirror_by_digest_only=True),)),
            RegistriesConf((), (Registry(location="r", mirror_by_digest_only=True, mirrors=(Mirror("m"),)),)),
        ),
        # registries without a prefix are told apart by their locations
        (
            RegistriesConf((), (Registry(location="r1"),)),
            RegistriesConf(
                (), (Registry(location="r1"), Registry(location="r2", mirror_by_digest_only=True))
            ),
        ),
    ],
)
def test_safe_answers_are_true(old: RegistriesConf, new: RegistriesConf) -> None:
    assert registries_change_is_safe(old, new) is True
