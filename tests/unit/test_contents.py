"""Streamed decoding of file contents: the same bytes as a whole decode, a size cap, flat memory."""

from __future__ import annotations

import base64
import gzip
import hashlib
import os
import tracemalloc
import urllib.parse
from typing import Any

import pytest

from mcd.config import contents
from mcd.config.contents import ContentsError, iter_contents, measure_contents, parse_size
from mcd.config.dataurl import decode_data_url, iter_data_url
from mcd.config.findings import format_path
from mcd.config.ignition import File, ParseOptions, Resource, parse_ignition


def b64_url(data: bytes, wrap: int = 0) -> str:
    text = base64.b64encode(data).decode()
    if wrap:
        text = "\n".join(text[i : i + wrap] for i in range(0, len(text), wrap))
    return "data:;base64," + text


@pytest.mark.parametrize("chunk", [1, 3, 4, 5, 7, 64, 1 << 20])
@pytest.mark.parametrize("wrap", [0, 76, 5])
def test_base64_pieces_join_to_the_whole_decode(chunk: int, wrap: int) -> None:
    payload = os.urandom(1000)
    url = b64_url(payload, wrap) + "\n"
    assert b"".join(iter_data_url(url, chunk)) == decode_data_url(url) == payload


@pytest.mark.parametrize("chunk", [1, 2, 3, 10, 1 << 20])
def test_percent_encoded_pieces_never_split_an_escape(chunk: int) -> None:
    text = "a%20b%25c%0A" * 50 + "%FF"
    url = "data:," + text
    assert b"".join(iter_data_url(url, chunk)) == decode_data_url(url) == urllib.parse.unquote_to_bytes(text)


@pytest.mark.parametrize("chunk", [4, 8, 1 << 20])
def test_padding_before_the_end_is_refused_in_pieces_as_whole(chunk: int) -> None:
    url = "data:;base64,QQ==QUFB"
    with pytest.raises(ValueError, match="invalid base64 data"):
        decode_data_url(url)
    with pytest.raises(ValueError, match="invalid base64 data"):
        b"".join(iter_data_url(url, chunk))


def test_a_bad_character_is_reported_at_its_offset_in_the_data() -> None:
    url = "data:;base64," + "QUFB" * 10 + "!QUF"
    with pytest.raises(ValueError, match="unexpected character '!' at offset 40"):
        b"".join(iter_data_url(url, 8))


def gz_resource(data: bytes, **extra: Any) -> Resource:
    return Resource(source=b64_url(gzip.compress(data)), compression="gzip", **extra)


def test_gzip_members_one_after_the_other_are_one_stream() -> None:
    url = b64_url(gzip.compress(b"first ") + gzip.compress(b"second"))
    assert b"".join(iter_contents(Resource(url, "gzip"))) == b"first second"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (gzip.compress(b"x" * 100)[:-5], "unexpected end of the compressed stream"),
        (gzip.compress(b"x") + b"garbage", "incorrect header check"),
        (b"", "no gzip data"),
    ],
    ids=["truncated", "trailing-garbage", "empty"],
)
def test_broken_gzip_is_a_compression_error(raw: bytes, message: str) -> None:
    with pytest.raises(ContentsError) as info:
        b"".join(iter_contents(Resource(b64_url(raw), "gzip"), owner="/etc/a"))
    assert info.value.field == ("compression",)
    assert str(info.value).startswith("could not decompress gzip contents of /etc/a: ")
    assert message in str(info.value)


def test_pieces_are_never_larger_than_a_chunk() -> None:
    res = gz_resource(b"\0" * (5 * contents.CHUNK + 17))
    sizes = [len(p) for p in iter_contents(res)]
    assert sum(sizes) == 5 * contents.CHUNK + 17
    assert max(sizes) <= contents.CHUNK


