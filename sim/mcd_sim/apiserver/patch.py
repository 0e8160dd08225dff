"""The three patch formats kube-apiserver accepts: JSON merge, JSON patch and strategic merge.

Strategic merge knows the merge keys of the lists kubectl and the daemon touch (conditions,
containers, volumes, owner references, finalizers …); any other list is replaced, which is
what the built-in types declare for e.g. `spec.taints`. No I/O.
"""

from __future__ import annotations

import copy
from typing import Any

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
PATCH_TYPES = (JSON_PATCH, MERGE, STRATEGIC)  # in the order kube-apiserver lists them

# list field name -> merge key, as the Go types declare with patchMergeKey/patchStrategy=merge
MERGE_KEYS = {
    "conditions": "type",
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "ports": "containerPort",
    "volumeMounts": "mountPath",
    "ownerReferences": "uid",
    "addresses": "type",
    "imagePullSecrets": "name",
}
# lists of scalars merged as sets (patchStrategy=merge on a primitive list)
MERGED_PRIMITIVE_LISTS = frozenset({"finalizers"})


class PatchError(ValueError):
    """The patch cannot be applied; the message says why."""


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"invalid JSON pointer {path!r}: must start with '/'")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _resolve(doc: Any, parts: list[str], path: str) -> Any:
    for part in parts:
        if isinstance(doc, dict):
            if part not in doc:
                raise PatchError(f"doc is missing path: {path!r}")
            doc = doc[part]
        elif isinstance(doc, list):
            doc = doc[_index(doc, part, path, allow_end=False)]
        else:
            raise PatchError(f"doc is missing path: {path!r}")
    return doc


def _index(lst: list[Any], part: str, path: str, *, allow_end: bool) -> int:
    if part == "-" and allow_end:
        return len(lst)
    if not part.isdigit():
        raise PatchError(f"invalid array index {part!r} in {path!r}")
    i = int(part)
    if i > len(lst) or (i == len(lst) and not allow_end):
        raise PatchError(f"array index {i} out of bounds in {path!r}")
    return i


def _add(doc: Any, path: str, value: Any) -> Any:
    parts = _pointer(path)
    if not parts:
        return copy.deepcopy(value)
    parent = _resolve(doc, parts[:-1], path)
    last = parts[-1]
    if isinstance(parent, dict):
        parent[last] = copy.deepcopy(value)
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, path, allow_end=True), copy.deepcopy(value))
    else:
        raise PatchError(f"doc is missing path: {path!r}")
    return doc


def _remove(doc: Any, path: str) -> tuple[Any, Any]:
    parts = _pointer(path)
    if not parts:
        raise PatchError("cannot remove the whole document")
    parent = _resolve(doc, parts[:-1], path)
    last = parts[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"unable to remove nonexistent key: {last}: missing value")
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_index(parent, last, path, allow_end=False))
    raise PatchError(f"doc is missing path: {path!r}")


def json_patch(target: Any, ops: Any) -> Any:
    """RFC 6902 (add, remove, replace, move, copy, test), applied to a copy of `target`."""
    if not isinstance(ops, list):
        raise PatchError("a JSON patch must be a list of operations")
    doc = copy.deepcopy(target)
    for n, op in enumerate(ops):
        if (
            not isinstance(op, dict)
            or not isinstance(op.get("op"), str)
            or not isinstance(op.get("path"), str)
        ):
            raise PatchError(f"operation {n}: needs string 'op' and 'path'")
        kind, path = op["op"], op["path"]
        if kind in ("add", "replace", "test") and "value" not in op:
            raise PatchError(f"operation {n} ({kind}): missing 'value'")
        if kind == "add":
            doc = _add(doc, path, op["value"])
        elif kind == "remove":
            doc, _ = _remove(doc, path)
        elif kind == "replace":
            _resolve(doc, _pointer(path), path)  # must exist
            doc, _ = _remove(doc, path) if _pointer(path) else (doc, None)
            doc = _add(doc, path, op["value"])
        elif kind in ("move", "copy"):
            source = op.get("from")
            if not isinstance(source, str):
                raise PatchError(f"operation {n} ({kind}): missing 'from'")
            if kind == "move":
                doc, value = _remove(doc, source)
            else:
                value = copy.deepcopy(_resolve(doc, _pointer(source), source))
            doc = _add(doc, path, value)
        elif kind == "test":
            if _resolve(doc, _pointer(path), path) != op["value"]:
                raise PatchError(f"testing value {path} failed: test failed")
        else:
            raise PatchError(f"operation {n}: unknown op {kind!r}")
    return doc


def _strip_directives(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: _strip_directives(v)
            for k, v in value.items()
            if not k.startswith("$") and not (k.startswith("$setElementOrder/"))
        }
    if isinstance(value, list):
        return [_strip_directives(v) for v in value]
    return value


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Strategic merge patch for the built-in types, with the `$patch`, `$retainKeys`,
    `$deleteFromPrimitiveList/` and `$setElementOrder/` directives kubectl sends."""
    if not isinstance(patch, dict):
        raise PatchError("a strategic merge patch must be a JSON object")
    result = _smp_map(target if isinstance(target, dict) else {}, patch)
    return {} if result is None else result


def _smp_map(original: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any] | None:
    directive = patch.get("$patch")
    if directive == "delete":
        return None
    if directive == "replace":
        return dict(_strip_directives(patch))
    result = copy.deepcopy(original)
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key in ("$patch", "$retainKeys"):
            continue  # order hints only matter for output order, which JSON clients ignore
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if isinstance(result.get(field), list) and isinstance(value, list):
                result[field] = [v for v in result[field] if v not in value]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            merged = _smp_map(result[key] if isinstance(result.get(key), dict) else {}, value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list) and key in MERGE_KEYS:
            current = result.get(key)
            result[key] = _smp_list(current if isinstance(current, list) else [], value, MERGE_KEYS[key])
        elif isinstance(value, list) and key in MERGED_PRIMITIVE_LISTS:
            current = result.get(key) if isinstance(result.get(key), list) else []
            assert isinstance(current, list)
            result[key] = current + [v for v in value if v not in current]
        else:
            result[key] = _strip_directives(value)
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _smp_list(original: list[Any], patch: list[Any], merge_key: str) -> list[Any]:
    if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
        return [_strip_directives(p) for p in patch if not (isinstance(p, dict) and "$patch" in p)]
    result = copy.deepcopy(original)
    for item in patch:
        if not isinstance(item, dict) or merge_key not in item:
            raise PatchError(f"map in a list merged by {merge_key!r} lacks that key: {item!r}")
        at = next(
            (i for i, o in enumerate(result) if isinstance(o, dict) and o.get(merge_key) == item[merge_key]),
            None,
        )
        if item.get("$patch") == "delete":
            if at is not None:
                del result[at]
            continue
        if at is None:
            result.append(_strip_directives(item))
        else:
            merged = _smp_map(result[at], item)
            if merged is None:
                del result[at]
            else:
                result[at] = merged
    return result


def apply_patch(content_type: str, target: dict[str, Any], patch: Any) -> dict[str, Any]:
    """Apply a patch of the given media type to `target` (never modified)."""
    if content_type == MERGE:
        result = merge_patch(target, patch)
    elif content_type == JSON_PATCH:
        result = json_patch(target, patch)
    elif content_type == STRATEGIC:
        result = strategic_merge_patch(target, patch)
    else:
        raise PatchError(f"unsupported patch type {content_type!r}")
    if not isinstance(result, dict):
        raise PatchError("the patched object is not a JSON object")
    return result
