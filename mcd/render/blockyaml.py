"""The YAML emitter's block layout for the common shapes of a config, written directly. Pure.

Both YAML texts mcd writes come from PyYAML's emitter: the one upstream hashes to name a
rendered config (yaml.v2's rules, `goyaml`) and the commands' `-o yaml` (`yaml.safe_dump`'s,
`yamlout`). Driven one event at a time, the emitter costs tens of microseconds per node: a
2,000-file config took about half a second for each. Almost all of a config is mappings and
sequences of words (paths, data URLs, names), integers, booleans and unit texts of printable
ASCII lines, and for those the emitter's output follows a few rules, written here: a mapping's
keys at its indent; a sequence in a mapping not indented (`- ` at the mapping's column); a
mapping or sequence in a sequence item starting on the item's line; `{}` and `[]` for empty
ones; a scalar's continuation lines two columns in from its parent. The two differ only in their
scalars (`_GoRules`, `_DumpRules`) and key order. A scalar whose style or line folding is not
one of the simple cases makes the whole text go back to the emitter (None).
tests/unit/test_render_names.py and tests/cli/test_yaml_output.py check that both ways agree.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from mcd.config.yamllib import yaml
from mcd.render.gostyle import go_key_order, requested_style
from mcd.render.wordscalar import LEADING_INDICATORS, is_word, word_block_plain

_WIDTH = 80  # the emitter folds a plain or quoted scalar at a space past this column
# a single-line text of printable ASCII with inner spaces only
_SPACED = re.compile(r"[\x21-\x7e][\x20-\x7e]*[\x21-\x7e]")
# what double quotes hold as it is: no space (no folding), no quote or backslash (no escape)
_QUOTABLE = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]*")
_LINES = re.compile(r"[\n\x20-\x7e]+")
_ALPHA_KEY = re.compile(r"[A-Za-z]+")
_JSON_TYPES = (dict, list, str, int, bool, type(None))


class _Unknown(Exception):
    """A value this module does not write: the emitter writes the whole text."""


def go_block_text(value: object) -> str | None:
    """`value` as ghodss/yaml's Marshal writes it (`goyaml.go_yaml`), or None."""
    return _Writer(_GoRules()).text(value)


def dump_block_text(value: object) -> str | None:
    """`value` as `yaml.safe_dump(value, sort_keys=False, default_flow_style=False)` writes it
    (`yamlout.yaml_text`), or None."""
    return _Writer(_DumpRules()).text(value)


class _GoRules:
    """yaml.v2's: keys sorted as it sorts them, each string in the style it asks for (plain,
    double-quoted, or a literal block for text with line breaks)."""

    exact_types = False  # goyaml writes any mapping and sequence
    max_key = 127  # a longer key is written as a complex key ("? ")

    def __init__(self) -> None:
        self._orders: dict[tuple[str, ...], list[str]] = {}

    def order(self, keys: tuple[str, ...]) -> list[str]:
        found = self._orders.get(keys)
        if found is None:
            if all(_ALPHA_KEY.fullmatch(k) for k in keys):
                found = sorted(keys)  # letters only: yaml.v2's order is the code points'
            else:
                found = sorted(keys, key=go_key_order)
            self._orders[keys] = found
        return found

    def key(self, key: str) -> str:
        style = requested_style(key)
        if style == "" and is_word(key) and word_block_plain(key):
            return key
        if style == '"' and _QUOTABLE.fullmatch(key):
            return f'"{key}"'
        raise _Unknown

    def string(self, text: str, column: int, indent: int) -> str:
        style = requested_style(text)
        if style == "":
            if is_word(text):
                if word_block_plain(text):
                    return text
            elif _fits_plain(text, column):
                return text
        elif style == '"':
            if _QUOTABLE.fullmatch(text):
                return f'"{text}"'
        elif _literal_ok(text):
            header = "|" if text.endswith("\n") else "|-"
            pad = " " * indent
            lines = text.removesuffix("\n").split("\n")
            return header + "\n" + "\n".join(pad + line if line else "" for line in lines)
        raise _Unknown


class _DumpRules:
    """safe_dump's: keys in their order, a string plain when PyYAML's resolver reads it back as
    a string and the analysis allows it, single-quoted otherwise (text with line breaks too)."""

    exact_types = True  # SafeDumper refuses a tuple or a dict subclass: the emitter's way says so
    max_key = 122  # the emitter counts the key's tag ("!!str") in its 128 columns

    def order(self, keys: tuple[str, ...]) -> list[str]:
        return list(keys)

    def key(self, key: str) -> str:
        if is_word(key):
            return key if _is_str(key) and word_block_plain(key) else _single(key)
        raise _Unknown

    def string(self, text: str, column: int, indent: int) -> str:
        if not text:
            return "''"  # the resolver reads an empty plain scalar as null
        if is_word(text):
            return text if _is_str(text) and word_block_plain(text) else _single(text)
        if "\n" not in text:
            if _fits_plain(text, column) and _is_str(text):
                return text
            quoted = _single(text)
            if _SPACED.fullmatch(text) and column + len(quoted) <= _WIDTH:
                return quoted
            raise _Unknown
        if _LINES.fullmatch(text) and " \n" not in text and "\n " not in text:
            return _single_lines(text, column, indent)
        raise _Unknown


