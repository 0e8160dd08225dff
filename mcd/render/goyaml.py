"""The YAML text upstream hashes to name a rendered config, byte for byte. Pure: no I/O.

The render controller names a rendered MachineConfig after an MD5 of its spec as YAML, written
by the Go YAML library it vendors (ghodss/yaml over gopkg.in/yaml.v2 2.4): JSON objects become
mappings with sorted keys, lists are block sequences, and each string gets the style that Go
library picks. Any other spelling of the same data gives another name, so this module writes
exactly that text. PyYAML's emitter and yaml.v2 are both ports of libyaml's, so PyYAML's
event handling (indentation, block sequences, empty lists) is kept; what differs is reproduced
here: the style yaml.v2 asks for (its own reading of plain words: YAML 1.1 booleans, Go's
number and date syntax), which characters it counts as printable, and its four scalar writers,
which fold long lines at other places than PyYAML's. Checked against yaml.v2 itself on random
text (tests/fixtures/render/ keeps a table of its outputs). A config of the common shapes is
written directly in that layout (`mcd.render.blockyaml`); the emitter writes any other.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence

from mcd.config.yamllib import Emitter, ScalarAnalysis, yaml
from mcd.render.blockyaml import go_block_text
from mcd.render.gostyle import go_key_order, requested_style
from mcd.render.wordscalar import word_analysis

_BREAKS = "\n\r\x85\u2028\u2029"
# each character yaml.v2 writes as a backslash escape, and the letter after the backslash
_ESCAPES = dict(zip('\0\a\b\t\n\v\f\r\x1b"\\\x85\xa0\u2028\u2029', '0abtnvfre"\\N_LP', strict=True))
# characters yaml.v2 refuses to read raw (its reader's rule), which Go's JSON encoder does not
# escape: upstream's hashing fails on them, and so does ours
_UNREADABLE = re.compile("[\x7f-\x84\x86-\x9f\ufffe\uffff]")


def unreadable_character(text: str) -> str | None:
    """The first character of `text` that makes upstream's YAML conversion fail, if any."""
    match = _UNREADABLE.search(text)
    return match.group() if match else None


# characters yaml.v2 does not print (it escapes them in double quotes)
_NOT_PRINTABLE = r"[^\n\x20-\x7e\xa0-\ud7ff\ue000-\ufefe\uff00-\ufffd]"
# what each scalar writer treats one character at a time; it copies the runs between them whole
_PLAIN_SPECIAL = re.compile(r"[ \n\r\x85\u2028\u2029]")
_BREAK = re.compile(r"[\n\r\x85\u2028\u2029]")
_QUOTED_SPECIAL = r"[^\x21\x23-\x5b\x5d-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd]"
# The two classes above take sre ~8 ms each to compile (a table for their wide ranges): a short
# command compiles them only for a scalar that is not ASCII (`re` keeps them compiled after).
# On ASCII text these narrower classes match exactly the same characters.
_NOT_PRINTABLE_ASCII = re.compile(r"[^\n\x20-\x7e]")
_QUOTED_SPECIAL_ASCII = re.compile(r"[^\x21\x23-\x5b\x5d-\x7e]")


def _class_for(text: str, ascii_class: re.Pattern[str], full_class: str) -> re.Pattern[str]:
    return ascii_class if text.isascii() else re.compile(full_class)


def _pieces(text: str, special: re.Pattern[str]) -> Iterator[tuple[int, str]]:
    """(index, piece) over `text`: each `special` character alone, the runs between them whole."""
    pos = 0
    for match in special.finditer(text):
        if match.start() > pos:
            yield pos, text[pos : match.start()]
        yield match.start(), match.group()
        pos = match.end()
    if pos < len(text):
        yield pos, text[pos:]


