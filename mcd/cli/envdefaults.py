"""Flag defaults from `MCD_<FLAG>` environment variables (kured's LoadFromEnv), checked only for the
command that runs, and a bad value named: `MCD_DRAIN_TIMEOUT=1h` is one line, never a traceback,
and never stops `mcd validate`, which does not read it."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence

TYPE_CHECKING = False  # not typing's: its import is a few ms of every short command
if TYPE_CHECKING:
    from typing import Any

PREFIX = "MCD_"
TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")


class EnvValueError(ValueError):
    """An environment variable whose value its flag cannot take."""


class EnvDefault:
    """A flag's default taken from the environment, converted once the command is known (a
    plain class: dataclasses costs `mcd --help` more to import than this whole module)."""

    __slots__ = ("convert", "expected", "text", "var")

    def __init__(self, var: str, text: str, convert: Callable[[str], Any], expected: str) -> None:
        self.var, self.text, self.convert, self.expected = var, text, convert, expected


def env_default(
    name: str, fallback: Any, convert: Callable[[str], Any] = str, expected: str = "text"
) -> Any:
    """The default of a flag: `fallback` without MCD_<name>, else its text, to be converted by
    `resolve` (an argparse string default would be converted at once, with a message that names
    the flag, not the variable)."""
    text = os.environ.get(PREFIX + name)
    if text is None:
        return fallback
    return EnvDefault(PREFIX + name, text, convert, expected)


def resolve(args: argparse.Namespace) -> None:
    """Convert the environment defaults the command line did not override."""
    for key, value in vars(args).items():
        if isinstance(value, EnvDefault):
            try:
                setattr(args, key, value.convert(value.text))
            except (ValueError, argparse.ArgumentTypeError):
                raise EnvValueError(
                    f"environment variable {value.var}={value.text!r}: expected {value.expected}"
                ) from None


def to_bool(text: str) -> bool:
    word = text.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ValueError(text)


def to_seconds(text: str) -> float:
    value = float(text)
    if not value >= 0:  # also refuses NaN
        raise ValueError(text)
    return value


def to_count(text: str) -> int:
    value = int(text.strip() or "0")
    if value < 0:
        raise ValueError(text)
    return value


def one_of(choices: Sequence[str]) -> Callable[[str], str]:
    def convert(text: str) -> str:
        if text not in choices:
            raise ValueError(text)
        return text

    return convert
