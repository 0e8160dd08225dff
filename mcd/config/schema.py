"""Structural validation of an Ignition config against our JSON Schemas (types and required keys).

Pure apart from one lazy read of the schema files shipped as package data. Value rules (absolute
paths, modes, URL schemes ...) are not checked here; the schemas hold no value constraints.

Ignition decodes configs into Go structs: a key it does not know is a warning ("Unused key X" in
spec 3, "Config has unrecognized key: X" in spec 2), never an error, and an integer field takes
only an integer literal (``420.0`` does not decode). Both rules are kept here.

The schema files use a handful of JSON Schema (draft 7) keywords: ``type``, ``properties``,
``items`` (one schema for every item), ``required``, ``$ref`` to ``#/definitions/...`` (with no
sibling keywords, which draft 7 would ignore anyway) and our ``x-unknown-keys``. They are checked
here by a small interpreter rather than the jsonschema package, whose import alone took ~65 ms of
every command's start-up; `_compile` refuses a schema that uses anything else, and a test holds
the interpreter to jsonschema's verdicts.

Speed: a rendered config carries thousands of files and hundreds of units that mostly share one
shape. Items of the large lists are grouped by shape (keys and JSON types, recursively) and one
item per shape is validated; since validity depends on nothing but the shape, the result holds
for the whole group. Shapes with problems are re-validated item by item for exact messages.
"""

from __future__ import annotations

import json
import numbers
from collections.abc import Callable, Mapping
from functools import cache
from importlib import resources
from typing import Any

from mcd.config.findings import Finding, JsonPath

SUPPORTED_VERSIONS: tuple[str, ...] = ("3.0.0", "3.1.0", "3.2.0", "3.3.0", "3.4.0", "3.5.0", "2.2.0")

# our own keyword in the schema files: unknown keys of an object become warnings
_UNKNOWN_KEYS = "x-unknown-keys"
_VALUE_SHOWN = 40  # characters of a string value quoted in a type message
_UNKNOWN_WORDING = {"2": "Config has unrecognized key: {}", "3": "Unused key {}"}
_UNKNOWN_PREFIXES = tuple(w.format("") for w in _UNKNOWN_WORDING.values())


def validate_ignition_schema(doc: object, version: str) -> list[Finding]:
    """Type and required-key findings for `doc` as an Ignition config of spec `version`.

    Paths are relative to the Ignition document root. Unknown keys are warnings. Findings are
    sorted by path, then message.
    """
    spec = _spec(version)
    if not isinstance(doc, dict):
        return _sorted(_findings(spec, spec.root, doc, ()))
    out: list[Finding] = []
    stripped: dict[Any, Any] = dict(doc)
    copied: set[str] = set()
    for section, key, item_validator in spec.lists:
        part: Any = stripped.get(section)
        if type(part) is not dict or type(part.get(key)) is not list or not part[key]:
            continue
        items: list[Any] = part[key]
        if section not in copied:  # copy each section once before emptying its lists
            part = stripped[section] = dict(part)
            copied.add(section)
        # an empty list has the same structural verdict as any list: only its items remain
        part[key] = []
        out.extend(_validate_items(spec, item_validator, items, (section, key)))
    out.extend(_findings(spec, spec.root, stripped, ()))
    return _sorted(out)


def is_unknown_key(finding: Finding) -> bool:
    """Whether `finding` is an unknown-key warning (its path ends with the key)."""
    return finding.severity == "warning" and finding.message.startswith(_UNKNOWN_PREFIXES)


# --- validators -------------------------------------------------------------------------------------

Schema = Mapping[str, Any]
# one schema problem: (path relative to the instance checked, message, keyword); the message of
# an unknown key is the bare key (the wording depends on the spec and is applied later)
_Error = tuple[JsonPath, str, str]
_KEYWORDS = frozenset({"type", "properties", "items", "required", "$ref", _UNKNOWN_KEYS})
_ANNOTATIONS = frozenset({"$schema", "$comment", "title", "description", "definitions"})

