"""systemd unit file syntax as Ignition checks it. Pure: no I/O.

Ignition refuses a unit or dropin whose contents its unit parser (go-systemd's `unit`
package) rejects, with "invalid unit content: <reason>", and warns when an enabled unit has no
`[Install]` section. This module restates that parser's rules, including its quirks, so that
mcd accepts and refuses the same contents:

* text before the first section header is skipped, except that a ``[`` in it starts a header
  and ``#`` or ``;`` skips the rest of the line;
* a header runs to the next ``]`` (across lines); anything but blanks after it on the line is
  "garbage";
* in a section, an option is a name up to ``=`` on one line, then a value to the end of the
  line, continued on the next while a non-blank line ends with a backslash;
* lines are checked against systemd's 2048-byte limit when the reader's buffer (4096 bytes,
  filled as Go's bufio fills it) holds at least 2048 bytes and none of them ends a line.
"""

from __future__ import annotations

import re
from collections.abc import Callable

TYPE_CHECKING = False  # not typing's: its import is a few ms of every short command
if TYPE_CHECKING:
    from typing import TypeAlias

LINE_MAX = 2048
_BUFFER = 4096  # Go's default bufio.Reader size
# the white space of Go's unicode.IsSpace (Python's str.isspace also takes \x1c-\x1f)
_SPACE_CHARS = "\t\n\v\f\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000" + "".join(
    chr(c) for c in range(0x2000, 0x200B)
)
_SPACE = frozenset(_SPACE_CHARS)


class UnitSyntaxError(ValueError):
    """Contents the unit parser refuses; the message is the parser's reason."""


def sections(text: str) -> tuple[str, ...]:
    """The section names of unit `text`, in order (repeats kept); UnitSyntaxError when refused."""
    return _sections(text)


def _sections(text: str) -> tuple[str, ...]:
    data = text.encode("utf-8", "surrogatepass")
    if max(map(len, _LINE_BREAKS.split(data))) < LINE_MAX:
        # no run of LINE_MAX bytes without a line break: the length check can never fire, and
        # the line-at-a-time reading below gives the same verdict as the character lexer
        return tuple(_Lines(text).run())
    return tuple(_Lexer(data).run())


_LINE_BREAKS = re.compile(rb"[\r\n]")
_SPECIAL_AT_TOP = re.compile(r"[\[#;]")
_NOT_SPACE = re.compile("[^" + re.escape(_SPACE_CHARS) + "]")
_NAME_END = re.compile(r"[=\r\n]")


