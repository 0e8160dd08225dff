"""Kernel arguments: splitting, `rpm-ostree kargs` command lines, validation. Pure: no I/O.

Behaviour follows upstream MCD (pkg/daemon/update.go, daemon.go, kernelargs.go; spec §5.4, §5.5).
"""

from __future__ import annotations

from collections.abc import Sequence

from mcd.config.ostables import go_list

# The kernel's isspace() in the "C" locale; next_arg() in lib/cmdline.c splits on these.
_KERNEL_SPACE = frozenset(" \f\n\r\t\v")
# What Go's strings.TrimSpace removes (unicode.IsSpace). Not Python's str.strip(), which also
# strips the \x1c-\x1f separators.
_GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a" + (
    "\u2028\u2029\u202f\u205f\u3000"
)

TUNING_FILE = "/etc/pivot/kernel-args"
# On RHEL CoreOS / SCOS only these may be changed through the tuning file; FCOS allows anything.
EL_TUNABLE_KARGS = frozenset({"nosmt"})


def _go_trim(s: str) -> str:
    return s.strip(_GO_SPACE)


def split_kernel_arguments(s: str) -> list[str]:
    """Split like the kernel's next_arg(): whitespace separates unless inside double quotes.

    Quotes are kept in the result and there are no escapes; an unterminated quote runs to the end.
    One pass over the characters, no index arithmetic: whatever a bug does, it cannot loop forever.
    """
    args: list[str] = []
    start: int | None = None  # where the argument being read began
    in_quote = False
    for i, ch in enumerate(s):
        if start is None:
            if ch in _KERNEL_SPACE:
                continue
            start = i
        if ch == '"':
            in_quote = not in_quote
        elif ch in _KERNEL_SPACE and not in_quote:
            args.append(s[start:i])
            start = None
    if start is not None:
        args.append(s[start:])
    return args


def parse_kargs(entries: Sequence[str]) -> list[str]:
    """The kernel arguments in MachineConfig `kernelArguments` entries, in order, duplicates kept.

    Each entry may hold several arguments.
    """
    # The trim matters only for an unterminated quote, whose piece can end in whitespace.
    return [_go_trim(arg) for entry in entries for arg in split_kernel_arguments(entry)]


def kargs_command(old: Sequence[str], new: Sequence[str]) -> list[str] | None:
    """`rpm-ostree kargs` moving from the `old` to the `new` MachineConfig kernel arguments.

    Every old argument is deleted (tolerating ones already gone) and every new one appended,
    rather than diffing, so duplicates and order come out right (upstream BZ 1866546,
    OCPBUGS-75894). None when both sides hold no argument. The caller runs this only when the
    lists differ (MachineConfigDiff.kargs).
    """
    args = [f"--delete-if-present={a}" for a in parse_kargs(old)]
    args += [f"--append={a}" for a in parse_kargs(new)]
    if not args:
        return None
    return ["rpm-ostree", "kargs", *args]


def running_kargs(cmdline: str, requested: Sequence[str]) -> list[str]:
    """The requested kernel arguments that the running command line carries (firstboot).

    One entry per occurrence on the command line, in command-line order. As upstream, each
    token is compared with the requested entries as written, so an entry holding several
    arguments never matches.
    """
    wanted = set(requested)
    return [arg for arg in split_kernel_arguments(_go_trim(cmdline)) if arg in wanted]


def missing_kargs_error(kargs_output: str, expected: Sequence[str]) -> str | None:
    """The on-disk validation error when `rpm-ostree kargs` lacks MachineConfig arguments, else None.

    Membership only (order and duplicates are ignored). The output is split on single spaces, as
    upstream does, so an expected argument with a quoted space is always reported missing.
    """
    present = set(_go_trim(kargs_output).split(" "))
    missing = [arg for arg in parse_kargs(expected) if arg not in present]
    if not missing:
        return None
    return f"missing expected kernel arguments: {go_list(missing)}"


def tuning_commands(file_text: str, cmdline: str, is_el: bool) -> list[list[str]]:
    """`rpm-ostree kargs` runs requested by the legacy /etc/pivot/kernel-args tuning file.

    Lines are `ADD <karg>` or `DELETE <karg>`; anything else is skipped. On EL only allowlisted
    arguments count. ADD applies when the argument is not on the command line, DELETE when it
    is. All additions run before all deletions, as upstream does.
    """
    on_cmdline = set(cmdline.split())
    adds: list[str] = []
    deletes: list[str] = []
    # bufio.Scanner drops a CR before the newline; here the trim below removes it with the spaces
    for line in file_text.split("\n"):
        for verb, into in (("ADD ", adds), ("DELETE ", deletes)):
            if not line.startswith(verb):
                continue
            key = _go_trim(line[len(verb) :])
            if not key or (is_el and key not in EL_TUNABLE_KARGS):
                break
            if (key in on_cmdline) == (verb == "DELETE "):
                into.append(key)
            break
    return [["rpm-ostree", "kargs", f"--append={k}"] for k in adds] + [
        ["rpm-ostree", "kargs", f"--delete={k}"] for k in deletes
    ]
