"""File contents as a stream: a config's large file is written and compared piece by piece.

A `File` larger than what the parser keeps is decoded again from its data URL each time it is
needed (`File.iter_data()`); the writers and the on-disk check take a `Stream` of it instead of
the bytes, so memory stays one piece (1 MiB) whatever the file's size.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from mcd.config.ignition import File


@dataclass(frozen=True, slots=True)
class Stream:
    """Contents too large to hold in memory: `size` bytes, which each call of `chunks()` produces
    again in pieces (a config's file is decoded anew from its data URL)."""

    size: int
    chunks: Callable[[], Iterable[bytes]]


# what a write or a comparison takes: the bytes, or a stream of them
Data = bytes | Stream


def data_size(data: Data) -> int:
    return len(data) if isinstance(data, bytes) else data.size


def pieces(data: Data) -> Iterable[bytes]:
    return (data,) if isinstance(data, bytes) else data.chunks()


def holds_stream(fd: int, data: Stream) -> bool:
    """Compare the open file piece by piece with the stream: memory stays one piece."""
    for piece in data.chunks():
        view = memoryview(piece)
        while view:
            got = os.read(fd, len(view))
            if not got or got != view[: len(got)]:
                return False
            view = view[len(got) :]
    return os.read(fd, 1) == b""


# smaller files are cheaper as bytes; larger ones are streamed (also when the parser kept them)
STREAM_ABOVE = 1 << 20


def contents(f: File) -> Data:
    """What to write or compare for a config's file: its bytes, or a stream when it is large."""
    if f.size <= STREAM_ABOVE:
        return f.data
    return Stream(f.size, f.iter_data)
