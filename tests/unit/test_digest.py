"""mcd.config.digest gives hashlib's digests, whichever implementation serves the size."""

from __future__ import annotations

import hashlib

import pytest

from mcd.config import digest

SIZES = [
    0,
    1,
    1000,
    digest.SHA256_BUILTIN_UP_TO,
    digest.SHA256_BUILTIN_UP_TO + 1,
    digest.MD5_BUILTIN_UP_TO + 1,
]


@pytest.mark.parametrize("size", SIZES)
def test_md5_is_hashlibs(size: int) -> None:
    data = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    assert digest.md5(data).hexdigest() == hashlib.md5(data).hexdigest()


@pytest.mark.parametrize("size", [*SIZES, None])
def test_sha256_is_hashlibs(size: int | None) -> None:
    data = b"abc" * ((size or 5000) // 3)
    hasher = digest.sha256(size)
    for start in range(0, len(data), 7000):
        hasher.update(data[start : start + 7000])
    assert hasher.hexdigest() == hashlib.sha256(data).hexdigest()


def test_small_data_takes_cpythons_own_hashes_and_large_data_openssls() -> None:
    openssl = type(hashlib.sha256())
    assert type(digest.md5(b"x")) is not openssl
    assert type(digest.sha256(10)) is not openssl
    assert type(digest.md5(b"x" * (digest.MD5_BUILTIN_UP_TO + 1))) is openssl
    assert type(digest.sha256(None)) is openssl