def test_the_size_cap_stops_the_stream() -> None:
    with pytest.raises(ContentsError) as info:
        measure_contents(gz_resource(b"\0" * 5000), max_size=4096, owner="/etc/big")
    assert info.value.field == ("source",)
    assert str(info.value) == (
        "contents of /etc/big are larger than the maximum file size of 4096 bytes (--max-file-size)"
    )
    assert measure_contents(gz_resource(b"\0" * 4096), max_size=4096).size == 4096


def test_the_hash_is_verified_after_the_last_piece() -> None:
    want = hashlib.sha256(b"other").hexdigest()
    with pytest.raises(ContentsError) as info:
        measure_contents(gz_resource(b"data", hash=f"sha256-{want}"), owner="/etc/a")
    assert info.value.field == ("verification", "hash")
    assert str(info.value).startswith("sha256 verification failed for /etc/a: contents hash to ")


def test_measure_gives_size_and_sha256() -> None:
    got = measure_contents(gz_resource(b"hello"))
    assert (got.size, got.sha256) == (5, hashlib.sha256(b"hello").hexdigest())


@pytest.mark.parametrize(
    ("text", "size"),
    [("1048576", 1 << 20), ("512K", 512 << 10), ("256M", 256 << 20), ("2GiB", 2 << 30), ("3g", 3 << 30)],
)
def test_parse_size(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "-1", "1.5G", "12X", "M"])
def test_parse_size_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="invalid size"):
        parse_size(text)


# ---------------------------------------------------------------- in the parse


def ign_with(*files: dict[str, Any]) -> dict[str, Any]:
    return {"ignition": {"version": "3.5.0"}, "storage": {"files": list(files)}}


def gz_entry(path: str, data: bytes) -> dict[str, Any]:
    return {"path": path, "contents": {"source": b64_url(gzip.compress(data)), "compression": "gzip"}}


def test_a_file_over_the_cap_is_a_located_error() -> None:
    result = parse_ignition(ign_with(gz_entry("/etc/big", b"\0" * 10_000)), ParseOptions(max_file_size=1000))
    assert [(format_path(f.path), f.message) for f in result.errors] == [
        (
            "storage.files[0].contents.source",
            "contents of /etc/big are larger than the maximum file size of 1000 bytes (--max-file-size)",
        )
    ]


def test_contents_not_kept_are_measured_and_decoded_on_demand() -> None:
    payload = b"abc" * 1000
    result = parse_ignition(ign_with(gz_entry("/etc/a", payload)), ParseOptions(keep_data_up_to=100))
    assert result.config is not None
    [f] = result.config.files
    assert not f.kept
    assert (f.size, f.sha256) == (len(payload), hashlib.sha256(payload).hexdigest())
    assert f.data == payload
    assert b"".join(f.iter_data()) == payload
    kept = File(path="/etc/a", data=payload)
    assert kept.kept
    assert f.same_data(kept) and kept.same_data(f)
    assert not f.same_data(File(path="/etc/a", data=payload + b"!"))


def test_validating_a_gzip_bomb_keeps_memory_flat() -> None:
    # 256 MiB of zeros in a 260 KB config: the parse streams it, keeping nothing
    bomb = gz_entry("/etc/bomb", b"\0" * (256 << 20))
    tracemalloc.start()
    try:
        result = parse_ignition(ign_with(bomb), ParseOptions(max_file_size=None, keep_data_up_to=0))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.errors == ()
    assert result.config is not None
    assert result.config.files[0].size == 256 << 20
    assert peak < 16 << 20, peak


def test_a_hash_mismatch_is_located_at_the_hash_key() -> None:
    want = hashlib.sha256(b"other").hexdigest()
    entry = {
        "path": "/etc/a",
        "contents": {"source": "data:,x", "verification": {"hash": f"sha256-{want}"}},
    }
    [finding] = parse_ignition(ign_with(entry), ParseOptions(keep_data_up_to=0)).errors
    assert finding.path == ("storage", "files", 0, "contents", "verification", "hash")
