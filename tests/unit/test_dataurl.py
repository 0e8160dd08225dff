"""mcd.config.dataurl: data URLs decoded as Go's vincent-petithory/dataurl does (Ignition, MCO)."""

from __future__ import annotations

import base64
import re
import time
from urllib.parse import quote, unquote_to_bytes

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcd.config import dataurl
from mcd.config.dataurl import decode_data_url

# --- accepted ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "data"),
    [
        ("data:,hello%20world%0A", b"hello world\n"),
        ("data:text/plain;charset=utf-8;base64,aGVsbG8=", b"hello"),
        ("data:,", b""),
        ("data:;base64,", b""),
        ("data:;base64,aGV5YQ==", b"heya"),
        ("data:text/plain;base64,aGV5YQ==", b"heya"),
        ("data:text/plain;charset=utf-8;foo=bar;base64,aGV5YQ==", b"heya"),
        ("data:,A%20brief%20note", b"A brief note"),
        ("data:image/svg+xml-im.a.fake;base64,cGllLXN0b2NrX1RoaXJ0eQ==", b"pie-stock_Thirty"),
        # a quoted parameter value may hold specials and escaped quotes, an unquoted one %-escapes
        (
            'data:application/json;charset=utf-8;foo="b\\"<@>\\"r";style=unformatted%20json;base64,'
            "eyJtc2ciOiAiaGV5YSJ9",
            b'{"msg": "heya"}',
        ),
        ('data:text/plain;name="a,b";base64,aGk=', b"hi"),  # a comma inside quotes is not the separator
        ("data:;base64,aGV5\nYQ==", b"heya"),  # newlines in base64 are skipped
        ("data:x-custom/thing,abc", b"abc"),  # x- types skip the known-type check
        ("data:textual/plain,abc", b"abc"),  # the known-type check is a prefix test
        ("data:text/,abc", b"abc"),  # an empty subtype passes
        ("data:,a+b", b"a+b"),  # "+" is not a space here
        ("data:,%41%6a%6A", b"Ajj"),  # escapes in either case
        ("data:,a=b%3Dc", b"a=b=c"),  # literal "=" and escaped "="
        ("data:,%00%FF", b"\x00\xff"),
        ("data:,~!$&'()*+-./:;=?@_", b"~!$&'()*+-./:;=?@_"),
        ("data:;base64,aR==", b"i"),  # non-zero trailing bits are tolerated, as by Go's StdEncoding
    ],
)
def test_decodes(url: str, data: bytes) -> None:
    assert decode_data_url(url) == data


# --- refused ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("https://example.com/x", "not a data URL"),
        ("DATA:,x", "not a data URL"),  # the Go package checks the prefix case-sensitively
        ("data:", "missing comma before data"),
        ("data:text/plain", "incomplete media type"),
        ("data:text", "missing media type slash"),
        ("data:xxx;base64,aGV5YQ==", "invalid character for media type"),
        ("data:foo/bar,abc", "invalid media type"),
        ("data: ,abc", "invalid character after data prefix"),
        ("data:text/pl ain,abc", "invalid character for media subtype"),
        ("data:;foo,abc", "expected base64, got foo"),
        ("data:;base64;charset=utf-8,aGk=", "invalid character for parameter attribute"),
        ("data:;=x,abc", "unterminated parameter sequence"),
        ("data:;charset", "unterminated parameter sequence"),
        ('data:text/plain;a="x', "unclosed quoted string"),
        ('data:text/plain;a="x"y,abc', "expected semicolon or comma"),
        ('data:text/plain;a="\\q",abc', "invalid quoted parameter value"),
        ("data:text/plain;a=%zz,abc", 'invalid URL escape "%zz"'),
        ("data:text/plain;a=b", "missing comma before data"),
        ("data:,%zz", 'invalid URL escape "%zz"'),
        ("data:,%4", 'invalid URL escape "%4"'),
        ("data:,abc%", 'invalid URL escape "%"'),
        ("data:,%%41", 'invalid URL escape "%%4"'),
        ("data:,a b", "invalid data character ' '"),
        ("data:,a#b", "invalid data character '#'"),
        ("data:,a\nb", "invalid data character '\\n'"),
        ("data:,caf\u00e9", "invalid data character 'é'"),
        ("data:;base64,aGk", "invalid base64 data"),  # padding is required
        ("data:;base64,aG!k", "invalid base64 data"),
        ("data:;base64,aGk=aGk=", "invalid base64 data"),
        ("data:;base64,a===", "invalid base64 data"),
        ("data:;base64,====", "invalid base64 data"),
        ("data:;base64,aGV5\r\nYQ==", "invalid base64 data"),  # only \n is skipped, not \r
        ("data:;base64,aGV5 YQ==", "invalid base64 data"),
    ],
)
def test_refuses(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        decode_data_url(url)


def test_error_names_the_data_url() -> None:
    with pytest.raises(ValueError, match=r"^invalid data URL: invalid base64 data"):
        decode_data_url("data:;base64,%%%%")


# --- properties -------------------------------------------------------------------------------------

HEADERS = st.sampled_from(["", "text/plain", "text/plain;charset=utf-8", "application/octet-stream"])
# characters the Go lexer lets through in plain (not base64) data, besides "%"
PLAIN_SAFE = "!$&'()*+,-./:;=?@_~" + "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


@given(st.binary(max_size=300), HEADERS)
def test_base64_round_trip(data: bytes, header: str) -> None:
    assert decode_data_url(f"data:{header};base64,{base64.b64encode(data).decode()}") == data


@given(st.binary(max_size=300), HEADERS, st.sampled_from(["", "=,;", PLAIN_SAFE]))
def test_percent_round_trip(data: bytes, header: str, safe: str) -> None:
    assert decode_data_url(f"data:{header},{quote(data, safe=safe)}") == data


_VALID_PLAIN = re.compile(r"(?:[!$&-;=?-Z_a-z~]|%[0-9A-Fa-f]{2})*")


@given(st.text(alphabet="%0aF9gz=+ #\u00e9", max_size=12))
def test_plain_data_accepted_exactly_when_well_formed(text: str) -> None:
    """Accepted iff every char is allowed and every % starts an escape; then decoded as unquote does."""
    if _VALID_PLAIN.fullmatch(text):
        assert decode_data_url("data:," + text) == unquote_to_bytes(text)
    else:
        with pytest.raises(ValueError, match="invalid"):
            decode_data_url("data:," + text)


def test_decoding_is_fast() -> None:
    """1,000 x 1 KiB base64 and 1,000 x 1 KiB percent-encoded URLs decode in well under 100 ms."""
    text = (b"lorem ipsum dolor sit amet\n" * 40)[:1024]
    urls = [
        "data:text/plain;charset=utf-8;base64," + base64.b64encode(text[i:] + text[:i]).decode()
        for i in range(1000)
    ]
    urls += ["data:," + quote(text[i:] + text[:i], safe="") for i in range(1000)]
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for url in urls:
            decode_data_url(url)
        best = min(best, time.perf_counter() - start)
    assert best < 0.1


def test_the_common_headers_table_holds_the_parsers_verdicts() -> None:
    for header, is_base64 in dataurl._COMMON_HEADERS.items():
        assert dataurl._parse_header(header) == (len(header) - 1, is_base64)
