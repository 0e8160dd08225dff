"""Decode RFC 2397 ``data:`` URLs the way Ignition and the MCO do. Pure: no I/O.

Both use the Go package github.com/vincent-petithory/dataurl, whose rules are stricter than the
RFC in places and looser in others; this module follows that package, not the RFC:

* the URL must start with ``data:`` exactly (lower case);
* the media type is optional; when given, its type must start with ``text``, ``image``, ``audio``,
  ``video``, ``application``, ``message`` or ``multipart``, or be an ``x-`` token;
* parameters are ``;attr=value`` (value a token, percent-escapes allowed, or a quoted string);
  ``;base64`` must be the last one, right before the comma;
* plain data may hold printable ASCII except space and ``<>#"{}|\\^[]`` and backquote; ``%XX``
  escapes are decoded, a ``%`` not followed by two hex digits is an error, ``+`` stays ``+``;
* base64 data may hold only the base64 alphabet, ``=`` and newlines (which are skipped), and
  must be padded to a multiple of four characters.
"""

from __future__ import annotations

import binascii
import re
from collections.abc import Iterator

_PREFIX = "data:"
_TSPECIALS = frozenset('()<>@,;:\\"/[]?=')
_MEDIA_TYPES = ("text", "image", "audio", "video", "application", "message", "multipart")

# characters plain data may contain (printable ASCII less the RFC 2396 delims and unwise set)
_BAD_PLAIN_CHAR = re.compile(r"[^!$-;=?-Z_a-z~]")
_PLAIN_CHARS = bytes(c for c in range(128) if _BAD_PLAIN_CHAR.match(chr(c)) is None)
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
_BAD_BASE64_CHAR = re.compile(r"[^A-Za-z0-9+/=]")
# the inside of a Go double-quoted string literal (ASCII only here, as the lexer allows)
_GO_STRING_BODY = re.compile(
    r'(?:[^"\\\n]|\\(?:[abfnrtv\\"]|x[0-9A-Fa-f]{2}|[0-3][0-7]{2}'
    r"|u(?![dD][89abAB])[0-9A-Fa-f]{4}|U(?:000[0-9A-Fa-f]|0010)[0-9A-Fa-f]{4}))*"
)


def decode_data_url(url: str) -> bytes:
    """The bytes a ``data:`` URL carries; `ValueError` saying what is wrong when it is malformed."""
    start, is_base64 = data_url_header(url)
    data = url[start:]
    return _decode_base64(data) if is_base64 else _decode_plain(data)


# the URLs the parser decodes in one piece, without the stream machinery (nearly every file)
SMALL_URL = 64 << 10  # characters


def decode_data_url_with(url: str, headers: dict[str, bool]) -> bytes:
    """`decode_data_url`, with the base64 verdicts on headers seen before in `headers` (the
    caller's, one parse's: a config repeats a handful of headers over thousands of files)."""
    start, is_base64 = data_url_header(url, headers)
    data = url[start:]
    return _decode_base64(data) if is_base64 else _decode_plain(data)


# the headers nearly every config uses, with their verdicts (a constant table, checked against
# the parser by tests/unit/test_dataurl.py): no header parse for them, memo or not
_COMMON_HEADERS = {
    "data:,": False,
    "data:;base64,": True,
    "data:text/plain,": False,
    "data:text/plain;base64,": True,
    "data:text/plain;charset=utf-8,": False,
    "data:text/plain;charset=utf-8;base64,": True,
    "data:application/octet-stream;base64,": True,
}


def data_url_header(url: str, headers: dict[str, bool] | None = None) -> tuple[int, bool]:
    """Check the header of a ``data:`` URL; return where its data starts and whether it is base64.
    `headers`: the caller's verdicts on headers checked before, by header text (filled here)."""
    if not url.startswith(_PREFIX):
        raise ValueError(f"not a data URL (it must start with {_PREFIX!r}): {_preview(url)}")
    comma = url.find(",", len(_PREFIX))
    if comma >= 0 and '"' not in url[len(_PREFIX) : comma]:
        # without a quoted parameter the first comma ends the header: a verdict on it holds for
        # every URL with that header (only good headers are recorded: a bad one raises)
        header = url[: comma + 1]
        known = _COMMON_HEADERS.get(header)
        if known is None and headers is not None:
            known = headers.get(header)
        if known is None:
            known = _parse_header(header)[1]
            if headers is not None:
                headers[header] = known
        is_base64 = known
    else:
        comma, is_base64 = _parse_header(url)
    return comma + 1, is_base64


