"""No module-global state in the pure layers (issue 26 item 6): whatever is kept for speed is
owned by an object its caller holds (`mcd.config.parser.Parser`, a `Checker`'s per-parse
memos), never remembered by a module between calls. Pure: reads the sources only."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from mcd.config.ignition import parse_ignition
from mcd.config.machineconfig import machineconfig_from_object
from mcd.planner import diff as diff_module
from mcd.planner.diff import diff

PURE = ("config", "planner", "policy", "render")
ROOT = Path(__file__).resolve().parents[2] / "mcd"
CACHE_DECORATORS = {"cache", "lru_cache", "cached_property"}
# module-level names allowed to hold a memo: the JSON Schemas shipped with the package, compiled
# once per spec version (for jsonschema, and for the walker that spares it a clean config):
# constants of the program, not anything a caller gave; and the methods of the records
# (mcd.config.record), compiled once per shape of the classes the program declares
ALLOWED = {
    ("mcd/config/schema.py", "_compile"),
    ("mcd/config/schema.py", "_walker"),
    ("mcd/config/record.py", "_template"),
}


def _modules() -> list[Path]:
    return sorted(p for layer in PURE for p in (ROOT / layer).rglob("*.py"))


def state_problems(source: str, name: str) -> list[str]:
    """Module-level caches in `source`: memoising decorators, `global` rebinding, and mutable
    containers bound at module level and changed by a function (`.append`, `[k] =`, `.clear` …)."""
    tree = ast.parse(source)
    problems: list[str] = []
    mutable: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            value = node.value
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if isinstance(value, ast.List | ast.Dict | ast.Set) or (
                isinstance(value, ast.Call) and getattr(value.func, "id", "") in {"list", "dict", "set"}
            ):
                mutable |= {t.id for t in targets if isinstance(t, ast.Name)}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for dec in node.decorator_list:
                target = dec.func if isinstance(dec, ast.Call) else dec
                dname = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
                if dname in CACHE_DECORATORS and (name, node.name) not in ALLOWED:
                    problems.append(f"{name}: @{dname} on {node.name}")
            for inner in ast.walk(node):
                if isinstance(inner, ast.Global):
                    problems.append(f"{name}: global {', '.join(inner.names)} in {node.name}")
                if (
                    isinstance(inner, ast.Attribute)
                    and isinstance(inner.value, ast.Name)
                    and inner.value.id in mutable
                    and inner.attr in _MUTATORS
                ):
                    problems.append(f"{name}: {inner.value.id}.{inner.attr} in {node.name}")
                if (
                    isinstance(inner, ast.Subscript)
                    and isinstance(inner.ctx, ast.Store | ast.Del)
                    and isinstance(inner.value, ast.Name)
                    and inner.value.id in mutable
                ):
                    problems.append(f"{name}: {inner.value.id}[…] assigned in {node.name}")
    return problems


_MUTATORS = {"append", "extend", "clear", "update", "pop", "popitem", "setdefault", "add", "insert", "remove"}


def test_the_pure_layers_keep_no_module_level_cache() -> None:
    problems = [
        p for path in _modules() for p in state_problems(path.read_text(), str(path.relative_to(ROOT.parent)))
    ]
    assert problems == []


@pytest.mark.parametrize(
    "source",
    [
        "from functools import lru_cache\n@lru_cache(maxsize=4)\ndef f(x): return x\n",
        "import functools\n@functools.cache\ndef f(x): return x\n",
        "_last = []\ndef f(x):\n    _last[:] = [x]\n",
        "_seen = {}\ndef f(x):\n    _seen.setdefault(x, 1)\n",
        "n = 0\ndef f():\n    global n\n    n += 1\n",
    ],
)
def test_the_guard_sees_each_kind_of_module_state(source: str) -> None:
    assert state_problems(source, "m.py")


def test_the_diff_remembers_no_pair() -> None:
    # planner/diff._last kept the last pair of configs (and their files) after the update was Done
    assert not [n for n in vars(diff_module) if n in ("_last", "forget_last")]
    doc = {"ignition": {"version": "3.5.0"}, "storage": {"files": [{"path": "/etc/a"}]}}
    old = machineconfig_from_object({"kind": "MachineConfig", "metadata": {"name": "a"}, "spec": {}}, "a")
    new = machineconfig_from_object(
        {"kind": "MachineConfig", "metadata": {"name": "b"}, "spec": {"config": doc}}, "b"
    )
    assert parse_ignition(doc).config is not None
    assert [c.name for c in diff(old, new).file_changes] == ["/etc/a"]
    assert diff(new, new).file_changes == ()
