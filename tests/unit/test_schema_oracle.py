"""The schema interpreter of mcd.config.schema against jsonschema (the package it replaced at run
time): on the same schema files, both must give the same findings, for valid and broken configs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache
from importlib import resources
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft7Validator, ValidationError, validators

from mcd.config import schema
from mcd.config.findings import Finding
from mcd.config.schema import SUPPORTED_VERSIONS, validate_ignition_schema
from tests.casefiles import CASES_DIR


def _type(
    validator: Any, types: str | list[str], instance: Any, _schema: object
) -> Iterator[ValidationError]:
    wanted = [types] if isinstance(types, str) else types
    if not any(validator.is_type(instance, t) for t in wanted):
        yield ValidationError(f"expected {' or '.join(wanted)}, got {schema._describe(instance)}")


def _required(
    validator: Any, required: list[str], instance: Any, _schema: object
) -> Iterator[ValidationError]:
    if validator.is_type(instance, "object"):
        for name in required:
            if name not in instance:
                yield ValidationError(f'missing required field "{name}"')


def _unknown_keys(
    validator: Any, _mode: object, instance: Any, sch: dict[str, Any]
) -> Iterator[ValidationError]:
    if validator.is_type(instance, "object"):
        known = sch.get("properties", {})
        for key in instance:
            if key not in known:
                yield ValidationError(str(key), path=(key,))


# the validator mcd used before: draft 7, integers as Go decodes them, our three keywords
_ORACLE: Any = validators.extend(  # type: ignore[no-untyped-call]
    Draft7Validator,
    validators={"type": _type, "required": _required, "x-unknown-keys": _unknown_keys},
    type_checker=Draft7Validator.TYPE_CHECKER.redefine("integer", lambda _c, i: type(i) is int),
)


@cache
def _oracle(version: str) -> Any:
    name = "ignition-" + version.rsplit(".", 1)[0] + ".json"
    text = resources.files("mcd.config").joinpath("schemas").joinpath(name).read_text(encoding="utf-8")
    return _ORACLE(json.loads(text))


def oracle_findings(doc: object, version: str) -> list[Finding]:
    wording = "Config has unrecognized key: {}" if version.startswith("2") else "Unused key {}"
    out = []
    for error in _oracle(version).iter_errors(doc):
        if error.validator == "x-unknown-keys":
            out.append(Finding(tuple(error.path), wording.format(error.message), "warning"))
        else:
            out.append(Finding(tuple(error.path), error.message))
    return sorted(out, key=schema._order)


_WRONG = (
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False) | st.sampled_from(["", "x"])
)


@st.composite
def _instance(draw: st.DrawFn, node: dict[str, Any], definitions: dict[str, Any], depth: int = 0) -> object:
    """A value for schema `node`: mostly of one of its types (objects with some of their
    properties and sometimes an unknown key), sometimes any scalar (often the wrong type)."""
    while "$ref" in node:
        node = definitions[node["$ref"].rsplit("/", 1)[1]]
    types = node.get("type", "object")
    types = [types] if isinstance(types, str) else types
    if depth > 6 or draw(st.integers(0, 9)) == 0:
        return draw(_WRONG | st.lists(_WRONG, max_size=2))
    kind = draw(st.sampled_from(types))
    if kind == "object":
        props: dict[str, Any] = node.get("properties", {})
        names = draw(st.lists(st.sampled_from(sorted(props)), unique=True)) if props else []
        value = {name: draw(_instance(props[name], definitions, depth + 1)) for name in names}
        if draw(st.integers(0, 7)) == 0:
            value["unknownKey"] = draw(_WRONG)
        return value
    if kind == "array":
        items = node.get("items", {"type": "string"})
        return draw(st.lists(_instance(items, definitions, depth + 1), max_size=3))
    scalars = {"string": st.sampled_from(["", "/etc/a", "data:,x"]), "integer": st.integers(-2, 420)}
    return draw(scalars.get(kind, _WRONG))


@st.composite
def _config(draw: st.DrawFn) -> tuple[str, object]:
    version = draw(st.sampled_from(SUPPORTED_VERSIONS))
    root = _oracle(version).schema
    return version, draw(_instance(root, root["definitions"]))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_config())
def test_random_documents_get_jsonschemas_findings(case: tuple[str, object]) -> None:
    version, doc = case
    assert validate_ignition_schema(doc, version) == oracle_findings(doc, version)


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
@pytest.mark.parametrize("doc", [None, [], "x", 1, {}])
def test_non_configs_get_jsonschemas_findings(version: str, doc: object) -> None:
    assert validate_ignition_schema(doc, version) == oracle_findings(doc, version)


def _case_configs() -> list[tuple[str, object, str]]:
    """Every Ignition config of the upstream case tables (valid and broken ones)."""
    found: list[tuple[str, object, str]] = []

    def walk(node: object, where: str) -> None:
        if isinstance(node, dict):
            ign = node.get("ignition")
            version = ign.get("version") if isinstance(ign, dict) else None
            if version in SUPPORTED_VERSIONS:
                found.append((where, node, version))
            for key, value in node.items():
                walk(value, f"{where}.{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{where}[{i}]")

    for table in sorted(CASES_DIR.glob("*.json")):
        walk(json.loads(table.read_text()), table.name)
    return found


def test_case_table_configs_get_jsonschemas_findings() -> None:
    configs = _case_configs()
    if not configs:
        pytest.skip(f"no case tables in {CASES_DIR}")
    for where, doc, version in configs:
        assert validate_ignition_schema(doc, version) == oracle_findings(doc, version), where


def test_a_schema_keyword_the_interpreter_lacks_is_refused() -> None:
    with pytest.raises(ValueError, match="unsupported schema keywords"):
        schema._check_keywords({"type": "object", "properties": {"a": {"minLength": 1}}}, "x.json")
    with pytest.raises(ValueError, match="unsupported schema keywords"):
        schema._check_keywords({"$ref": "#/definitions/a", "type": "object"}, "x.json")
