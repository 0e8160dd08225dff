"""mcd.config.ignition_rules.url_scheme answers as urllib.parse.urlsplit(value).scheme does,
ValueError included, data URLs without its import."""

from __future__ import annotations

import urllib.parse

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from mcd.config.ignition_rules import url_scheme

TAILS = st.text(alphabet="/\t\r\n[]:@?#,;=%aZ9 \x00", max_size=14)


def _outcome(call: object) -> object:
    try:
        return call()  # type: ignore[operator]
    except ValueError as exc:
        return ("ValueError", str(exc))


@settings(max_examples=1000, deadline=None)
@given(st.sampled_from(["data:", "DATA:", "data", " data:", "\tdata:", "https:", "da\nta:", ""]), TAILS)
@example("data:", "//[")
@example("data:", "\t/\n/host]")
@example("data:", "/\t//[::1")
@example("data:", ",hello")
def test_the_scheme_is_urlsplits(head: str, tail: str) -> None:
    value = head + tail
    assert _outcome(lambda: url_scheme(value)) == _outcome(lambda: urllib.parse.urlsplit(value).scheme)


@pytest.mark.parametrize("value", ["data:,x", "data:text/plain;base64,eA==", "data:/x", "data:\t/x"])
def test_a_data_url_without_a_host_is_answered_without_urllib(value: str) -> None:
    assert url_scheme(value) == "data"
