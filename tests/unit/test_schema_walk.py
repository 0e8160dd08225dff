"""The schema walker (`mcd.config.schemawalk`): True exactly when jsonschema reports nothing.

The comparisons on the planner's case tables, the fixtures, the error corpus and random
mutations are in tests/unit/test_parser.py and tests/unit/test_schema.py (beside their data);
here, the walker's own rules: the keywords it knows, $ref, unknown keys, the items it skips."""

from __future__ import annotations

from typing import Any

import pytest

from mcd.config import schema
from mcd.config.schema import SUPPORTED_VERSIONS, validate_ignition_schema
from mcd.config.schemawalk import Walker

UNKNOWN = "x-unknown-keys"


def jsonschema_findings(doc: object, version: str) -> list[Any]:
    """What jsonschema alone reports for `doc`: the whole document through the compiled schema."""
    spec = schema._compile(version)
    return schema._sorted(schema._findings(spec, spec.root, doc, ()))


def assert_walker_agrees(doc: object) -> None:
    """For every spec version: the walker finds `doc` clean exactly when jsonschema reports nothing,
    and validate_ignition_schema (which asks the walker first) gives jsonschema's findings."""
    for version in SUPPORTED_VERSIONS:
        walker = schema._walker(version)
        assert walker is not None
        found = jsonschema_findings(doc, version)
        assert walker.clean(doc) == (found == []), (version, found)
        assert validate_ignition_schema(doc, version) == found


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_every_shipped_schema_has_a_walker(version: str) -> None:
    """Else every config would pay for jsonschema's import again, silently."""
    assert schema._walker(version) is not None


def test_a_clean_config_is_clean_and_each_kind_of_finding_is_not() -> None:
    base = {"ignition": {"version": "3.4.0"}, "storage": {"files": [{"path": "/a", "mode": 420}]}}
    assert_walker_agrees(base)
    for bad in (
        {"storage": {}},  # missing ignition
        {**base, "colour": 1},  # unknown key (a warning)
        {**base, "storage": {"files": [{"path": "/a", "mode": 420.0}]}},  # float for an integer
        {**base, "storage": {"files": [{"path": "/a", "mode": True}]}},  # bool for an integer
        {**base, "storage": {"files": [{"mode": 420}]}},  # missing path
        {**base, "storage": {"files": [None]}},  # null item
        {**base, "storage": {"files": {"path": "/a"}}},  # object for an array
        [base],
        None,
    ):
        assert_walker_agrees(bad)
        assert not schema._walker("3.4.0").clean(bad)  # type: ignore[union-attr]


def test_a_schema_with_a_keyword_it_does_not_know_gets_no_walker() -> None:
    for extra in ({"minLength": 1}, {"enum": ["a"]}, {"additionalProperties": False}, {"anyOf": []}):
        assert (
            Walker.of({"type": "object", "properties": {"a": {"type": "string", **extra}}}, UNKNOWN) is None
        )
    assert Walker.of({"type": "number"}, UNKNOWN) is None
    assert Walker.of({"items": [{"type": "string"}]}, UNKNOWN) is None
    assert Walker.of({"$ref": "#/definitions/missing", "definitions": {}}, UNKNOWN) is None
    assert Walker.of({"$ref": "other.json#/a"}, UNKNOWN) is None


def test_a_ref_hides_the_keywords_beside_it_as_in_draft_7() -> None:
    walker = Walker.of(
        {"$ref": "#/definitions/s", "type": "integer", "definitions": {"s": {"type": "string"}}}, UNKNOWN
    )
    assert walker is not None
    assert walker.clean("text") and not walker.clean(1)


def test_a_recursive_definition_is_walked() -> None:
    tree = {
        "$ref": "#/definitions/node",
        "definitions": {
            "node": {
                "type": "object",
                "properties": {"kids": {"type": "array", "items": {"$ref": "#/definitions/node"}}},
                UNKNOWN: "warn",
            }
        },
    }
    walker = Walker.of(tree, UNKNOWN)
    assert walker is not None
    assert walker.clean({"kids": [{"kids": []}, {}]})
    assert not walker.clean({"kids": [{"kids": [{"x": 1}]}]})


def test_known_items_are_not_looked_at_and_the_others_are() -> None:
    walker = schema._walker("3.4.0")
    assert walker is not None
    doc = {
        "ignition": {"version": "3.4.0"},
        "storage": {"files": [{"path": "/a"}, {"mode": 1}, {"path": "/c"}]},
    }
    assert not walker.clean_document(doc, None)
    assert walker.clean_document(doc, {("storage", "files"): {1}})
    assert not walker.clean_document(doc, {("storage", "files"): {0, 2}})
    assert doc["storage"]["files"][1] == {"mode": 1}  # the document is left untouched
