"""What the API server sends, read: a watch stream's lines and an error answer as `ApiError`.

Pure: no I/O of its own (the stream is the caller's), kept apart from `mcd.kube.client`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from mcd.kube.errors import ApiError, ConflictError, GoneError, NotFoundError


def lines(resp: Any) -> Iterator[bytes]:
    """Complete lines of a streamed body (a watch sends one JSON event per line).

    A rendered MachineConfig's event is one line of megabytes: the chunks are kept apart and
    joined once, so each byte is searched and copied once (not once per chunk that follows),
    and a line is handed over, not kept in this frame while the watch waits for the next one.
    """
    parts: list[bytes] = []
    for chunk in resp.stream(64 * 1024, decode_content=True):
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            parts.append(chunk[start:end])
            start = end + 1
            if any(p and not p.isspace() for p in parts):
                yield _joined(parts)
            parts.clear()
        if start < len(chunk):
            parts.append(chunk[start:])
        del chunk
    if any(p and not p.isspace() for p in parts):
        yield _joined(parts)


def _joined(parts: list[bytes]) -> bytes:
    line = b"".join(parts)
    parts.clear()
    return line


def watch_event(line: bytes) -> tuple[str, dict[str, Any], bytes | None]:
    """One watch event line as (type, object, the object's JSON text when it can be cut out).

    kube-apiserver writes `{"type":"…","object":{…}}`: the object's bytes are those between
    `"object":` and the last brace. They are decoded alone, and the rest with `null` in their
    place; a line of any other shape fails one of the two and is decoded whole (no text). The
    text lets a MachineConfig be recorded as served without encoding it again.
    ValueError when the line is not a JSON object.
    """
    line = line.rstrip()
    head = line.find(b'"object":')
    if head > 0 and line.endswith(b"}"):
        text = line[head + 9 : -1]
        try:
            envelope, obj = json.loads(line[: head + 9] + b"null}"), json.loads(text)
        except ValueError:
            pass
        else:
            if isinstance(envelope, dict) and isinstance(obj, dict):
                return str(envelope.get("type", "")), obj, text
    event = json.loads(line)
    if not isinstance(event, dict):
        raise ValueError("not a JSON object")
    obj = event.get("object") or {}
    return str(event.get("type", "")), obj if isinstance(obj, dict) else {}, None


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
