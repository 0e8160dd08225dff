"""Decode YAML/JSON documents into MachineConfigs and policies. Pure: works on bytes, no I/O.

Accepted shapes: a MachineConfig object, a `List`/`MachineConfigList` (or an OpenShift
`Template`) holding MachineConfigs, several YAML documents, or a bare Ignition config.
"""

from __future__ import annotations

import json
import math
import posixpath
import re
from collections.abc import Callable, Iterable, Mapping
from itertools import compress

from mcd.config.findings import Finding, InputError, JsonPath
from mcd.config.ignition import DEFAULT_PARSE, ParseOptions
from mcd.config.machineconfig import (
    MC_API_GROUP,
    MachineConfig,
    machineconfig_from_ignition,
    machineconfig_from_object,
)
from mcd.config.record import replace

TYPE_CHECKING = False  # not typing's: its import is a few ms of every short command
if TYPE_CHECKING:
    from typing import Any

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
    if stripped[0] == "{":
        # as kubectl: a document that starts like JSON is JSON, strictly (no YAML fallback that
        # would accept a trailing comma or a comment); several concatenated objects are a stream
        return _json_documents(text, source)
    docs = _yaml_documents(text, source)
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


def _yaml_documents(text: str, source: str) -> list[object]:
    """The non-empty documents of a YAML stream; InputError for what cannot be one."""
    # PyYAML here, not at the top: a JSON document never needs it, and its import is about
    # 15 ms of a short command's start (mcd.config.yamllib: 8 ms less)
    from mcd.config.yamllib import yaml  # noqa: PLC0415

    # the C loader is ~10x faster on large rendered configs (absent: PyYAML built without libyaml)
    loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        # libyaml's composer recurses in C: scan the event stream first (iterative) so that deep
        # nesting, self-referencing aliases and alias bombs are refused before anything is built
        problem = _yaml_structure_problem(yaml.parse(text, Loader=loader))
        if problem is not None:
            raise InputError(source, [Finding((), problem)])
        return [d for d in yaml.load_all(text, Loader=loader) if d is not None]
    except yaml.YAMLError as exc:
        raise InputError(source, [Finding((), _yaml_message(exc))]) from None
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:  # odd scalars libyaml cannot build
        raise InputError(source, [Finding((), f"invalid YAML: {exc}")]) from None


MAX_DEPTH = 100
UTF8_BOM = b"\xef\xbb\xbf"
_JSON = json.JSONDecoder(parse_constant=_reject_constant)
_BLANK = re.compile(r"[ \t\r\n]*")  # JSON's white space


def _skip_blank(text: str, pos: int) -> int:
    match = _BLANK.match(text, pos)
    return match.end() if match else pos


def _json_documents(text: str, source: str) -> list[tuple[JsonPath, object]]:
    """Strict JSON: one object, or a stream of objects separated by white space (kubectl reads both)."""
    values: list[object] = []
    pos = _skip_blank(text, 0)
    while pos < len(text):
        try:
            value, pos = _JSON.raw_decode(text, pos)
        except RecursionError:
            raise InputError(source, [Finding((), f"nested deeper than {MAX_DEPTH} levels")]) from None
        except ValueError as exc:
            raise InputError(source, [Finding((), f"invalid JSON: {exc}")]) from None
        if _too_deep(value):
            raise InputError(source, [Finding((), f"nested deeper than {MAX_DEPTH} levels")])
        values.append(value)
        pos = _skip_blank(text, pos)
    if len(values) == 1:
        return [((), values[0])]
    return [((f"<document {i}>",), v) for i, v in enumerate(values)]


# nodes a document may expand to through aliases (a rendered config has far fewer)
MAX_EXPANDED_NODES = 2_000_000


_CONTAINERS = frozenset((dict, list))  # what the JSON decoder builds containers as, exactly


def _too_deep(value: object) -> bool:
    """Whether containers nest deeper than MAX_DEPTH: one level at a time, scalars never queued
    (a rendered config is mostly strings, and this runs on every JSON document). The values of
    a level are sorted out in C (`compress` over `map`s of `type`): no Python step per value."""
    level: list[object] = [value] if type(value) in _CONTAINERS else []
    depth = 1
    is_container = _CONTAINERS.__contains__
    while level:
        if depth > MAX_DEPTH:
            return True
        deeper: list[object] = []
        for v in level:
            items: Iterable[object] = v.values() if isinstance(v, dict) else v  # type: ignore[assignment]
            deeper.extend(compress(items, map(is_container, map(type, items))))
        level = deeper
        depth += 1
    return False


