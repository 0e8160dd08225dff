"""File contents of a config, decoded as a stream. Pure: no I/O.

A config of a few megabytes can declare a gzip file of gigabytes. Decoding it whole would take
that much memory in `validate`, `plan` and `start` alike, so contents are decoded piece by
piece: the data URL, then the gzip stream, each piece at most `CHUNK` bytes, counted against a
size cap and hashed as it passes. A reader keeps what it needs (nothing, to validate; a temp
file, to write) and memory stays at a few chunks whatever the file size.

API (also for the host writer):

* `iter_contents(resource, max_size=...)` yields the decoded bytes of one resource, in order;
  raises `ContentsError` (which field is wrong, and why) possibly after some pieces, so a
  writer must discard a partial result. A declared hash is verified after the last piece.
* `DEFAULT_MAX_FILE_SIZE`: the cap used when none is given (`--max-file-size`).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterator

from mcd.config.dataurl import iter_data_url

TYPE_CHECKING = False  # not typing's: its import is a few ms of every short command
if TYPE_CHECKING:
    from mcd.config.ignition_model import Resource

CHUNK = 1 << 20
# far above any real file of a node (the largest rendered configs carry files of a few MiB),
# far below what a node's memory or /etc can take
DEFAULT_MAX_FILE_SIZE = 256 << 20
HASH_HEX_LENGTHS = {"sha512": 128, "sha256": 64}
GZIP_WBITS = 16 + zlib.MAX_WBITS  # a gzip header and trailer around deflate data


class ContentsError(ValueError):
    """Contents that cannot be decoded. `field` is the JSON path of the key at fault inside the
    resource: ``("source",)``, ``("compression",)`` or ``("verification", "hash")``."""

    def __init__(self, field: tuple[str, ...], message: str) -> None:
        super().__init__(message)
        self.field = field


_SIZE = re.compile(r"\s*(\d+)\s*([KMGT]?)(?:I?B)?\s*")
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str) -> int:
    """A byte count as given to ``--max-file-size``: ``1048576``, ``512K``, ``256M``, ``2GiB``
    (units are powers of 1024)."""
    match = _SIZE.fullmatch(text.upper())
    if match is None:
        raise ValueError(f"invalid size {text!r}: want a number of bytes, optionally with K, M, G or T")
    return int(match.group(1)) * _UNITS[match.group(2)]


def iter_contents(
    res: Resource, *, max_size: int | None = DEFAULT_MAX_FILE_SIZE, owner: str = "the file"
) -> Iterator[bytes]:
    """The decoded (and decompressed) bytes of a ``data:`` resource of file `owner`, piece by
    piece (see the module doc)."""
    if res.source is None:
        return
    hasher = None
    want = ""
    if res.hash is not None:
        kind, _, want = res.hash.partition("-")
        # hashlib here, not at the top: its OpenSSL binding costs every short command ~3 ms
        import hashlib  # noqa: PLC0415

        hasher = hashlib.new(kind)  # the parser checked the hash spec (sha256 or sha512) before
    pieces = _decoded(res.source, owner)
    if res.compression == "gzip":
        pieces = _gunzipped(pieces, owner)
    size = 0
    for piece in pieces:
        size += len(piece)
        if max_size is not None and size > max_size:
            raise ContentsError(
                ("source",),
                f"contents of {owner} are larger than the maximum file size of {max_size} bytes "
                "(--max-file-size)",
            )
        if hasher is not None:
            hasher.update(piece)
        yield piece
    if hasher is not None and hasher.hexdigest() != want.lower():
        raise ContentsError(
            ("verification", "hash"),
            f"{hasher.name} verification failed for {owner}: contents hash to {hasher.hexdigest()}, "
            f"config expects {want}",
        )


def _decoded(source: str, owner: str) -> Iterator[bytes]:
    try:
        yield from iter_data_url(source, CHUNK)
    except ValueError as exc:
        raise ContentsError(("source",), f"could not decode contents of {owner}: {exc}") from None


def _gunzipped(pieces: Iterator[bytes], owner: str) -> Iterator[bytes]:
    """Decompress a gzip stream (several members one after the other, as Go's reader takes),
    never holding more than CHUNK bytes of output at once."""
    inflater = zlib.decompressobj(GZIP_WBITS)
    member_has_input = False
    any_input = False
    problem = f"could not decompress gzip contents of {owner}"
    try:
        for piece in pieces:
            data = piece
            while data:
                member_has_input = any_input = True
                out = inflater.decompress(data, CHUNK)
                if out:
                    yield out
                if inflater.eof:
                    # the member ended: anything after it must be another member
                    data = inflater.unused_data
                    inflater = zlib.decompressobj(GZIP_WBITS)
                    member_has_input = False
                    continue
                data = inflater.unconsumed_tail
                while not data and len(out) == CHUNK:
                    # the output was cut at CHUNK: inflate may hold more without new input
                    out = inflater.decompress(b"", CHUNK)
                    if out:
                        yield out
                    data = inflater.unconsumed_tail
                    if inflater.eof:
                        data = inflater.unused_data
                        inflater = zlib.decompressobj(GZIP_WBITS)
                        member_has_input = False
                        break
    except zlib.error as exc:
        raise ContentsError(("compression",), f"{problem}: {exc}") from None
    if member_has_input:
        raise ContentsError(("compression",), f"{problem}: unexpected end of the compressed stream")
    if not any_input:
        # Go's gzip reader wants at least one header (MCO fails on empty gzip contents)
        raise ContentsError(("compression",), f"{problem}: no gzip data")
