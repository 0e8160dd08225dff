"""`mcd.config.parser.Parser`: validating only what no remembered config declares alike gives the
verdict of a parse from nothing, on every Ignition config of the upstream case tables, the
fixtures and examples, an error corpus, and random mutations of a rendered-like config. Pure."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcd.config.findings import InputError
from mcd.config.machineconfig import MachineConfig, machineconfig_from_object
from mcd.config.parser import Parser
from tests.casefiles import CASES_DIR
from tests.unit.test_schema_walk import assert_walker_agrees

REPO = Path(__file__).resolve().parents[2]
Doc = dict[str, Any]


def _mc(ign: Doc, name: str = "rendered-worker-1") -> Doc:
    return {
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": name},
        "spec": {"config": ign},
    }


def _base(files: int = 6, version: str = "3.5.0") -> Doc:
    """A small rendered-like config: inline files (plain and base64), units with dropins."""
    return {
        "ignition": {"version": version},
        "storage": {
            "files": [
                {
                    "path": f"/etc/app/d{i % 2}/f{i}.conf",
                    "mode": 420,
                    "overwrite": True,
                    "contents": {"source": f"data:,v{i}" if i % 2 else "data:;base64,aGVsbG8="},
                }
                for i in range(files)
            ],
            "directories": [{"path": "/etc/app/extra"}],
        },
        "systemd": {
            "units": [
                {
                    "name": f"u{i}.service",
                    "enabled": i % 2 == 0,
                    "contents": "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n",
                    "dropins": [{"name": "10-x.conf", "contents": f"[Service]\nEnvironment=X={i}\n"}],
                }
                for i in range(3)
            ]
        },
        "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAA k"]}]},
    }


def _verdict(mc: MachineConfig | InputError) -> object:
    if isinstance(mc, InputError):
        return ("input error", str(mc))
    ign = mc.ignition
    return (ign.stage, ign.findings, ign.config, ign.partial, mc.spec_findings)


def _parse(obj: Doc, parser: Parser | None) -> MachineConfig | InputError:
    try:
        if parser is None:
            return machineconfig_from_object(copy.deepcopy(obj), "mc.json")
        return parser.from_object(copy.deepcopy(obj), "mc.json")
    except InputError as exc:
        return exc


def assert_same_verdict(obj: Doc, *primers: Doc) -> None:
    """`obj` parsed from nothing, and by a Parser that has parsed `primers` (and `obj`) before;
    and the schema walker's verdict on its Ignition config is jsonschema's."""
    assert_walker_agrees(obj["spec"]["config"])
    fresh = _verdict(_parse(obj, None))
    parser = Parser()
    for primer in primers:
        _parse(primer, parser)
    assert _verdict(_parse(obj, parser)) == fresh
    assert _verdict(_parse(obj, parser)) == fresh  # again, now that it may know `obj` itself


# ---------------------------------------------------------------- every config of the tables


def _ignition_docs(value: object) -> Iterator[Doc]:
    """Every Ignition config (an object with ignition.version) found inside `value`."""
    if isinstance(value, dict):
        ign = value.get("ignition")
        if isinstance(ign, dict) and "version" in ign:
            yield value
        for v in value.values():
            yield from _ignition_docs(v)
    elif isinstance(value, list):
        for v in value:
            yield from _ignition_docs(v)


def _table_docs() -> list[Any]:
    docs: list[Any] = []
    for table in sorted(CASES_DIR.glob("*.json")):
        for case in json.loads(table.read_text())["cases"]:
            docs += [pytest.param(d, id=f"{table.stem}:{case['name']}") for d in _ignition_docs(case)]
    for path in sorted([*(REPO / "tests" / "fixtures").glob("*.*"), *(REPO / "examples").glob("*.*")]):
        if path.suffix not in (".json", ".yaml", ".yml"):
            continue
        for n, doc in enumerate(yaml.safe_load_all(path.read_text())):
            docs += [pytest.param(d, id=f"{path.name}:{n}") for d in _ignition_docs(doc)]
    return docs


TABLE_DOCS = _table_docs()


@pytest.mark.parametrize("ign", TABLE_DOCS)
def test_the_schema_walker_agrees_with_jsonschema_on_every_table_config(ign: Doc) -> None:
    assert_walker_agrees(ign)


def test_the_tables_hold_configs_to_compare() -> None:
    if not CASES_DIR.is_dir():  # as every case-table test: .ci/run warns that they skip
        pytest.skip(f"case tables {CASES_DIR} not present")
    assert len(TABLE_DOCS) >= 20


@pytest.mark.parametrize("ign", TABLE_DOCS)
def test_every_table_config_has_the_verdict_of_a_full_parse(ign: Doc) -> None:
    # primed with itself (every item known), with the base config (some items alike), and both
    assert_same_verdict(_mc(ign), _mc(ign))
    assert_same_verdict(_mc(ign), _mc(_base(version=ign["ignition"]["version"])))
    assert_same_verdict(_mc(_base()), _mc(ign))


# ---------------------------------------------------------------- the error corpus


def _with(change: str, value: object) -> Doc:
    doc = _base()
    *parents, last = change.split(".")
    node: Any = doc
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return doc


ERROR_CORPUS = {
    "mode as a float": _with("storage.files.1.mode", 420.0),
    "mode as a boolean": _with("storage.files.1.mode", True),
    "overwrite as an integer": _with("storage.files.2.overwrite", 1),
    "enabled as an integer": _with("systemd.units.0.enabled", 1),
    "relative path": _with("storage.files.0.path", "etc/app/x"),
    "mode 01777": _with("storage.files.3.mode", 0o1777),
    "bad base64": _with("storage.files.0.contents", {"source": "data:;base64,!!!"}),
    "bad gzip": _with("storage.files.0.contents", {"source": "data:,x", "compression": "gzip"}),
    "sha512 mismatch": _with(
        "storage.files.0.contents",
        {"source": "data:,x", "verification": {"hash": "sha512-" + "0" * 128}},
    ),
    "duplicate path": _with("storage.files.1.path", "/etc/app/d0/f0.conf"),
    "directory on a file's path": _with("storage.directories", [{"path": "/etc/app/d0/f0.conf"}]),
    "path below a file": _with("storage.files.1.path", "/etc/app/d0/f0.conf/below"),
    "unit without a suffix": _with("systemd.units.1.name", "u1"),
    "bad unit text": _with("systemd.units.1.contents", "[Service\n"),
    "duplicate unit": _with("systemd.units.1.name", "u0.service"),
    "unknown key": _with("storage.files.1.colour", "red"),
    "missing path": _with("storage.files.1", {"mode": 420}),
    "unknown version": _with("ignition.version", "9.9.9"),
    "link over a file": _with("storage.links", [{"path": "/etc/app/d0", "target": "/tmp"}]),
}


@pytest.mark.parametrize("doc", list(ERROR_CORPUS.values()), ids=list(ERROR_CORPUS))
def test_every_error_is_found_as_by_a_full_parse(doc: Doc) -> None:
    fresh = _verdict(_parse(_mc(doc), None))
    assert isinstance(fresh, tuple) and fresh[1], "the corpus entry must be refused or warned about"
    assert_same_verdict(_mc(doc), _mc(_base()))
    assert_same_verdict(_mc(doc), _mc(_base()), _mc(doc))


def test_items_alike_are_taken_over_and_only_the_changed_one_is_new() -> None:
    parser = Parser()
    old = parser.from_object(_mc(_base()), "old")
    changed = _with("storage.files.1.contents", {"source": "data:,new"})
    new = parser.from_object(_mc(changed, "rendered-worker-2"), "new")
    assert old.config is not None and new.config is not None
    same = [a is b for a, b in zip(old.config.files, new.config.files, strict=True)]
    assert same == [True, False, True, True, True, True]
    assert all(a is b for a, b in zip(old.config.units, new.config.units, strict=True))


def test_a_config_with_findings_is_not_remembered() -> None:
    parser = Parser()
    parser.from_object(_mc(ERROR_CORPUS["mode as a float"]), "bad")
    assert parser.like("rendered-worker-1") is None


def test_the_parser_keeps_at_most_keep_configs() -> None:
    parser = Parser(keep=2)
    for n in range(4):
        parser.from_object(_mc(_base(), f"rendered-worker-{n}"), "mc")
    assert parser.like("rendered-worker-0") is parser.like("rendered-worker-3")  # forgotten: the last
    parser.forget()
    assert parser.like("rendered-worker-3") is None


# ---------------------------------------------------------------- random mutations

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-2, max_value=2**32)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(["", "/etc/app/d0/f0.conf", "data:,x", "a.service", "[Unit]\n", "420"])
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["path", "source", "name", "x"]), inner, max_size=3)
    ),
    max_leaves=8,
)
FIELDS = [
    "storage.files.{i}.mode",
    "storage.files.{i}.path",
    "storage.files.{i}.overwrite",
    "storage.files.{i}.contents",
    "storage.files.{i}.contents.source",
    "storage.files.{i}",
    "systemd.units.{j}.name",
    "systemd.units.{j}.enabled",
    "systemd.units.{j}.contents",
    "systemd.units.{j}.dropins",
    "storage.directories",
    "storage.links",
    "passwd.users",
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.sampled_from(FIELDS), st.integers(0, 5), st.integers(0, 2), values),
        min_size=1,
        max_size=3,
    )
)
def test_random_mutations_have_the_verdict_of_a_full_parse(changes: list[tuple[str, int, int, Any]]) -> None:
    doc = _base()
    for field, i, j, value in changes:
        where = field.format(i=i, j=j)
        try:
            doc = _mutated(doc, where, value)
        except (KeyError, IndexError, TypeError, ValueError):
            continue
    assert_same_verdict(_mc(doc), _mc(_base()))


def _mutated(doc: Doc, where: str, value: object) -> Doc:
    out = copy.deepcopy(doc)
    *parents, last = where.split(".")
    node: Any = out
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return out
