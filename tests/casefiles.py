"""Access to the upstream case tables in ``<repo>/../shared/cases`` (kept outside the repo)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

# MCD_CASES_DIR: the tables seen from a copy of the tree elsewhere (make mutate runs the tests in mutants/)
CASES_DIR = Path(
    os.environ.get("MCD_CASES_DIR") or Path(__file__).resolve().parents[1].parent / "shared" / "cases"
)


def load_cases(filename: str, kind: str | None = None) -> list[dict[str, Any]]:
    """Cases of one table, optionally of one `kind`; skips the test module when the tables are absent."""
    path = CASES_DIR / filename
    if not path.is_file():
        pytest.skip(f"case table {path} not present", allow_module_level=True)
    cases: list[dict[str, Any]] = json.loads(path.read_text())["cases"]
    return [c for c in cases if kind is None or c.get("kind") == kind]


def case_params(cases: list[dict[str, Any]]) -> list[Any]:
    """pytest params with the case names as ids."""
    return [pytest.param(c, id=c["name"]) for c in cases]
