"""Decode YAML/JSON documents into MachineConfigs and policies. Pure: works on bytes, no I/O.

Accepted shapes: a MachineConfig object, a `List`/`MachineConfigList` (or an OpenShift
`Template`) holding MachineConfigs, several YAML documents, or a bare Ignition config.
"""

from __future__ import annotations

import json
import math
import posixpath
from collections.abc import Mapping
from typing import Any

import yaml

from mcd.config.findings import Finding, InputError, JsonPath
from mcd.config.machineconfig import (
    MC_API_GROUP,
    MachineConfig,
    machineconfig_from_ignition,
    machineconfig_from_object,
)

try:  # the C loader is ~10x faster on large rendered configs
    _YamlLoader: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyYAML built without libyaml
    _YamlLoader = yaml.SafeLoader

LIST_KINDS = ("List", "MachineConfigList")


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


def parse_documents(data: bytes, source: str) -> list[tuple[JsonPath, object]]:
    """Decode JSON or YAML (possibly several documents) into values with their root paths."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(source, [Finding((), f"not UTF-8 text: {exc.reason} at byte {exc.start}")]) from None
    stripped = text.lstrip()
    if not stripped:
        raise InputError(source, [Finding((), "empty document")])
    json_error: str | None = None
    if stripped[0] in "{[":
        try:
            return [((), json.loads(text, parse_constant=_reject_constant))]
        except ValueError as exc:
            # not JSON after all? YAML (a superset) gets a try; report the JSON error if both fail
            json_error = f"invalid JSON: {exc}"
    try:
        docs = [d for d in yaml.load_all(text, Loader=_YamlLoader) if d is not None]
    except yaml.YAMLError as exc:
        raise InputError(source, [Finding((), json_error or _yaml_message(exc))]) from None
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:  # odd scalars libyaml cannot build
        raise InputError(source, [Finding((), json_error or f"invalid YAML: {exc}")]) from None
    if not docs:
        raise InputError(source, [Finding((), "empty document")])
    out: list[tuple[JsonPath, object]] = []
    for i, doc in enumerate(docs):
        root: JsonPath = (f"<document {i}>",) if len(docs) > 1 else ()
        problems = list(_json_incompatible(doc, root))
        if problems:
            raise InputError(source, problems)
        out.append((root, doc))
    return out


def _yaml_message(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    if mark is not None:
        return f"invalid YAML: {problem} at line {mark.line + 1}, column {mark.column + 1}"
    return f"invalid YAML: {problem}"


def _json_incompatible(value: object, path: JsonPath) -> list[Finding]:
    """YAML can express values JSON cannot (dates, binary, non-string keys): refuse them, located."""
    stack: list[tuple[object, JsonPath]] = [(value, path)]
    out: list[Finding] = []
    while stack:
        v, p = stack.pop()
        if isinstance(v, dict):
            for k, item in v.items():
                if not isinstance(k, str):
                    out.append(Finding(p, f"object key {k!r} is not a string"))
                else:
                    stack.append((item, (*p, k)))
        elif isinstance(v, list):
            stack.extend((item, (*p, i)) for i, item in enumerate(v))
        elif v is not None and not isinstance(v, str | int | float | bool):
            out.append(Finding(p, f"unsupported YAML value of type {type(v).__name__}"))
        elif isinstance(v, float) and math.isnan(v):
            out.append(Finding(p, "NaN is not a valid value"))
    return out


def _items(obj: object, root: JsonPath, source: str) -> list[tuple[JsonPath, Mapping[str, Any]]]:
    """Flatten lists and templates into the objects they hold."""
    if not isinstance(obj, Mapping):
        raise InputError(source, [Finding(root, f"expected an object, got {type(obj).__name__}")])
    kind = obj.get("kind")
    if kind in LIST_KINDS or (kind == "Template" and "objects" in obj):
        key = "items" if kind in LIST_KINDS else "objects"
        items = obj.get(key) or []
        if not isinstance(items, list):
            raise InputError(source, [Finding((*root, key), "expected a list")])
        out: list[tuple[JsonPath, Mapping[str, Any]]] = []
        for i, item in enumerate(items):
            out.extend(_items(item, (*root, key, i), source))
        return out
    return [(root, obj)]


def load_machineconfigs(data: bytes, source: str) -> list[MachineConfig]:
    """Every MachineConfig in a document; raises InputError when there is none or one is malformed."""
    configs: list[MachineConfig] = []
    for root, doc in parse_documents(data, source):
        for path, obj in _items(doc, root, source):
            kind = obj.get("kind")
            if kind is None and "ignition" in obj:
                name = posixpath.basename(source) if source != "-" else "stdin"
                configs.append(machineconfig_from_ignition(obj, name, path))
            elif kind == "MachineConfig":
                api = obj.get("apiVersion", f"{MC_API_GROUP}/v1")
                if not isinstance(api, str) or not api.startswith(MC_API_GROUP + "/"):
                    raise InputError(
                        source, [Finding((*path, "apiVersion"), f"unexpected apiVersion {api!r}")]
                    )
                configs.append(machineconfig_from_object(obj, source, path))
            else:
                what = f"kind {kind!r}" if kind is not None else "an object without kind or ignition.version"
                raise InputError(
                    source, [Finding(path, f"expected a MachineConfig or an Ignition config, got {what}")]
                )
    if not configs:
        raise InputError(source, [Finding((), "no MachineConfig found")])
    return configs


def load_machineconfig(data: bytes, source: str) -> MachineConfig:
    """Exactly one MachineConfig (rendered configs are single objects)."""
    configs = load_machineconfigs(data, source)
    if len(configs) != 1:
        raise InputError(source, [Finding((), f"expected one MachineConfig, found {len(configs)}")])
    return configs[0]


def load_objects(data: bytes, source: str) -> list[tuple[JsonPath, Mapping[str, Any]]]:
    """All objects of a document (lists and templates flattened), for other kinds of input."""
    out: list[tuple[JsonPath, Mapping[str, Any]]] = []
    for root, doc in parse_documents(data, source):
        out.extend(_items(doc, root, source))
    return out
