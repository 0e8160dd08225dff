"""The style yaml.v2 asks for each string, and its order of mapping keys. Pure: no I/O.

Both of upstream's YAML writers here (`goyaml`, PyYAML's emitter driven event by event, and
`blockyaml`, the common shapes written directly) take these rules from this one place.
"""

from __future__ import annotations

import math
import re

TYPE_CHECKING = False  # not typing's: its import is a few ms of every short command
if TYPE_CHECKING:
    from typing import Any

# yaml.v2 reads these plain words as booleans, nulls or special floats, so a string spelled so
# is written quoted (YAML 1.1 words: "y", "on", "off" ... included)
_RESERVED = frozenset(
    (
        *("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"),
        *("n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"),
        *("", "~", "null", "Null", "NULL", ".nan", ".NaN", ".NAN"),
        *(".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF"),
    )
)
_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_BASE60 = re.compile(r"[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?")
_GO_INT = re.compile(r"([-+]?)(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)")
# Go's ParseFloat also takes underscores between digits
_DOT_FLOAT = re.compile(r"\.[0-9]+(_[0-9]+)*([eE][-+]?[0-9]+(_[0-9]+)*)?")
# a Go time.Parse layout of yaml.v2's: 2006-1-2, then optionally a time (T, t or space) and zone
_TIMESTAMP = re.compile(
    r"([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})"
    r"(?:(?:[Tt]([0-9]{1,2}):([0-9]{1,2}):([0-9]{1,2})(?:\.[0-9]+)?(?:Z|[-+][0-9]{2}:[0-9]{2}))"
    r"|(?: +([0-9]{1,2}):([0-9]{1,2}):([0-9]{1,2})(?:\.[0-9]+)?))?"
)
_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _is_timestamp(text: str) -> bool:
    match = _TIMESTAMP.fullmatch(text)
    if match is None:
        return False
    year, month, day = (int(g) for g in match.groups()[:3])
    if not 1 <= month <= 12 or not 1 <= day <= _DAYS[month - 1]:
        return False
    if month == 2 and day == 29 and not (year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)):
        return False
    clock = [int(g) for g in match.groups()[3:] if g is not None]
    return not clock or (clock[0] < 24 and clock[1] < 60 and clock[2] < 60)


def _go_int(text: str) -> bool:
    """Whether Go's strconv reads `text` as an integer (any base prefix, 64 bits)."""
    match = _GO_INT.fullmatch(text)
    if match is None:
        return False
    sign, body = match.group(1), match.group(2)
    octal = len(body) > 1 and body[0] == "0" and body[1] in "01234567"
    value = int(body, 8) if octal else int(body, 0)
    if sign == "-":
        return value <= 1 << 63
    # ParseUint takes an unsigned text of up to 64 bits; a "+" leaves only ParseInt
    return value < (1 << 63 if sign == "+" else 1 << 64)


def _go_float(text: str, pattern: re.Pattern[str]) -> bool:
    """Whether `text` matches `pattern` and Go's ParseFloat reads it without overflow."""
    return pattern.fullmatch(text) is not None and not math.isinf(float(text.replace("_", "")))


def _reads_as_other_than_string(text: str) -> bool:
    """Whether yaml.v2 would read `text`, written plain, as something else than this string."""
    if text in _RESERVED:
        return True
    first = text[0]
    if first == ".":
        return _go_float(text, _DOT_FLOAT)
    if first in "+-0123456789":
        if _is_timestamp(text):
            return True
        plain = text.replace("_", "")
        if _go_int(plain) or _go_float(plain, _FLOAT):
            return True
        # yaml.v2's own binary forms: "0b" then what ParseInt reads in base 2 (a sign included),
        # and "-0b" then binary digits
        binary = re.fullmatch(r"0b([-+]?[01]+)|-0b([01]+)", plain)
        if binary is None:
            return False
        digits = binary.group(1) or "-" + binary.group(2)
        return -(1 << 63) <= int(digits, 2) < 1 << 63
    return False


def requested_style(text: str) -> str:
    """The style yaml.v2 asks its emitter for: literal for text with a newline, plain when the
    text reads back as itself, double-quoted otherwise (the emitter may still fall back)."""
    if "\n" in text:
        return "|"
    if _reads_as_other_than_string(text) or _BASE60.fullmatch(text):
        return '"'
    return ""


def go_key_order(key: str) -> tuple[Any, ...]:
    """yaml.v2's key order for the field names it meets here: letters by code point and after
    other characters, runs of digits by their value (``a2`` < ``a10``), a prefix first."""
    out: list[Any] = []
    i = 0
    while i < len(key):
        ch = key[i]
        if ch.isdigit() and ch.isascii():
            j = i
            while j < len(key) and key[j].isdigit() and key[j].isascii():
                j += 1
            out.append((0, int(key[i:j]), j - i))
            i = j
            continue
        out.append((1, ord(ch), 0) if ch.isalpha() else (0, ord(ch), 0))
        i += 1
    return tuple(out)
