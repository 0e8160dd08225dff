"""MD5 and SHA-256 of small data without hashlib's import. Pure.

hashlib's import loads OpenSSL's libcrypto: about 3 ms of a short command that hashes a few
kilobytes (the rendered config's name, `validate`'s digests). CPython also carries its own MD5
and SHA-256 (the modules hashlib falls back on without OpenSSL): the same digests, slower per
byte (here MD5 1.5x, SHA-256 8x), free to import. Data up to the limits below takes them, larger
data hashlib; where CPython was built without them, hashlib serves all.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: its import is a few ms of every short command
if TYPE_CHECKING:
    from typing import Any

# where hashlib's import (about 3 ms) costs less than the slower built-in hash would take longer
MD5_BUILTIN_UP_TO = 2 << 20
SHA256_BUILTIN_UP_TO = 256 << 10


def md5(data: bytes) -> Any:
    """`hashlib.md5(data)`."""
    if len(data) <= MD5_BUILTIN_UP_TO:
        try:
            builtin = __import__("_md5").md5
        except (ImportError, AttributeError):
            pass
        else:
            return builtin(data)
    import hashlib  # noqa: PLC0415

    # a name, not a secret: FIPS builds refuse MD5 for security use only
    return hashlib.md5(data, usedforsecurity=False)


def sha256(size_up_to: int | None) -> Any:
    """`hashlib.sha256()`, for at most `size_up_to` bytes (None: unknown)."""
    if size_up_to is not None and size_up_to <= SHA256_BUILTIN_UP_TO:
        for module in ("_sha256", "_sha2"):  # CPython 3.11, then 3.12 on
            try:
                builtin = __import__(module).sha256
            except (ImportError, AttributeError):
                continue
            return builtin()
    import hashlib  # noqa: PLC0415

    return hashlib.sha256()
