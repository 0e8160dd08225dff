"""Structural validation of an Ignition config against our JSON Schemas (types and required keys).

Pure apart from one lazy read of the schema files shipped as package data. Value rules (absolute
paths, modes, URL schemes ...) are not checked here; the schemas hold no value constraints.

Ignition decodes configs into Go structs: a key it does not know is a warning ("Unused key X" in
spec 3, "Config has unrecognized key: X" in spec 2), never an error, and an integer field takes
only an integer literal (``420.0`` does not decode). Both rules are kept here.

Speed: jsonschema is the validator, and every finding is its own; but importing it costs a
short command about 100 ms, several times the rest of its start-up. So a config is first walked
against the same schema files by `mcd.config.schemawalk`, which answers one question only: is
there nothing to report? Only when it cannot prove that (a finding, or a keyword it does not
know) is jsonschema imported and run (tests/unit/test_schema_walk.py holds the two to the same
verdict on every case table, fixture and random mutations).

On that path, a rendered config carries thousands of files and hundreds of units that mostly
share one shape. Items of the large lists are grouped by shape (keys and JSON types,
recursively) and one item per shape is validated; since validity depends on nothing but the
shape, the result holds for the whole group. Shapes with problems are re-validated item by item
for exact messages.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Iterator, Mapping
from functools import cache

from mcd.config.findings import Finding, JsonPath
from mcd.config.schemawalk import Walker

TYPE_CHECKING = False  # not typing's: its import is a few ms of every short command
if TYPE_CHECKING:  # jsonschema itself is imported only when a config is not known clean
    from typing import Any

    from jsonschema import ValidationError
    from jsonschema.protocols import Validator

SUPPORTED_VERSIONS: tuple[str, ...] = ("3.0.0", "3.1.0", "3.2.0", "3.3.0", "3.4.0", "3.5.0", "2.2.0")

# our own keyword in the schema files: unknown keys of an object become warnings
_UNKNOWN_KEYS = "x-unknown-keys"
_VALUE_SHOWN = 40  # characters of a string value quoted in a type message
_UNKNOWN_WORDING = {"2": "Config has unrecognized key: {}", "3": "Unused key {}"}
_UNKNOWN_PREFIXES = tuple(w.format("") for w in _UNKNOWN_WORDING.values())


def validate_ignition_schema(
    doc: object, version: str, known: Mapping[tuple[str, str], Collection[int]] | None = None
) -> list[Finding]:
    """Type and required-key findings for `doc` as an Ignition config of spec `version`.

    Paths are relative to the Ignition document root. Unknown keys are warnings. Findings are
    sorted by path, then message. `known`: indices of list items known to be valid (declared
    alike in a config validated before, `mcd.config.reuse`), by (section, key): not checked.
    """
    if version not in SUPPORTED_VERSIONS:
        raise ValueError(
            f"unsupported Ignition spec version {version!r}: expected one of {SUPPORTED_VERSIONS}"
        )
    walker = _walker(version)
    if walker is not None and walker.clean_document(doc, known):
        return []
    spec = _compile(version)
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
        skip = known.get((section, key), ()) if known is not None else ()
        out.extend(_validate_items(spec, item_validator, items, (section, key), skip))
    out.extend(_findings(spec, spec.root, stripped, ()))
    return _sorted(out)


def is_unknown_key(finding: Finding) -> bool:
    """Whether `finding` is an unknown-key warning (its path ends with the key)."""
    return finding.severity == "warning" and finding.message.startswith(_UNKNOWN_PREFIXES)


# --- validators -------------------------------------------------------------------------------------


class _Spec:
    """A compiled schema: the root validator, one validator per large list, the unknown-key wording."""

    def __init__(self, root: Validator, lists: list[tuple[str, str, Validator]], unknown: str) -> None:
        self.root = root
        self.lists = lists
        self.unknown = unknown


def _schema(version: str) -> dict[str, Any]:
    """The schema file of spec `version`: package data, read by the package's own loader (what
    pkgutil.get_data does; importlib.resources would cost a short command the import of
    zipfile, tempfile and threading)."""
    name = "ignition-" + version.rsplit(".", 1)[0] + ".json"
    loader: Any = __spec__.loader
    data: bytes = loader.get_data(os.path.join(os.path.dirname(__file__), "schemas", name))
    schema: dict[str, Any] = json.loads(data)
    return schema


@cache
def _walker(version: str) -> Walker | None:
    """The schema of spec `version` compiled for the walker, once per version (as `_compile`)."""
    return Walker.of(_schema(version), _UNKNOWN_KEYS)


@cache
def _compile(version: str) -> _Spec:
    schema = _schema(version)
    root = _validator_class(schema)
    definitions: dict[str, Any] = schema["definitions"]

    def resolve(node: Mapping[str, Any]) -> Mapping[str, Any]:
        ref = node.get("$ref")
        return definitions[ref.rsplit("/", 1)[1]] if isinstance(ref, str) else node

    # every list directly under a top-level section (storage.files, systemd.units, passwd.users ...)
    lists: list[tuple[str, str, Validator]] = []
    for section, section_schema in schema["properties"].items():
        for key, prop in resolve(section_schema).get("properties", {}).items():
            if "items" in prop:
                # evolve keeps the root's resolver, so the item schema's $refs still resolve
                lists.append((section, key, root.evolve(schema=prop["items"])))
    unknown = _UNKNOWN_WORDING[version.split(".", 1)[0]]
    return _Spec(root, lists, unknown)


def _is_integer(_checker: object, instance: object) -> bool:
    # Go's decoder takes only integer literals for an int field; bool is not an integer either
    return type(instance) is int


def _type(
    validator: Validator, types: str | list[str], instance: Any, _schema: object
) -> Iterator[ValidationError]:
    from jsonschema import ValidationError  # noqa: PLC0415 (only for a config not known clean)

    wanted = [types] if isinstance(types, str) else types
    if not any(validator.is_type(instance, t) for t in wanted):
        yield ValidationError(f"expected {' or '.join(wanted)}, got {_describe(instance)}")


def _required(
    validator: Validator, required: list[str], instance: Any, _schema: object
) -> Iterator[ValidationError]:
    from jsonschema import ValidationError  # noqa: PLC0415 (only for a config not known clean)

    if validator.is_type(instance, "object"):
        for name in required:
            if name not in instance:
                yield ValidationError(f'missing required field "{name}"')


def _unknown_keys(
    validator: Validator, _mode: object, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    from jsonschema import ValidationError  # noqa: PLC0415 (only for a config not known clean)

    if validator.is_type(instance, "object"):
        known = schema.get("properties", {})
        for key in instance:
            if key not in known:
                # the message is the bare key: the wording depends on the spec and is applied later
                yield ValidationError(str(key), path=(key,))


def _validator_class(schema: Mapping[str, Any]) -> Validator:
    """A Draft 7 validator of `schema` with mcd's type, required and unknown-key rules."""
    from jsonschema import Draft7Validator, validators  # noqa: PLC0415 (as above)

    cls: Any = validators.extend(  # type: ignore[no-untyped-call]
        Draft7Validator,
        validators={"type": _type, "required": _required, _UNKNOWN_KEYS: _unknown_keys},
        type_checker=Draft7Validator.TYPE_CHECKER.redefine("integer", _is_integer),
    )
    validator: Validator = cls(schema)
    return validator


