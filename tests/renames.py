"""Every `os.rename` a test makes the code under test do, recorded (and still done)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest


def record_renames(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """(source suffix, target name) of every rename from now on: `.staged` is the staged update
    record, `.tmp` a write through a temp file."""
    seen: list[tuple[str, str]] = []
    real_rename = os.rename

    def rename(src: Any, dst: Any) -> None:
        seen.append((Path(src).suffix, Path(dst).name))
        real_rename(src, dst)

    monkeypatch.setattr(os, "rename", rename)
    return seen
