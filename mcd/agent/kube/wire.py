"""What the API server sends, read: a watch stream's lines and an error answer as `ApiError`.

Pure: no I/O of its own (the stream is the caller's), kept apart from `mcd.agent.kube.client`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from mcd.agent.errors import ApiError, ConflictError, GoneError, NotFoundError


def lines(resp: Any) -> Iterator[bytes]:
    """Complete lines of a streamed body (a watch sends one JSON event per line)."""
    buf = b""
    for chunk in resp.stream(64 * 1024, decode_content=True):
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if line.strip():
                yield line
    if buf.strip():
        yield buf


def api_error(method: str, path: str, status: int, data: bytes | None, retry_after: str | None) -> ApiError:
    message = ""
    try:
        obj = json.loads(data or b"{}")
        if isinstance(obj, dict):
            message = str(obj.get("message", ""))
    except ValueError:
        pass
    text = f"{method} {path}: {status} {message or (data or b'').decode(errors='replace')[:200]}".rstrip()
    delay: float | None = None
    if retry_after and retry_after.strip().isdigit():
        delay = float(retry_after.strip())
    if status == 404:
        return NotFoundError(status, text)
    if status == 409:
        return ConflictError(status, text)
    if status == 410:
        return GoneError(status, text)
    return ApiError(status, text, delay)
