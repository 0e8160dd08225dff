"""Real journal files written at test time by systemd-journal-remote from export format."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from mcd.agent.watch.logins import LOGIND_UNIT, NEW_SESSION

REMOTE = next(
    (p for p in ("/usr/lib/systemd/systemd-journal-remote", "/lib/systemd/systemd-journal-remote")
     if Path(p).exists()),
    shutil.which("systemd-journal-remote"),
)  # fmt: skip


def this_boot() -> str:
    return Path("/proc/sys/kernel/random/boot_id").read_text().strip().replace("-", "")


def entry(message: str, *, boot: str | None = None, message_id: str | None = None, unit: str = LOGIND_UNIT,
          seq: int = 1) -> dict[str, str]:  # fmt: skip
    fields = {
        "__REALTIME_TIMESTAMP": str(1_700_000_000_000_000 + seq),
        "__MONOTONIC_TIMESTAMP": str(1000 + seq),
        "_BOOT_ID": boot or this_boot(),
        "MESSAGE": message,
        "_SYSTEMD_UNIT": unit,
        "SYSLOG_IDENTIFIER": "systemd-logind",
        "_HOSTNAME": "node",
    }
    if message_id:
        fields["MESSAGE_ID"] = message_id
    return fields


def new_session(n: int = 1, **kw: str) -> dict[str, str]:
    return entry(f"New session {n} of user core.", message_id=NEW_SESSION, seq=n, **kw)  # type: ignore[arg-type]


def write_journal(path: Path, entries: list[dict[str, str]]) -> Path:
    """`path` (ending in .journal) holding `entries`; the caller's test must allow commands."""
    if REMOTE is None:
        pytest.skip("systemd-journal-remote is not installed")
    export = "".join("".join(f"{k}={v}\n" for k, v in e.items()) + "\n" for e in entries)
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([REMOTE, f"--output={path}", "-"], input=export.encode(), check=True, capture_output=True)
    return path
