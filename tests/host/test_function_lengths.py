"""No function of the executor (mcd/update) or the host layer (mcd/host) runs past 80 lines: each
is split into steps named for what they do (CONTRIBUTING's limit, checked where it is kept)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

MAX_FUNCTION_LINES = 80
PACKAGES = Path(__file__).resolve().parents[2] / "mcd"
MODULES = sorted(p for pkg in ("update", "host") for p in (PACKAGES / pkg).glob("*.py"))


def _long_functions(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        f"{node.name} ({(node.end_lineno or node.lineno) - node.lineno + 1} lines)"
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and (node.end_lineno or node.lineno) - node.lineno + 1 > MAX_FUNCTION_LINES
    ]


@pytest.mark.parametrize("path", MODULES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_function_is_over_the_limit(path: Path) -> None:
    assert _long_functions(path) == []


def test_a_long_function_is_found(tmp_path: Path) -> None:
    body = "\n".join("    x = 1" for _ in range(MAX_FUNCTION_LINES))
    source = tmp_path / "long.py"
    source.write_text(f"def long() -> None:\n{body}\n", encoding="utf-8")
    assert _long_functions(source) == [f"long ({MAX_FUNCTION_LINES + 1} lines)"]
