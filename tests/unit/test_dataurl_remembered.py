"""Decodes of small data URLs remembered across parses (mcd.config.dataurl._Remembered)."""

from __future__ import annotations

import pytest

from mcd.config import dataurl
from mcd.config.dataurl import SMALL_URL, _Remembered, decode_data_url, decode_small_data_url
from mcd.config.ignition import ParseOptions, parse_ignition


def test_a_remembered_decode_is_the_decode_and_is_kept() -> None:
    remembered = _Remembered(1 << 20)
    url = "data:,a%20b"
    first = remembered.decode(url)
    assert first == decode_data_url(url) == b"a b"
    assert remembered.decode(url) is first
    assert remembered.held == len(url) + len(first)


def test_an_error_is_raised_again_and_not_kept() -> None:
    remembered = _Remembered(1 << 20)
    for _ in range(2):
        with pytest.raises(ValueError, match="invalid URL escape"):
            remembered.decode("data:,%zz")
    assert remembered.entries == {}


def test_the_held_size_stays_within_the_budget() -> None:
    remembered = _Remembered(40)
    remembered.decode("data:,0123456789")  # 16 + 10
    remembered.decode("data:,abcdefghij")  # would make 52: the set is dropped first
    assert list(remembered.entries) == ["data:,abcdefghij"]
    assert remembered.held == 26
    remembered.decode("data:," + "x" * 40)  # larger than the whole budget: never kept
    assert remembered.entries == {} and remembered.held == 0


def test_parses_after_the_first_give_the_same_config_and_findings() -> None:
    dataurl.forget_remembered()
    doc = {
        "ignition": {"version": "3.5.0"},
        "storage": {
            "files": [
                {"path": "/etc/a", "contents": {"source": "data:;base64,aGVsbG8="}},
                {"path": "/etc/b", "contents": {"source": "data:,%zz"}},
                {"path": "/etc/c", "mode": 420, "contents": {"source": "data:,big"}},
            ]
        },
    }
    first = parse_ignition(doc)
    again = parse_ignition(doc)
    assert first == again
    assert first.partial is not None and again.partial is not None
    assert [f.data for f in again.partial.files] == [b"hello", b"", b"big"]
    assert [f.message for f in again.findings] == [
        'could not decode contents of /etc/b: invalid data URL: invalid URL escape "%zz"'
    ]


def test_only_small_urls_are_remembered() -> None:
    dataurl.forget_remembered()
    large = "data:," + "x" * SMALL_URL
    assert decode_small_data_url(large) == b"x" * SMALL_URL
    assert decode_small_data_url("data:,x") == b"x"
    assert list(dataurl._REMEMBERED.entries) == ["data:,x"]


def test_the_size_cap_holds_for_a_remembered_file() -> None:
    dataurl.forget_remembered()
    doc = {
        "ignition": {"version": "3.5.0"},
        "storage": {"files": [{"path": "/etc/a", "contents": {"source": "data:,abc"}}]},
    }
    assert parse_ignition(doc).config is not None  # remembered now
    capped = parse_ignition(doc, ParseOptions(max_file_size=2))
    assert capped.config is None
    assert [f.message for f in capped.findings] == [
        "contents of /etc/a are larger than the maximum file size of 2 bytes (--max-file-size)"
    ]