def iter_data_url(url: str, chunk: int = 1 << 20) -> Iterator[bytes]:
    """The bytes of a ``data:`` URL in pieces of about `chunk` bytes, decoded as they are asked
    for: a large URL is never copied or decoded whole. Raises `ValueError` as `decode_data_url`,
    possibly after some pieces were given (a reader must discard them)."""
    start, is_base64 = data_url_header(url)
    chunk = max(chunk, 4)  # room for a whole escape or base64 quantum
    return _iter_base64(url, start, chunk) if is_base64 else _iter_plain(url, start, chunk)


def _iter_plain(url: str, start: int, chunk: int) -> Iterator[bytes]:
    pos, end = start, len(url)
    while pos < end:
        cut = min(end, pos + chunk)
        if cut < end:
            # never split an escape: the piece ends before a "%" of its last two characters
            percent = url.rfind("%", max(pos, cut - 2), cut)
            if percent > pos:
                cut = percent
        yield _decode_plain(url[pos:cut], base=pos - start)
        pos = cut


def _iter_base64(url: str, start: int, chunk: int) -> Iterator[bytes]:
    # whole quanta of 4 characters per piece (newlines skipped); padding only in the last piece
    end = len(url.rstrip("\n"))
    pos, carry, done = start, "", 0  # done: characters (newlines skipped) decoded so far
    chunk = max(4, chunk - chunk % 4)
    while pos < end:
        cut = min(end, pos + chunk)
        piece = carry + url[pos:cut].replace("\n", "")
        pos = cut
        last = pos >= end
        keep = len(piece) if last else len(piece) - len(piece) % 4
        piece, carry = piece[:keep], piece[keep:]
        if not last and "=" in piece:
            raise _fail(f"invalid base64 data: misplaced padding at offset {done + piece.index('=')}")
        yield _decode_base64(piece, base=done)
        done += len(piece)


def _preview(url: str) -> str:
    return repr(url if len(url) <= 40 else url[:40] + "...")


def _is_token_char(c: str) -> bool:
    # an RFC 2045 token character: printable ASCII, not a space, not a tspecial
    return "!" <= c <= "~" and c not in _TSPECIALS


def _fail(reason: str) -> ValueError:
    return ValueError(f"invalid data URL: {reason}")


def _parse_header(url: str) -> tuple[int, bool]:
    """Check the media type and parameters; return the index of the data comma and the base64 flag."""
    end = len(url)
    pos = len(_PREFIX)
    if pos < end and url[pos] not in ";,":
        pos = _parse_media_type(url, pos)
    # here url[pos] is ";" or "," (or the URL ended)
    while True:
        if pos >= end:
            raise _fail("missing comma before data")
        if url[pos] == ",":
            return pos, False
        pos += 1  # the ";"
        start = pos
        if pos >= end or url[pos] in "=,":
            raise _fail("unterminated parameter sequence")
        while pos < end and _is_token_char(url[pos]):
            pos += 1
        if pos >= end:
            raise _fail("unterminated parameter sequence")
        if url[pos] == ",":
            # an attribute without a value is the encoding flag and must be the last parameter
            if url[start:pos] != "base64":
                raise _fail(f"expected base64, got {url[start:pos]}")
            return pos, True
        if url[pos] != "=" or pos == start:
            raise _fail("invalid character for parameter attribute")
        pos = _parse_parameter_value(url, pos + 1)


