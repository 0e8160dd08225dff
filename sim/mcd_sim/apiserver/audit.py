"""kube-apiserver's audit log format: one `audit.k8s.io/v1` Event per request, as a JSON line,
at stage ResponseComplete. The bearer token never appears: only the user it maps to."""

from __future__ import annotations

import json
import threading
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any


def micro_time(ts: float) -> str:
    """RFC 3339 with microseconds, as metav1.MicroTime serialises."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def complete_lines(path: str | Path) -> list[str]:
    """The audit log's lines written so far. A reader racing the server may see the last line
    half written (a write is not atomic for a reader across a page boundary): only lines ended by
    a newline are complete, so an unterminated tail is left for the next read."""
    text = Path(path).read_text(encoding="utf-8")
    return [line for line in text[: text.rfind("\n") + 1].splitlines() if line]


def read_events(path: str | Path) -> list[dict[str, Any]]:
    """The audit events written so far (complete lines only)."""
    return [json.loads(line) for line in complete_lines(path)]


class AuditLog:
    """Appends audit events to a file; one line per request, flushed at once (a reader may tail it)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._file: IO[str] | None = None

    def open(self) -> None:
        with self._lock:
            if self._file is None:
                self._file = self.path.open("a", encoding="utf-8")

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def record(
        self,
        *,
        verb: str,
        request_uri: str,
        username: str,
        groups: list[str],
        source_ip: str,
        user_agent: str,
        object_ref: dict[str, str] | None,
        code: int,
        received: float,
        completed: float,
        request_object: Any = None,
    ) -> None:
        event: dict[str, Any] = {
            "kind": "Event",
            "apiVersion": "audit.k8s.io/v1",
            "level": "Request",
            "auditID": str(uuid.uuid4()),
            "stage": "ResponseComplete",
            "requestURI": request_uri,
            "verb": verb,
            "user": {"username": username, "groups": groups},
            "sourceIPs": [source_ip],
            "userAgent": user_agent,
        }
        if object_ref:
            event["objectRef"] = object_ref
        event["responseStatus"] = {"metadata": {}, "code": code}
        if request_object is not None:
            event["requestObject"] = request_object
        event["requestReceivedTimestamp"] = micro_time(received)
        event["stageTimestamp"] = micro_time(completed)
        line = json.dumps(event, separators=(",", ":")) + "\n"
        with self._lock:
            if self._file is not None:
                self._file.write(line)
                self._file.flush()