# draft 7's types, but an integer is an integer literal only: Go's decoder takes nothing else for
# an int field (not 420.0), and a bool is not an integer either
_TYPE_TESTS: dict[str, Callable[[object], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: type(v) is int,
    "number": lambda v: isinstance(v, numbers.Number) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


class _Validator:
    """Checks an instance against one schema of a spec (definitions resolved through `definitions`)."""

    def __init__(self, schema: Schema, definitions: Mapping[str, Schema]) -> None:
        self.schema = schema
        self.definitions = definitions

    def errors(self, instance: object) -> list[_Error]:
        out: list[_Error] = []
        self._check(self.schema, instance, (), out)
        return out

    def _check(self, schema: Schema, instance: Any, path: JsonPath, out: list[_Error]) -> None:
        ref = schema.get("$ref")
        while ref is not None:  # as draft 7: a $ref stands alone, its siblings are ignored
            schema = self.definitions[ref]
            ref = schema.get("$ref")
        types = schema.get("type")
        if types is not None:
            wanted = [types] if isinstance(types, str) else types
            if not any(_TYPE_TESTS[t](instance) for t in wanted):
                out.append((path, f"expected {' or '.join(wanted)}, got {_describe(instance)}", "type"))
        if isinstance(instance, dict):
            properties: Mapping[str, Schema] = schema.get("properties", {})
            for name, sub in properties.items():
                if name in instance:
                    self._check(sub, instance[name], (*path, name), out)
            for name in schema.get("required", ()):
                if name not in instance:
                    out.append((path, f'missing required field "{name}"', "required"))
            if _UNKNOWN_KEYS in schema:
                out.extend(
                    ((*path, key), str(key), _UNKNOWN_KEYS) for key in instance if key not in properties
                )
        elif isinstance(instance, list) and "items" in schema:
            items: Schema = schema["items"]
            for index, item in enumerate(instance):
                self._check(items, item, (*path, index), out)


class _Spec:
    """A compiled schema: the root validator, one validator per large list, the unknown-key wording."""

    def __init__(self, root: _Validator, lists: list[tuple[str, str, _Validator]], unknown: str) -> None:
        self.root = root
        self.lists = lists
        self.unknown = unknown


def _spec(version: str) -> _Spec:
    if version not in SUPPORTED_VERSIONS:
        raise ValueError(
            f"unsupported Ignition spec version {version!r}: expected one of {SUPPORTED_VERSIONS}"
        )
    return _compile(version)


@cache
def _compile(version: str) -> _Spec:
    name = "ignition-" + version.rsplit(".", 1)[0] + ".json"
    text = resources.files("mcd.config").joinpath("schemas").joinpath(name).read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    definitions = {f"#/definitions/{k}": v for k, v in schema.get("definitions", {}).items()}
    _check_keywords(schema, name)
    for node in definitions.values():
        _check_keywords(node, name)
    root = _Validator(schema, definitions)

    def resolve(node: Mapping[str, Any]) -> Mapping[str, Any]:
        ref = node.get("$ref")
        return definitions[ref] if isinstance(ref, str) else node

    # every list directly under a top-level section (storage.files, systemd.units, passwd.users ...)
    lists: list[tuple[str, str, _Validator]] = []
    for section, section_schema in schema["properties"].items():
        for key, prop in resolve(section_schema).get("properties", {}).items():
            if "items" in prop:
                lists.append((section, key, _Validator(prop["items"], definitions)))
    unknown = _UNKNOWN_WORDING[version.split(".", 1)[0]]
    return _Spec(root, lists, unknown)


def _check_keywords(node: object, name: str) -> None:
    """Refuse a schema file using what the interpreter does not implement (it would be ignored)."""
    if not isinstance(node, dict):
        raise ValueError(f"{name}: a schema must be an object, got {node!r}")
    unknown = set(node) - _KEYWORDS - _ANNOTATIONS
    if unknown or ("$ref" in node and len(node) > 1):
        raise ValueError(f"{name}: unsupported schema keywords {sorted(unknown) or sorted(node)}")
    for sub in node.get("properties", {}).values():
        _check_keywords(sub, name)
    if "items" in node:
        _check_keywords(node["items"], name)


# --- findings ---------------------------------------------------------------------------------------


def _findings(spec: _Spec, validator: _Validator, instance: Any, prefix: JsonPath) -> list[Finding]:
    return [finding for finding, _ in _checked(spec, validator, instance, prefix)]


def _checked(
    spec: _Spec, validator: _Validator, instance: Any, prefix: JsonPath
) -> list[tuple[Finding, bool]]:
    """Findings, each with whether its message quotes the value (only type mismatches do)."""
    out: list[tuple[Finding, bool]] = []
    for path, message, keyword in validator.errors(instance):
        if keyword == _UNKNOWN_KEYS:
            out.append((Finding(prefix + path, spec.unknown.format(message), "warning"), False))
        else:
            out.append((Finding(prefix + path, message), keyword == "type"))
    return out


def _validate_items(spec: _Spec, validator: _Validator, items: list[Any], prefix: JsonPath) -> list[Finding]:
    groups: dict[object, list[int]] = {}
    for index, item in enumerate(items):
        groups.setdefault(_shape(item), []).append(index)
    out: list[Finding] = []
    for indices in groups.values():
        first = indices[0]
        checked = _checked(spec, validator, items[first], ())
        if not checked:
            continue  # the whole group is valid
        if not any(quotes_value for _, quotes_value in checked):
            # missing and unknown keys are fixed by the shape: the same findings hold for each item
            for index in indices:
                out.extend(f.located((*prefix, index)) for f, _ in checked)
            continue
        # type messages quote the value: validate each item for its own wording
        out.extend(f.located((*prefix, first)) for f, _ in checked)
        for index in indices[1:]:
            out.extend(_findings(spec, validator, items[index], (*prefix, index)))
    return out


_OBJECT = "object"
_ARRAY = "array"


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _shape(value: object) -> object:
    """A hashable key equal for two values iff they have the same keys and JSON types all the way down."""
    # isinstance, as the validator's own type checks: a dict or list subclass is still looked into;
    # a scalar's shape (its type) is taken inline, saving a call per value
    if isinstance(value, dict):
        return (
            _OBJECT,
            *[(k, v.__class__ if v.__class__ in _SCALARS else _shape(v)) for k, v in value.items()],
        )
    if isinstance(value, list):
        return (_ARRAY, *[v.__class__ if v.__class__ in _SCALARS else _shape(v) for v in value])
    # scalars: the Python type tells string, integer, float, bool and null apart
    return type(value)


def _describe(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {json.dumps(value)}"
    if isinstance(value, int):
        return f"integer {value}"
    if isinstance(value, float):
        return f"number {json.dumps(value)}"
    if isinstance(value, str):
        shown = json.dumps(value[:_VALUE_SHOWN], ensure_ascii=False)
        return f"string {shown}" + ("..." if len(value) > _VALUE_SHOWN else "")
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    return type(value).__name__


def _path_key(path: JsonPath) -> tuple[tuple[int, int | str], ...]:
    return tuple((0, p) if isinstance(p, int) else (1, p) for p in path)


def _order(finding: Finding) -> tuple[object, ...]:
    return (_path_key(finding.path), finding.severity, finding.message)


def _sorted(findings: list[Finding]) -> list[Finding]:
    return sorted(findings, key=_order)