class _GoEmitter(Emitter):
    """PyYAML's emitter with yaml.v2's printable rule and its four scalar writers (they fold
    long lines at other places than PyYAML's)."""

    def analyze_scalar(self, scalar: str) -> ScalarAnalysis:
        word = word_analysis(scalar)
        if word is not None:
            return word
        analysis = super().analyze_scalar(scalar)
        if _class_for(scalar, _NOT_PRINTABLE_ASCII, _NOT_PRINTABLE).search(scalar):
            # only double quotes can hold a character yaml.v2 does not print
            analysis.allow_flow_plain = analysis.allow_block_plain = False
            analysis.allow_single_quoted = analysis.allow_block = False
        return analysis

    # -- the low-level writes, as yaml.v2 counts columns and lines
    def _put(self, text: str) -> None:
        self.stream.write(text)
        self.column += len(text)

    def _put_break(self, ch: str = "\n") -> None:
        self.stream.write(ch)
        self.column = 0
        self.line += 1

    def _indent(self) -> None:
        indent = max(self.indent or 0, 0)
        if not self.indention or self.column > indent or (self.column == indent and not self.whitespace):
            self._put_break()
        if self.column < indent:
            self._put(" " * (indent - self.column))
        self.whitespace = True
        self.indention = True

    def _fold_or_write_break(self, ch: str, breaks: bool) -> None:
        if not breaks and ch == "\n":
            self._put_break()
        self._put_break(ch)
        self.indention = True

    def write_plain(self, text: str, split: bool = True) -> None:
        if not text:
            return
        if not self.whitespace:
            self._put(" ")
        spaces = breaks = False
        for i, piece in _pieces(text, _PLAIN_SPECIAL):
            if piece == " ":
                if split and not spaces and self.column > self.best_width and text[i + 1 : i + 2] != " ":
                    self._indent()
                else:
                    self._put(piece)
                spaces = True
            elif len(piece) == 1 and piece in _BREAKS:
                self._fold_or_write_break(piece, breaks)
                breaks = True
            else:
                if breaks:
                    self._indent()
                self._put(piece)
                self.indention = False
                spaces = breaks = False
        self.whitespace = False
        self.indention = False
        if self.root_context:
            self.open_ended = True

    def write_single_quoted(self, text: str, split: bool = True) -> None:
        self.write_indicator("'", True)
        spaces = breaks = False
        last = len(text) - 1
        for i, piece in _pieces(text, _PLAIN_SPECIAL):
            if piece == " ":
                nxt = text[i + 1 : i + 2]
                if split and not spaces and self.column > self.best_width and 0 < i < last and nxt != " ":
                    self._indent()
                else:
                    self._put(piece)
                spaces = True
            elif len(piece) == 1 and piece in _BREAKS:
                self._fold_or_write_break(piece, breaks)
                breaks = True
            else:
                if breaks:
                    self._indent()
                self._put(piece.replace("'", "''"))
                self.indention = False
                spaces = breaks = False
        self.write_indicator("'", False)

    def _escape(self, ch: str) -> None:
        code = ord(ch)
        if ch in _ESCAPES:
            self._put("\\" + _ESCAPES[ch])
        elif code <= 0xFF:
            self._put(f"\\x{code:02X}")
        elif code <= 0xFFFF:
            self._put(f"\\u{code:04X}")
        else:
            self._put(f"\\U{code:08X}")

    def write_double_quoted(self, text: str, split: bool = True) -> None:
        self.write_indicator('"', True)
        # yaml.v2 tests for a byte order mark at the start of the text, not at each character:
        # text that starts with one is written escaped, every character of it
        if text.startswith("\ufeff"):
            for ch in text:
                self._escape(ch)
            self.write_indicator('"', False)
            return
        spaces = False
        last = len(text) - 1
        special = _class_for(text, _QUOTED_SPECIAL_ASCII, _QUOTED_SPECIAL)
        for i, piece in _pieces(text, special):
            if piece == " ":
                if split and not spaces and self.column > self.best_width and 0 < i < last:
                    self._indent()
                    if text[i + 1] == " ":
                        self._put("\\")
                else:
                    self._put(piece)
                spaces = True
            elif len(piece) == 1 and special.fullmatch(piece):
                self._escape(piece)
                spaces = False
            else:
                self._put(piece)
                spaces = False
        self.write_indicator('"', False)

    def write_literal(self, text: str) -> None:
        hints = ""
        if text[0] == " " or text[0] in _BREAKS:
            hints = str(self.best_indent)
        if text[-1] not in _BREAKS:
            hints += "-"
        elif len(text) == 1 or text[-2] in _BREAKS:
            hints += "+"
        self.write_indicator("|" + hints, True)
        if hints.endswith("+"):
            self.open_ended = True
        self._put_break()
        self.indention = True
        self.whitespace = True
        breaks = True
        for _, piece in _pieces(text, _BREAK):
            if len(piece) == 1 and piece in _BREAKS:
                self._put_break(piece)
                self.indention = True
                breaks = True
            else:
                if breaks:
                    self._indent()
                self._put(piece)
                self.indention = False
                breaks = False


def _events(value: object) -> Iterator[yaml.Event]:
    if isinstance(value, Mapping):
        yield yaml.MappingStartEvent(None, None, True, flow_style=False)
        for key in sorted(value, key=go_key_order):
            yield from _events(str(key))
            yield from _events(value[key])
        yield yaml.MappingEndEvent()
    elif isinstance(value, Sequence) and not isinstance(value, str):
        yield yaml.SequenceStartEvent(None, None, True, flow_style=False)
        for item in value:
            yield from _events(item)
        yield yaml.SequenceEndEvent()
    elif isinstance(value, str):
        yield yaml.ScalarEvent(None, None, (True, True), value, style=requested_style(value) or None)
    elif isinstance(value, bool):
        yield yaml.ScalarEvent(None, None, (True, True), "true" if value else "false")
    elif isinstance(value, int):
        yield yaml.ScalarEvent(None, None, (True, True), str(value))
    elif value is None:
        yield yaml.ScalarEvent(None, None, (True, True), "null")
    else:
        raise TypeError(f"cannot write a {type(value).__name__} as upstream's YAML")


class _Sink:
    def __init__(self) -> None:
        self.parts: list[str] = []

    def write(self, text: str) -> None:
        self.parts.append(text)


def go_yaml(value: object) -> str:
    """`value` (JSON data: objects, lists, strings, integers, booleans, null) as the text
    ghodss/yaml's Marshal writes for it."""
    text = go_block_text(value)
    return emitted(value) if text is None else text


def emitted(value: object) -> str:
    """`go_yaml`'s text as PyYAML's emitter writes it, event by event (any value)."""
    sink = _Sink()
    emitter = _GoEmitter(sink, indent=2, width=80, allow_unicode=True)
    emitter.emit(yaml.StreamStartEvent(encoding=None))
    emitter.emit(yaml.DocumentStartEvent(explicit=False))
    for event in _events(value):
        emitter.emit(event)
    emitter.emit(yaml.DocumentEndEvent(explicit=False))
    # yaml.v2 ends its stream without the "..." a last block scalar kept open ("|+") would ask for
    emitter.open_ended = False
    emitter.emit(yaml.StreamEndEvent())
    return "".join(sink.parts)