class _Lines:
    """The lexer's rules applied with string searches instead of one character at a time."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def to_eol(self) -> str:
        eol = self.text.find("\n", self.pos)
        if eol < 0:
            line = self.text[self.pos :].removesuffix("\r")
            self.pos = len(self.text)
        else:
            line = self.text[self.pos : eol]  # a "\r" before the "\n" stays, as in the lexer
            self.pos = eol + 1
        return line

    def skip_line(self) -> None:
        while self.to_eol().removesuffix(" ").endswith("\\"):
            pass

    def run(self) -> list[str]:
        out: list[str] = []
        text = self.text
        in_section = False
        while True:
            if not in_section:
                match = _SPECIAL_AT_TOP.search(text, self.pos)
                if match is None:
                    return out
                self.pos = match.end()
                if match.group() != "[":
                    self.skip_line()
                    continue
            else:
                match = _NOT_SPACE.search(text, self.pos)
                if match is None:
                    return out
                self.pos = match.end()
                c = match.group()
                if c in "#;":
                    self.skip_line()
                    continue
                if c != "[":
                    self.option(match.start())
                    continue
            close = text.find("]", self.pos)
            if close < 0:
                raise UnitSyntaxError("unable to find end of section")
            name = text[self.pos : close]
            self.pos = close + 1
            garbage = self.to_eol().strip(_SPACE_CHARS)
            if garbage:
                raise UnitSyntaxError(f"found garbage after section name : {_go_quote(garbage.encode())}")
            out.append(name)
            in_section = True

    def option(self, start: int) -> None:
        end = _NAME_END.search(self.text, start)
        if end is None:
            raise UnitSyntaxError("EOF")
        if end.group() != "=":
            raise UnitSyntaxError("unexpected newline encountered while parsing option name")
        self.pos = end.end()
        while True:
            line = self.to_eol()
            if not (line.strip(_SPACE_CHARS) and line.endswith("\\")):
                return


class _Lexer:
    """A byte reader with Go's bufio buffering (only the fill level matters), and the lexer."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0  # next byte to read
        self.end = 0  # bytes read from the source into the buffer so far
        self.sections: list[str] = []
        self.last_size = 0

    # ---- the reader

    def _fill(self) -> None:
        self.end = min(len(self.data), self.pos + _BUFFER)

    def buffered(self) -> int:
        return self.end - self.pos

    def read_rune(self) -> str | None:
        """The next character (None at the end); an invalid byte reads as U+FFFD, one byte long."""
        if (
            self.buffered() < 4
            and not _full_rune(self.data[self.pos : self.end])
            and self.end < len(self.data)
        ):
            self._fill()
        if self.pos >= self.end:
            return None
        size = _rune_size(self.data, self.pos, self.end)
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        self.last_size = size
        try:
            return chunk.decode("utf-8")
        except UnicodeDecodeError:
            return "\ufffd"

    def unread_rune(self) -> None:
        self.pos -= self.last_size

    def read_until(self, delim: int) -> tuple[bytes, bool]:
        """Bytes up to and including `delim`, and whether the end came first (then all that is left)."""
        start = self.pos
        while True:
            found = self.data.find(delim, self.pos, self.end)
            if found >= 0:
                self.pos = found + 1
                return self.data[start : self.pos], False
            if self.end >= len(self.data):
                self.pos = self.end
                return self.data[start : self.pos], True
            if self.buffered() >= _BUFFER:
                self.pos = self.end  # a full buffer is handed over and reading goes on
            self._fill()

    def to_eol(self) -> tuple[bytes, bool]:
        line, eof = self.read_until(ord("\n"))
        line = line.removesuffix(b"\r").removesuffix(b"\n")
        return line, eof

    # ---- the lexer: each state returns the next one, or None at the end

    def run(self) -> list[str]:
        state: _State | None = self.next_section
        while state is not None:
            if self.buffered() >= LINE_MAX:
                window = self.data[self.pos : self.pos + LINE_MAX]
                if b"\r" not in window and b"\n" not in window:
                    raise UnitSyntaxError(f"line too long (max {LINE_MAX} bytes)")
            state = state()
        return self.sections

    def next_section(self) -> _State | None:
        c = self.read_rune()
        if c is None:
            return None
        if c == "[":
            return self.section_name
        if c in "#;":
            return self.skip_line(self.next_section)
        return self.next_section

    def section_name(self) -> _State | None:
        name, eof = self.read_until(ord("]"))
        if eof:
            raise UnitSyntaxError("unable to find end of section")

        def suffix() -> _State | None:
            garbage = _trim_space(self.to_eol()[0])
            if garbage:
                # the parser never records the current section name: the message shows an empty one
                raise UnitSyntaxError(f"found garbage after section name : {_go_quote(garbage)}")
            self.sections.append(name[:-1].decode("utf-8", "replace"))
            return self.in_section

        return suffix

    def skip_line(self, then: _State) -> _State:
        def skip() -> _State | None:
            while True:
                line = self.to_eol()[0].removesuffix(b" ")
                if not line.endswith(b"\\"):
                    return then

        return skip

    def in_section(self) -> _State | None:
        c = self.read_rune()
        if c is None:
            return None
        if c in _SPACE:
            return self.in_section
        if c == "[":
            return self.section_name
        if c in "#;":
            return self.skip_line(self.in_section)
        self.unread_rune()
        return self.option_name

    def option_name(self) -> _State | None:
        while True:
            c = self.read_rune()
            if c is None:
                raise UnitSyntaxError("EOF")  # Go's io.EOF, as the parser passes it on
            if c in "\r\n":
                raise UnitSyntaxError("unexpected newline encountered while parsing option name")
            if c == "=":
                return self.option_value

    def option_value(self) -> _State | None:
        line = self.to_eol()[0]
        if _trim_space(line) and line.endswith(b"\\"):
            return self.option_value  # continued on the next line
        return self.in_section


_State: TypeAlias = "Callable[[], _State | None]"


def _trim_space(raw: bytes) -> bytes:
    """Go's bytes.TrimSpace: white space runes off both ends (invalid UTF-8 is no space)."""
    text = raw.decode("utf-8", "surrogateescape")
    return text.strip(_SPACE_CHARS).encode("utf-8", "surrogateescape")


def _rune_size(data: bytes, pos: int, end: int) -> int:
    lead = data[pos]
    want = 1 if lead < 0xC2 or lead > 0xF4 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
    if want == 1 or pos + want > end:
        return 1
    try:
        data[pos : pos + want].decode("utf-8")
    except UnicodeDecodeError:
        return 1
    return want


def _full_rune(data: bytes) -> bool:
    """Go's utf8.FullRune: whether `data` starts with a whole character (an invalid byte is one)."""
    if not data:
        return False
    lead = data[0]
    if lead < 0xC2 or lead > 0xF4:
        return True
    want = 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
    return len(data) >= want


_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def _go_quote(raw: bytes) -> str:
    """Go's %q of a byte string: double quotes, escapes for quotes, backslashes and non-printables."""
    text = raw.decode("utf-8", "backslashreplace")
    out = []
    for c in text:
        if c in '"\\':
            out.append("\\" + c)
        elif c in "\a\b\f\n\r\t\v":
            out.append(
                {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}[c]
            )
        elif c.isprintable():
            out.append(c)
        elif ord(c) < 0x80:
            out.append(f"\\x{ord(c):02x}")
        elif ord(c) <= 0xFFFF:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(f"\\U{ord(c):08x}")
    return '"' + "".join(out) + '"'
