"""mcd.planner.kargs: kernel-argument splitting, rpm-ostree kargs lines, validation and the tuning file."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcd.config.ostables import go_list
from mcd.planner.kargs import (
    kargs_command,
    missing_kargs_error,
    parse_kargs,
    running_kargs,
    split_kernel_arguments,
    tuning_commands,
)

KERNEL_SPACE = " \f\n\r\t\v"

# --- splitting ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("", []),
        ("   ", []),
        ("a", ["a"]),
        ("  a  b ", ["a", "b"]),
        ("a\tb\nc\rd\fe\vf", ["a", "b", "c", "d", "e", "f"]),
        ('bar="hello world" baz', ['bar="hello world"', "baz"]),
        ('"a b"c d', ['"a b"c', "d"]),
        ('x="a\tb"', ['x="a\tb"']),
        ('x="unterminated y', ['x="unterminated y']),  # quote runs to the end
        ('a\\" b"', ['a\\" b"']),  # backslash does not escape
        ("a\xa0b c", ["a\xa0b", "c"]),  # only the kernel's ASCII spaces separate
    ],
)
def test_split_kernel_arguments(text: str, args: list[str]) -> None:
    assert split_kernel_arguments(text) == args


def _without_unquoted_space(text: str) -> str:
    out, quoted = [], False
    for ch in text:
        if ch == '"':
            quoted = not quoted
        if quoted or ch not in KERNEL_SPACE:
            out.append(ch)
    return "".join(out)


@given(st.text(alphabet=st.sampled_from(list('ab=,."' + KERNEL_SPACE + "\xa0é"))))
def test_split_only_drops_whitespace_outside_quotes(text: str) -> None:
    args = split_kernel_arguments(text)
    assert "".join(args) == _without_unquoted_space(text)
    assert all(arg for arg in args)


simple_arg = st.text(alphabet=st.characters(blacklist_characters=KERNEL_SPACE + '"'), min_size=1)


@given(st.lists(simple_arg), st.sampled_from(list(KERNEL_SPACE)))
def test_split_round_trips_simple_args(args: list[str], sep: str) -> None:
    assert split_kernel_arguments(sep.join(args)) == args


def test_parse_kargs_splits_each_entry_and_keeps_duplicates() -> None:
    assert parse_kargs(["a=1 b", "", "  ", "a=1", 'c="x y"']) == ["a=1", "b", "a=1", 'c="x y"']


def test_parse_kargs_trims_unterminated_quote_like_go() -> None:
    # the piece runs to the end, trailing whitespace included; Go's TrimSpace removes it
    assert parse_kargs(['a="b \t\n']) == ['a="b']
    # Go's TrimSpace knows NBSP but not the \x1c-\x1f separators Python's strip() removes
    assert parse_kargs(["\xa0x\x1c"]) == ["x\x1c"]


# --- rpm-ostree kargs -----------------------------------------------------------------------------


def test_kargs_command_deletes_all_old_then_appends_all_new() -> None:
    assert kargs_command(["a b", "a"], ["c", "a"]) == [
        "rpm-ostree",
        "kargs",
        "--delete-if-present=a",
        "--delete-if-present=b",
        "--delete-if-present=a",
        "--append=c",
        "--append=a",
    ]


@pytest.mark.parametrize(("old", "new"), [([], []), (["  "], [""]), ([], ["\t"])])
def test_kargs_command_none_when_no_argument_on_either_side(old: list[str], new: list[str]) -> None:
    assert kargs_command(old, new) is None


# --- running kargs (firstboot) --------------------------------------------------------------------


def test_running_kargs_keeps_cmdline_order_and_occurrences() -> None:
    cmdline = "BOOT_IMAGE=/vmlinuz b=2 a=1 x b=2\n"
    assert running_kargs(cmdline, ["a=1", "b=2", "zzz"]) == ["b=2", "a=1", "b=2"]


def test_running_kargs_compares_entries_as_written() -> None:
    # upstream matches cmdline tokens against whole MachineConfig entries
    assert running_kargs("a b", ["a b"]) == []
    assert running_kargs('q="x y" z', ['q="x y"']) == ['q="x y"']


# --- validation -----------------------------------------------------------------------------------


def test_go_list_formats_like_percent_v() -> None:
    assert go_list([]) == "[]"
    assert go_list(["a", "b c"]) == "[a b c]"


def test_missing_kargs_error_lists_missing_in_mc_order() -> None:
    out = "rhgb quiet nosmt\n"
    assert missing_kargs_error(out, ["z=1 nosmt", "y"]) == "missing expected kernel arguments: [z=1 y]"


def test_missing_kargs_error_ignores_order_and_duplicates() -> None:
    assert missing_kargs_error("b a\n", ["a", "b", "a"]) is None
    assert missing_kargs_error("", []) is None


def test_missing_kargs_error_splits_output_on_single_spaces() -> None:
    # a quoted argument with a space never matches: upstream's own limitation
    assert missing_kargs_error('x="1 2"', ['x="1 2"']) == 'missing expected kernel arguments: [x="1 2"]'
    # tabs do not separate the output
    assert missing_kargs_error("a\tb", ["a"]) == "missing expected kernel arguments: [a]"


# --- /etc/pivot/kernel-args -----------------------------------------------------------------------


def test_tuning_on_el_only_nosmt_counts() -> None:
    text = "ADD nosmt\nADD foo\nDELETE bar\n"
    assert tuning_commands(text, "root=/dev/sda bar", is_el=True) == [
        ["rpm-ostree", "kargs", "--append=nosmt"]
    ]


def test_tuning_on_fcos_any_karg_and_adds_before_deletes() -> None:
    text = "DELETE old\nADD new\r\nbogus\nADD\nADD  \nadd x\nDELETE gone\n"
    assert tuning_commands(text, "root=/dev/sda old\n", is_el=False) == [
        ["rpm-ostree", "kargs", "--append=new"],
        ["rpm-ostree", "kargs", "--delete=old"],
    ]


def test_tuning_matches_whole_words_on_the_cmdline() -> None:
    # "nosmt" inside "mitigations=auto,nosmt" is not the nosmt argument
    assert tuning_commands("ADD nosmt\n", "mitigations=auto,nosmt", is_el=True) == [
        ["rpm-ostree", "kargs", "--append=nosmt"]
    ]
    assert tuning_commands("ADD nosmt\nDELETE nosmt\n", "a nosmt\n", is_el=True) == [
        ["rpm-ostree", "kargs", "--delete=nosmt"]
    ]
