"""One importer each: pyinotify only in mcd/agent/watch/inotify.py; systemd.journal only in
mcd/agent/watch/logins.py (the reader) and mcd/cli/logsetup.py (the log handler)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "mcd"


def _importers(module: str) -> set[str]:
    out = set()
    for path in PKG.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            if any(n == module or n.startswith(module + ".") for n in names):
                out.add(str(path.relative_to(PKG.parent)))
    return out


@pytest.mark.parametrize(
    ("module", "allowed"),
    [
        ("pyinotify", {"mcd/agent/watch/inotify.py"}),
        ("systemd.journal", {"mcd/agent/watch/logins.py", "mcd/cli/logsetup.py"}),
    ],
)
def test_one_importer(module: str, allowed: set[str]) -> None:
    assert _importers(module) <= allowed