def _parse_media_type(url: str, pos: int) -> int:
    end = len(url)
    start = pos
    first = url[pos]
    if not _is_token_char(first) and first not in "xX":
        raise _fail("invalid character after data prefix")
    x_token = first in "xX" and url[pos + 1 : pos + 2] == "-"
    pos += 2 if x_token else 1
    while pos < end and url[pos] != "/":
        if not _is_token_char(url[pos]):
            raise _fail("invalid character for media type")
        pos += 1
    if pos >= end:
        raise _fail("missing media type slash")
    if not x_token and not url[start:pos].startswith(_MEDIA_TYPES):
        raise _fail("invalid media type")
    pos += 1  # the "/"
    while pos < end and url[pos] not in ";,":
        if not _is_token_char(url[pos]):
            raise _fail("invalid character for media subtype")
        pos += 1
    if pos >= end:
        raise _fail("incomplete media type")
    return pos


def _parse_parameter_value(url: str, pos: int) -> int:
    """Check one parameter value starting at `pos`; return the index of the following ``;`` or ``,``."""
    end = len(url)
    if pos >= end:
        raise _fail("missing comma before data")
    if url[pos] == '"':
        start = pos + 1
        pos = start
        while True:
            if pos >= end:
                raise _fail("unclosed quoted string")
            c = url[pos]
            if c > "\x7f":
                raise _fail("invalid character for parameter value")
            if c == '"':
                break
            if c == "\\":
                pos += 1
                if pos < end and url[pos] > "\x7f":
                    raise _fail("invalid escaped character")
            pos += 1
        # the value is then unquoted as a Go string literal
        if _GO_STRING_BODY.fullmatch(url, start, pos) is None:
            raise _fail(f"invalid quoted parameter value {url[start - 1 : pos + 1]}")
        pos += 1  # the closing quote
    else:
        start = pos
        while pos < end and url[pos] not in ";,":
            if not _is_token_char(url[pos]):
                raise _fail("invalid character for parameter value")
            pos += 1
        if pos == start:
            raise _fail("invalid character for parameter value")
        if pos >= end:
            raise _fail("missing comma before data")
        _check_escapes(url[start:pos])
    if pos >= end:
        raise _fail("missing comma before data")
    if url[pos] not in ";,":
        raise _fail("expected semicolon or comma")
    return pos


def _check_escapes(text: str) -> None:
    bad = _BAD_ESCAPE.search(text)
    if bad is not None:
        raise _fail(f'invalid URL escape "{text[bad.start() : bad.start() + 3]}"')


def _decode_plain(data: str, base: int = 0) -> bytes:
    if not data.isascii() or data.encode("ascii").translate(None, _PLAIN_CHARS):
        bad = _BAD_PLAIN_CHAR.search(data)
        assert bad is not None
        raise _fail(
            f"invalid data character {data[bad.start()]!r} at offset {base + bad.start()} (escape it as %XX)"
        )
    if "%" not in data:
        return data.encode("ascii")
    # Percent-decoding through the quoted-printable decoder, which runs in C (urllib's unquote is a
    # Python loop per escape): every "%XX" becomes "=XX" once each literal "=" is written "=3D".
    # QP rules that could alter data (soft line breaks, trailing-space stripping) need raw
    # whitespace or newlines, which plain data cannot contain (checked above).
    decoded = binascii.a2b_qp(data.replace("=", "=3D").replace("%", "="))
    # Each valid escape turns 3 characters into 1 byte; the QP decoder keeps or drops the
    # characters of a malformed one, so any malformed escape shows as a length mismatch.
    if len(decoded) != len(data) - 2 * data.count("%"):
        _check_escapes(data)
        raise _fail("invalid URL escape")  # not reached: _check_escapes names the bad escape
    return decoded


def _decode_base64(data: str, base: int = 0) -> bytes:
    if "\n" in data:  # the Go decoder skips newlines, as in wrapped base64
        data = data.replace("\n", "")
    try:
        # strict: only the alphabet, correct padding, nothing after it (as Go's StdEncoding)
        return binascii.a2b_base64(data, strict_mode=True)
    except binascii.Error:
        raise _fail(_base64_problem(data, base)) from None


def _base64_problem(data: str, base: int = 0) -> str:
    bad = _BAD_BASE64_CHAR.search(data)
    if bad is not None:
        return (
            f"invalid base64 data: unexpected character {data[bad.start()]!r} at offset {base + bad.start()}"
        )
    if len(data) % 4:
        return "invalid base64 data: length is not a multiple of 4 (missing padding?)"
    return "invalid base64 data: misplaced padding"
