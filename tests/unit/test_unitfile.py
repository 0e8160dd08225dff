"""Unit file syntax as Ignition checks it: the parser's verdicts, and the unit/dropin findings."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcd.config.findings import format_path
from mcd.config.ignition import parse_ignition
from mcd.config.unitfile import LINE_MAX, UnitSyntaxError, _Lexer, _Lines, sections

VALID = [
    ("", ()),
    ("[Unit]\nDescription=x\n[Install]\nWantedBy=multi-user.target\n", ("Unit", "Install")),
    ("text before the first header is skipped\n[Unit]\n", ("Unit",)),
    ("# a comment [not a header]\n; another\n[Unit]\n  # indented comment\n\tA = 1\n", ("Unit",)),
    ("[Service]\nExecStart=/bin/sh -c 'a' \\\n  'b'\n[Install]\n", ("Service", "Install")),
    ("[Unit]\r\nA=b\r\n", ("Unit",)),
    ("[Unit]\nA=\n\n\n[Unit]\n", ("Unit", "Unit")),
    ("[Multi\nline]\n", ("Multi\nline",)),
    ("[Unit]\nA=continued \\\n[Install] is part of the value\n", ("Unit",)),
]


@pytest.mark.parametrize(("text", "found"), VALID)
def test_valid_contents(text: str, found: tuple[str, ...]) -> None:
    assert sections(text) == found


INVALID = [
    ("[Unit]\nthis line is bad\n", "unexpected newline encountered while parsing option name"),
    ("[Unit", "unable to find end of section"),
    ("[Unit] trailing\n", 'found garbage after section name : "trailing"'),
    ("[Unit]\nNoEquals", "EOF"),
    ("[Unit]\nDescription=" + "x" * LINE_MAX + "\n", f"line too long (max {LINE_MAX} bytes)"),
]


@pytest.mark.parametrize(("text", "message"), INVALID)
def test_invalid_contents(text: str, message: str) -> None:
    with pytest.raises(UnitSyntaxError) as info:
        sections(text)
    assert str(info.value) == message


def _verdict(run: Any) -> object:
    try:
        return list(run())
    except UnitSyntaxError as exc:
        return str(exc)


# short lines made of the characters that matter to the lexer
_PIECES = st.sampled_from(
    ["[", "]", "=", "#", ";", "\\", "\n", "\r", " ", "\t", "\xa0", "a", "Unit", "Install"]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_PIECES, max_size=60).map("".join))
def test_line_reading_agrees_with_the_character_lexer(text: str) -> None:
    assert _verdict(_Lines(text).run) == _verdict(_Lexer(text.encode()).run)


def test_a_long_line_is_found_only_where_the_reader_buffer_shows_it() -> None:
    # the parser looks at its 4096-byte read buffer between steps: a long line that starts when
    # fewer than 2048 bytes are buffered goes unnoticed (as in Ignition), one at the start does not
    late = "[Unit]\n" + "A=b\n" * 600 + "B=" + "y" * 3000 + "\n"
    assert sections(late) == ("Unit",)
    with pytest.raises(UnitSyntaxError, match="line too long"):
        sections("[Unit]\n" + "B=" + "y" * 3000 + "\n" + "A=b\n" * 600)


# ---------------------------------------------------------------- in the parse


def ign(*units: dict[str, Any]) -> dict[str, Any]:
    return {"ignition": {"version": "3.5.0"}, "systemd": {"units": list(units)}}


def findings(doc: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(format_path(f.path), f.severity, f.message) for f in parse_ignition(doc).findings]


def test_bad_unit_and_dropin_contents_are_errors_at_their_contents() -> None:
    unit = {
        "name": "a.service",
        "contents": "[Unit]\nthis line is bad\n",
        "dropins": [{"name": "x.conf", "contents": "[Service"}],
    }
    assert findings(ign(unit)) == [
        (
            "systemd.units[0].dropins[0].contents",
            "error",
            "invalid unit content: unable to find end of section",
        ),
        (
            "systemd.units[0].contents",
            "error",
            "invalid unit content: unexpected newline encountered while parsing option name",
        ),
    ]


def test_an_enabled_unit_without_install_section_is_warned() -> None:
    assert findings(ign({"name": "a.service", "enabled": True, "contents": "[Unit]\n"})) == [
        (
            "systemd.units[0].contents",
            "warning",
            'unit "a.service" is enabled, but has no install section so enable does nothing',
        )
    ]
    # not enabled, no contents (a preset or mask), or unparsable: no warning
    assert findings(ign({"name": "a.service", "contents": "[Unit]\n"})) == []
    assert findings(ign({"name": "a.service", "enabled": True})) == []


def test_an_enabled_instance_of_a_template_without_install_section_is_warned() -> None:
    doc = ign(
        {"name": "getty@.service", "contents": "[Service]\nExecStart=/bin/true\n"},
        {"name": "getty@tty1.service", "enabled": True},
    )
    assert findings(doc) == [
        (
            "systemd.units[1].contents",
            "warning",
            'template unit "getty@.service" for "getty@tty1.service" doesn\'t have Install section',
        )
    ]