class _Writer:
    """One text's writing with one set of rules: the output's pieces, and each key's text as
    found (a config repeats a few field names thousands of times)."""

    def __init__(self, rules: _GoRules | _DumpRules) -> None:
        self.rules = rules
        self.out: list[str] = []
        self._key_text: dict[str, str] = {}

    def text(self, value: object) -> str | None:
        if not isinstance(value, Mapping) or not value:
            return None
        if self.rules.exact_types and type(value) is not dict:
            return None
        try:
            self.mapping(value, 0, False)
        except _Unknown:
            return None
        return "".join(self.out)

    def mapping(self, mapping: Mapping[object, object], indent: int, inline: bool) -> None:
        """The keys of `mapping` at column `indent`; `inline`: the first one goes on the line
        already written up to that column (a sequence item's `- `)."""
        out = self.out
        by_text = {self._key_string(k): v for k, v in mapping.items()}
        first = True
        for key in self.rules.order(tuple(by_text)):
            if not (first and inline):
                out.append(" " * indent)
            first = False
            text = self._key_text.get(key) or self._key(key)
            out.append(text)
            out.append(":")
            self.value(by_text[key], indent, indent + len(text) + 1)

    def _key_string(self, key: object) -> str:
        if isinstance(key, str):
            return key
        if self.rules.exact_types:
            raise _Unknown  # safe_dump writes another type's key as that type
        return str(key)  # upstream's JSON has string keys only; goyaml writes str(key)

    def _key(self, key: str) -> str:
        if not key or len(key) > self.rules.max_key:
            raise _Unknown
        text = self.rules.key(key)
        self._key_text[key] = text
        return text

    def value(self, value: object, indent: int, column: int) -> None:
        """A mapping value, after its key's ":" at `column`; the mapping's keys are at `indent`."""
        out = self.out
        if self.rules.exact_types and type(value) not in _JSON_TYPES:
            raise _Unknown
        if isinstance(value, (str, int)) or value is None:
            out.append(" ")
            out.append(self.scalar(value, column + 1, indent + 2))
            out.append("\n")
        elif isinstance(value, Mapping):
            if not value:
                out.append(" {}\n")
                return
            out.append("\n")
            self.mapping(value, indent + 2, False)
        elif isinstance(value, Sequence):
            if not value:
                out.append(" []\n")
                return
            out.append("\n")
            self.sequence(value, indent, False)  # not indented under its key
        else:
            raise _Unknown

    def sequence(self, items: Sequence[object], indent: int, inline: bool) -> None:
        """Each item after `- ` at column `indent`; `inline` as for `mapping`."""
        out = self.out
        for i, item in enumerate(items):
            if self.rules.exact_types and type(item) not in _JSON_TYPES:
                raise _Unknown
            if i or not inline:
                out.append(" " * indent)
            if isinstance(item, (str, int)) or item is None:
                out.append("- ")
                out.append(self.scalar(item, indent + 2, indent + 2))
                out.append("\n")
            elif isinstance(item, (Mapping, Sequence)):
                if not item:
                    out.append("- {}\n" if isinstance(item, Mapping) else "- []\n")
                    continue
                out.append("- ")
                if isinstance(item, Mapping):  # its first key on the item's line
                    self.mapping(item, indent + 2, True)
                else:
                    self.sequence(item, indent + 2, True)
            else:
                raise _Unknown

    def scalar(self, value: object, column: int, indent: int) -> str:
        """`value` (a string, an integer, a boolean or None) written from `column` on; lines
        after its first at `indent`."""
        if value is True:
            return "true"
        if value is False:
            return "false"
        if value is None:
            return "null"
        if isinstance(value, str):
            return self.rules.string(value, column, indent)
        return str(value)


def _fits_plain(text: str, column: int) -> bool:
    """Whether a single line with inner spaces is plain in a block and ends by the folding
    column: no indicator first, no `: ` or ` #`, no final `:`, no document marker."""
    return (
        column + len(text) <= _WIDTH
        and _SPACED.fullmatch(text) is not None
        and not (
            text[0] in LEADING_INDICATORS
            or text[:2] in ("- ", "? ", ": ")
            or ": " in text
            or " #" in text
            or text.endswith(":")
            or text.startswith(("---", "..."))
        )
    )


def _literal_ok(text: str) -> bool:
    """A literal block the emitter writes with no indentation hint and `|` or `|-`: printable
    ASCII lines, none ending in a space, not starting with a space or an empty line, and at most
    one final line break (`|+` is the emitter's)."""
    return (
        _LINES.fullmatch(text) is not None
        and text[0] not in " \n"
        and " \n" not in text
        and not text.endswith((" ", "\n\n"))
    )


def _is_str(text: str) -> bool:
    """Whether PyYAML's resolver reads `text`, plain, back as a string."""
    resolvers = yaml.resolver.Resolver.yaml_implicit_resolvers.get(text[0], ())
    return not any(pattern.match(text) for _, pattern in resolvers)


def _single(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _single_lines(text: str, column: int, indent: int) -> str:
    """Text with line breaks single-quoted as PyYAML writes it from `column`: each break
    doubled (one alone would read back as a space), the lines after at `indent`, a line folded
    at a single space past the width."""
    out = ["'"]
    col = column + 1
    spaces = breaks = False
    start = 0
    for end in range(len(text) + 1):
        ch = text[end] if end < len(text) else None
        if spaces:
            if ch != " ":
                if start + 1 == end and col > _WIDTH and start != 0 and ch is not None:
                    out.append("\n" + " " * indent)
                    col = indent
                else:
                    out.append(text[start:end])
                    col += end - start
                start = end
        elif breaks:
            if ch != "\n":
                out.append("\n" * (end - start + 1) + " " * indent)
                col = indent
                start = end
        elif (ch is None or ch in " \n'") and start < end:
            out.append(text[start:end])
            col += end - start
            start = end
        if ch == "'":
            out.append("''")
            col += 2
            start = end + 1
        if ch is not None:
            spaces, breaks = ch == " ", ch == "\n"
    out.append("'")
    return "".join(out)
