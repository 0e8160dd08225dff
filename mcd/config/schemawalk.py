"""Whether a config has nothing to report against a schema file, without jsonschema. Pure.

`mcd.config.schema` validates with jsonschema, and every finding is jsonschema's; this module
only proves the common case, a config with no finding at all, so that a short command need not
import jsonschema (about 100 ms of a process's start) to learn that nothing is wrong. It reads the
same schema files and knows exactly the keywords they use, with jsonschema's Draft 7 meaning and
mcd's own type and unknown-key rules (`mcd.config.schema`): `type`, `properties`, `required`,
`items` (one schema), `$ref` (to `#/definitions/...`, which in Draft 7 hides the keywords beside
it) and `x-unknown-keys`; the annotations `$schema`, `$comment`, `title`, `description` and
`definitions` check nothing. A schema with any other keyword or type gets no walker (`Walker.of`
is None) and everything goes to jsonschema. So `clean` is True exactly when jsonschema reports
nothing; tests/unit/test_schema_walk.py compares the two on the case tables, the fixtures and
random mutations.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

TYPE_CHECKING = False  # not typing's: its import is a few ms of every short command
if TYPE_CHECKING:
    from typing import Any

_ANNOTATIONS = frozenset({"$schema", "$comment", "title", "description", "definitions"})
_KEYWORDS = frozenset({"type", "properties", "required", "items", "$ref"})
# Draft 7's type names as jsonschema's checker decides them (isinstance), "integer" as
# mcd.config.schema redefines it (an int literal, never a bool or a float: checked apart)
_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "boolean": (bool,),
    "null": (type(None),),
    "integer": (),
}


class _Unsupported(Exception):
    """The schema uses something the walker does not know: leave it all to jsonschema."""


class _Node:
    """One schema object, its $refs resolved: what a value at its place must satisfy.

    Speed: a rendered config has some 20,000 values; most are strings under a schema that only
    types them (a leaf: no properties, items or required keys), checked in their parent's loop
    without a call of their own."""

    __slots__ = ("any_type", "integer", "items", "kinds", "leaf", "properties", "required", "strict")

    def __init__(self) -> None:
        self.any_type = True  # no `type` keyword
        self.kinds: tuple[type, ...] = ()  # isinstance of one of these: the type is accepted
        self.integer = False  # an int literal is accepted too
        self.required: tuple[str, ...] = ()
        self.properties: dict[str, _Node] = {}
        self.items: _Node | None = None
        self.strict = False  # a key the properties do not name is reported (as a warning)
        self.leaf = True

    def finish(self) -> None:
        self.leaf = not (self.required or self.properties or self.items is not None or self.strict)

    def clean(self, value: object) -> bool:
        if not (self.any_type or isinstance(value, self.kinds) or (self.integer and type(value) is int)):
            return False
        if isinstance(value, dict):
            for name in self.required:
                if name not in value:
                    return False
            properties, strict = self.properties, self.strict
            for key, item in value.items():
                child = properties.get(key)
                if child is None:
                    if strict:
                        return False
                elif child.leaf:
                    if not (
                        child.any_type
                        or isinstance(item, child.kinds)
                        or (child.integer and type(item) is int)
                    ):
                        return False
                elif not child.clean(item):
                    return False
        elif isinstance(value, list) and self.items is not None:
            items = self.items
            for item in value:
                if not items.clean(item):
                    return False
        return True


class Walker:
    """A schema file compiled for `clean`: no finding for a value, or perhaps one."""

    def __init__(self, root: _Node) -> None:
        self._root = root

    @classmethod
    def of(cls, schema: Mapping[str, Any], unknown_keyword: str) -> Walker | None:
        """The walker of `schema`, whose keyword `unknown_keyword` reports unknown keys; None
        when the schema uses a keyword or a type this module does not know."""
        try:
            return cls(_Compiler(schema, unknown_keyword).node(schema))
        except _Unsupported:
            return None

    def clean(self, doc: object) -> bool:
        """True only if validating `doc` against the schema reports nothing (no error, no warning)."""
        return self._root.clean(doc)

    def clean_document(self, doc: object, known: Mapping[tuple[str, str], Collection[int]] | None) -> bool:
        """`clean`, not looking at the items of `doc[section][key]` whose indices `known` lists
        under (section, key) (known valid; `mcd.config.schema.validate_ignition_schema`)."""
        if not known or not isinstance(doc, dict):
            return self.clean(doc)
        stripped = dict(doc)
        for (section, key), skip in known.items():
            part = stripped.get(section)
            if not skip or not isinstance(part, dict) or not isinstance(part.get(key), list):
                continue
            part = stripped[section] = dict(part)
            # each item is checked on its own (`items` only): the others' verdict is unchanged
            part[key] = [item for index, item in enumerate(part[key]) if index not in skip]
        return self.clean(stripped)


class _Compiler:
    def __init__(self, schema: Mapping[str, Any], unknown_keyword: str) -> None:
        definitions = schema.get("definitions", {})
        if not isinstance(definitions, dict):
            raise _Unsupported("definitions")
        self._definitions: dict[str, Any] = definitions
        self._unknown = unknown_keyword
        self._refs: dict[str, _Node] = {}  # each definition compiled once (and a cycle closes)

    def node(self, schema: object) -> _Node:
        if not isinstance(schema, dict):
            raise _Unsupported("a schema that is not an object")
        if "$ref" in schema:  # Draft 7: the keywords beside a $ref are not applied
            return self._ref(schema["$ref"])
        node = _Node()
        for keyword in schema:
            if keyword == self._unknown:
                node.strict = True
            elif keyword not in _KEYWORDS and keyword not in _ANNOTATIONS:
                raise _Unsupported(keyword)
        if "type" in schema:
            node.any_type = False
            node.kinds, node.integer = self._types(schema["type"])
        required = schema.get("required", [])
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise _Unsupported("required")
        node.required = tuple(required)
        properties = schema.get("properties", {})
        if not isinstance(properties, dict):
            raise _Unsupported("properties")
        node.properties = {name: self.node(sub) for name, sub in properties.items()}
        if "items" in schema:
            node.items = self.node(schema["items"])
        node.finish()
        return node

    def _ref(self, ref: object) -> _Node:
        prefix = "#/definitions/"
        name = ref[len(prefix) :] if isinstance(ref, str) and ref.startswith(prefix) else None
        if name is None or name not in self._definitions:
            raise _Unsupported(f"$ref {ref!r}")
        found = self._refs.get(name)
        if found is None:
            found = self._refs[name] = _Node()
            compiled = self.node(self._definitions[name])
            for slot in _Node.__slots__:
                setattr(found, slot, getattr(compiled, slot))
        return found

    @staticmethod
    def _types(types: object) -> tuple[tuple[type, ...], bool]:
        names = [types] if isinstance(types, str) else types
        if not isinstance(names, list) or not names or any(n not in _TYPES for n in names):
            raise _Unsupported(f"type {types!r}")
        return tuple(k for n in names for k in _TYPES[n]), "integer" in names