# --- findings ---------------------------------------------------------------------------------------


def _findings(spec: _Spec, validator: Validator, instance: Any, prefix: JsonPath) -> list[Finding]:
    return [finding for finding, _ in _checked(spec, validator, instance, prefix)]


def _checked(
    spec: _Spec, validator: Validator, instance: Any, prefix: JsonPath
) -> list[tuple[Finding, bool]]:
    """Findings, each with whether its message quotes the value (only type mismatches do)."""
    out: list[tuple[Finding, bool]] = []
    for error in validator.iter_errors(instance):
        path = prefix + tuple(error.path)
        if error.validator == _UNKNOWN_KEYS:
            out.append((Finding(path, spec.unknown.format(error.message), "warning"), False))
        else:
            out.append((Finding(path, error.message), error.validator == "type"))
    return out


def _validate_items(
    spec: _Spec, validator: Validator, items: list[Any], prefix: JsonPath, skip: Collection[int] = ()
) -> list[Finding]:
    groups: dict[object, list[int]] = {}
    for index, item in enumerate(items):
        if index not in skip:
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


def _shape(value: object) -> object:
    """A hashable key equal for two values iff they have the same keys and JSON types all the way down."""
    # isinstance, as the validator's own type checks: a dict or list subclass is still looked into
    if isinstance(value, dict):
        return (_OBJECT, *[(k, _shape(v)) for k, v in value.items()])
    if isinstance(value, list):
        return (_ARRAY, *[_shape(v) for v in value])
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