def _yaml_structure_problem(events: Iterable[Any]) -> str | None:
    """Depth and alias expansion of a YAML stream, from its events (no recursion, nothing built)."""
    from mcd.config.yamllib import yaml  # noqa: PLC0415 (as _yaml_documents)

    sizes: dict[str, int] = {}
    open_anchors: list[tuple[str | None, int]] = []  # (anchor, node count when it opened)
    count = 0
    depth = 0
    for event in events:
        if isinstance(event, yaml.AliasEvent):
            anchor = event.anchor
            if anchor not in sizes:
                if any(a == anchor for a, _ in open_anchors):
                    return f"invalid YAML: alias *{anchor} refers to a node that contains it"
                return f"invalid YAML: unknown alias *{anchor}"
            count += sizes[anchor]
        elif isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            count += 1
            if depth > MAX_DEPTH:
                return f"nested deeper than {MAX_DEPTH} levels"
            open_anchors.append((event.anchor, count))
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
            anchor, start = open_anchors.pop()
            if anchor is not None:
                sizes[anchor] = count - start + 1
        elif isinstance(event, yaml.ScalarEvent):
            count += 1
            if event.anchor is not None:
                sizes[event.anchor] = 1
        if count > MAX_EXPANDED_NODES:
            return f"document expands to more than {MAX_EXPANDED_NODES} nodes (alias expansion)"
    return None


def _yaml_message(exc: Exception) -> str:
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


# a config parsed before to take items over from, by the name of the object being parsed
Like = Callable[[object], "MachineConfig | None"]


def load_machineconfigs(
    data: bytes, source: str, *, options: ParseOptions = DEFAULT_PARSE, like: Like | None = None
) -> list[MachineConfig]:
    """Every MachineConfig in a document; raises InputError when there is none or one is malformed.
    `like`: the config parsed before (`machineconfig_from_object`) for an object's name, if any."""
    configs = [
        machineconfig_at(path, obj, source, options=options, like=like)
        for root, doc in parse_documents(data, source)
        for path, obj in _items(doc, root, source)
    ]
    if not configs:
        raise InputError(source, [Finding((), "no MachineConfig found")])
    return configs


def machineconfig_at(
    path: JsonPath,
    obj: Mapping[str, Any],
    source: str,
    *,
    options: ParseOptions = DEFAULT_PARSE,
    like: Like | None = None,
) -> MachineConfig:
    """The MachineConfig (or bare Ignition config) at `path`; InputError for any other object."""
    kind = obj.get("kind")
    if kind is None and "ignition" in obj:
        name = posixpath.basename(source) if source != "-" else "stdin"
        return machineconfig_from_ignition(obj, name, path, options=options)
    if kind == "MachineConfig":
        api = obj.get("apiVersion", f"{MC_API_GROUP}/v1")
        if not isinstance(api, str) or not api.startswith(MC_API_GROUP + "/"):
            raise InputError(source, [Finding((*path, "apiVersion"), f"unexpected apiVersion {api!r}")])
        earlier = None
        if like is not None:
            meta = obj.get("metadata")
            earlier = like(meta.get("name") if isinstance(meta, Mapping) else None)
        return machineconfig_from_object(obj, source, path, options=options, like=earlier)
    what = f"kind {kind!r}" if kind is not None else "an object without kind or ignition.version"
    raise InputError(source, [Finding(path, f"expected a MachineConfig or an Ignition config, got {what}")])


def load_machineconfig(
    data: bytes, source: str, *, options: ParseOptions = DEFAULT_PARSE, like: Like | None = None
) -> MachineConfig:
    """Exactly one MachineConfig (rendered configs are single objects)."""
    configs = load_machineconfigs(data, source, options=options, like=like)
    if len(configs) != 1:
        raise InputError(source, [Finding((), f"expected one MachineConfig, found {len(configs)}")])
    mc = configs[0]
    text = data.removeprefix(UTF8_BOM)
    # JSON (parse_documents reads a document starting with "{" as JSON) whose root object is the
    # MachineConfig: its Ignition config sits at the root's spec (not in a list's items, not in
    # a stream's documents). A bare Ignition config is recorded wrapped: no text of it is kept.
    if (
        text.lstrip()[:1] == b"{"
        and mc.raw.get("kind") == "MachineConfig"
        and mc.ignition_path == MachineConfig.ignition_path
    ):
        return replace(mc, raw_text=(mc.raw, text))
    return mc


def load_objects(data: bytes, source: str) -> list[tuple[JsonPath, Mapping[str, Any]]]:
    """All objects of a document (lists and templates flattened), for other kinds of input."""
    out: list[tuple[JsonPath, Mapping[str, Any]]] = []
    for root, doc in parse_documents(data, source):
        out.extend(_items(doc, root, source))
    return out
