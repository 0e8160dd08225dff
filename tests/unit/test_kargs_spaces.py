"""mcd.planner.kargs: which characters are spaces where (the kernel's, Go's TrimSpace), tuning lines."""

from __future__ import annotations

import pytest

from mcd.planner.kargs import (
    kargs_command,
    missing_kargs_error,
    parse_kargs,
    running_kargs,
    split_kernel_arguments,
    tuning_commands,
)

# Go's unicode.IsSpace: what strings.TrimSpace removes, one character each
GO_SPACES = [
    "\t",
    "\n",
    "\v",
    "\f",
    "\r",
    " ",
    "\x85",
    "\xa0",
    "\u1680",
    "\u2000",
    "\u2001",
    "\u2002",
    "\u2003",
    "\u2004",
    "\u2005",
    "\u2006",
    "\u2007",
    "\u2008",
    "\u2009",
    "\u200a",
    "\u2028",
    "\u2029",
    "\u202f",
    "\u205f",
    "\u3000",
]
# spaces to Python's str.strip() or look-alikes, but not to Go
NOT_GO_SPACES = ["\x1c", "\x1d", "\x1e", "\x1f", "\u200b", "\u180e", "\ufeff", "x"]


@pytest.mark.parametrize("space", GO_SPACES)
def test_go_spaces_are_trimmed_around_an_argument(space: str) -> None:
    # an unterminated quote runs to the end of the entry; the trim then removes the trailing space
    assert parse_kargs([f'{space}a="b {space}{space}']) == ['a="b']
    assert running_kargs(f"{space}x=1{space}", ["x=1"]) == ["x=1"]
    assert missing_kargs_error(f"{space}a b{space}", ["a", "b"]) is None


@pytest.mark.parametrize("char", NOT_GO_SPACES)
def test_other_characters_are_kept(char: str) -> None:
    assert parse_kargs([f'a="b {char}']) == [f'a="b {char}']
    assert parse_kargs([f"{char}y{char}"]) == [f"{char}y{char}"]
    assert missing_kargs_error(f"{char}a", ["a"]) == "missing expected kernel arguments: [a]"


@pytest.mark.parametrize("space", [" ", "\t", "\n", "\v", "\f", "\r"])
def test_each_kernel_space_separates(space: str) -> None:
    assert split_kernel_arguments(f"{space}a{space}{space}b=1{space}") == ["a", "b=1"]
    assert split_kernel_arguments(f'a="x{space}y"{space}b') == [f'a="x{space}y"', "b"]


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ('"', ['"']),
        ('""', ['""']),
        ('a="" b', ['a=""', "b"]),
        ('"a b" "c d"', ['"a b"', '"c d"']),
        ('a"b c"d e', ['a"b c"d', "e"]),
        ('a="b c" "', ['a="b c"', '"']),
        # a closed quote lets spaces separate again
        ('x="1 2"y 3', ['x="1 2"y', "3"]),
        ("\u3000a\u3000b", ["\u3000a\u3000b"]),
    ],
)
def test_quotes_decide_where_arguments_end(text: str, args: list[str]) -> None:
    assert split_kernel_arguments(text) == args


def test_a_long_line_splits_in_one_pass() -> None:
    text = " ".join(f"a{i}" for i in range(10_000))
    assert split_kernel_arguments(text)[-1] == "a9999"
    assert len(split_kernel_arguments(text)) == 10_000


def test_kargs_command_with_one_side_empty() -> None:
    assert kargs_command([], ["a"]) == ["rpm-ostree", "kargs", "--append=a"]
    assert kargs_command(["a"], []) == ["rpm-ostree", "kargs", "--delete-if-present=a"]


# --- /etc/pivot/kernel-args -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "cmdline", "commands"),
    [
        ("ADD a\r\nDELETE b\r\n", "b", [["--append=a"], ["--delete=b"]]),
        ("ADD a\r\n", "a", []),
        ("DELETE b\r", "b", [["--delete=b"]]),
        ("DELETE b\r\n", "", []),
        # a tab or CR is no separator after the verb
        ("ADD\ta\r\nDELETE\tb\n", "b", []),
        ("ADD \r\n", "", []),
        ("ADD  a \u3000\n", "", [["--append=a"]]),
        # the cmdline is split on any whitespace
        ("DELETE b\n", "x\tb\n", [["--delete=b"]]),
        (
            "ADD b\nADD c\nDELETE x\nDELETE y\n",
            "x y",
            [["--append=b"], ["--append=c"], ["--delete=x"], ["--delete=y"]],
        ),
    ],
)
def test_tuning_file_lines(text: str, cmdline: str, commands: list[list[str]]) -> None:
    assert tuning_commands(text, cmdline, is_el=False) == [["rpm-ostree", "kargs", *c] for c in commands]


def test_tuning_on_el_skips_what_is_not_allowlisted_and_goes_on() -> None:
    assert tuning_commands("ADD foo\nDELETE nosmt\r\nADD nosmt\n", "nosmt", is_el=True) == [
        ["rpm-ostree", "kargs", "--delete=nosmt"]
    ]
    assert tuning_commands("DELETE foo\nADD nosmt\n", "foo", is_el=True) == [
        ["rpm-ostree", "kargs", "--append=nosmt"]
    ]
