"""Ignition config parser: `parse_ignition` and the model it returns (re-exported). Pure: no I/O.

`parse_ignition` turns a decoded JSON value into frozen values in three layers, each with
located findings: the JSON Schema of the declared spec version (structure and types), the
translation of spec 2.2 to 3.x, then the semantic rules Ignition and the MCO apply
(`mcd.config.ignition_checks`). The model types live in `mcd.config.ignition_model`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from mcd.config.findings import Finding, JsonPath
from mcd.config.ignition_checks import Checker
from mcd.config.ignition_model import (
    DEFAULT_FILE_MODE,
    DEFAULT_PARSE,
    EMPTY_IGNITION,
    KEEP_DATA_UP_TO,
    MAX_FILE_MODE,
    SPEC2_VERSIONS,
    SPEC3_VERSIONS,
    Dropin,
    File,
    IgnitionConfig,
    IgnitionResult,
    NodeRef,
    ParseOptions,
    Resource,
    Unit,
    User,
    format_mode,
)
from mcd.config.reuse import reuse
from mcd.config.schema import is_unknown_key, validate_ignition_schema
from mcd.config.translate import translate_2_2

TYPE_CHECKING = False  # not typing's: its import is a few ms of every short command
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "DEFAULT_FILE_MODE",
    "DEFAULT_PARSE",
    "EMPTY_IGNITION",
    "KEEP_DATA_UP_TO",
    "MAX_FILE_MODE",
    "SPEC2_VERSIONS",
    "SPEC3_VERSIONS",
    "Dropin",
    "File",
    "IgnitionConfig",
    "IgnitionResult",
    "NodeRef",
    "ParseOptions",
    "Resource",
    "Unit",
    "User",
    "format_mode",
    "parse_ignition",
    "spec3_document",
]


def parse_ignition(
    doc: object, options: ParseOptions = DEFAULT_PARSE, earlier: tuple[object, IgnitionResult] | None = None
) -> IgnitionResult:
    """Parse and validate one Ignition config (spec 2.2 or 3.0-3.5) given as decoded JSON.

    `earlier`: a document parsed before and its result, whose files and units `doc` declares
    alike are taken over (`mcd.config.reuse`): the same outcome, sooner.
    """
    if not isinstance(doc, Mapping):
        return IgnitionResult(None, (Finding((), f"expected an object, got {_type_name(doc)}"),), "parse")
    version = _version_of(doc)
    if version is None:
        return IgnitionResult(
            None, (Finding(("ignition", "version"), "missing Ignition config version"),), "parse"
        )
    if version not in SPEC3_VERSIONS + SPEC2_VERSIONS:
        supported = ", ".join(SPEC2_VERSIONS + SPEC3_VERSIONS)
        msg = f'unsupported Ignition config version "{version}" (supported: {supported})'
        return IgnitionResult(None, (Finding(("ignition", "version"), msg),), "parse")
    reused = reuse(earlier[0], earlier[1], doc, version, options) if earlier is not None else None
    findings = list(validate_ignition_schema(doc, version, reused.known() if reused is not None else None))
    if any(f.severity == "error" for f in findings):
        return IgnitionResult(None, tuple(findings), "parse")
    body, tfindings = _spec3_body(doc, version, findings)
    findings += tfindings
    if any(f.severity == "error" for f in tfindings):
        return IgnitionResult(None, tuple(findings), "parse")
    checker = Checker(options, reused)
    config = checker.build(body, version)
    if version in SPEC2_VERSIONS:
        checker.findings = [_spec2_located(f) for f in checker.findings]
    findings += checker.findings
    if any(f.severity == "error" for f in checker.findings):
        return IgnitionResult(None, tuple(findings), "validate", partial=config)
    return IgnitionResult(config, tuple(findings), "ok", options=options)


def _spec3_body(
    doc: Mapping[str, Any], version: str, findings: Sequence[Finding]
) -> tuple[Mapping[str, Any], list[Finding]]:
    """The document Ignition reads, given its schema findings, with the translation's findings."""
    # a key the spec version does not know is ignored, as Ignition ignores it (spec 3.2 with
    # kernelArguments: a warning, and no kargs change either)
    body: Mapping[str, Any] = _without(doc, [f.path for f in findings if is_unknown_key(f)])
    if version in SPEC2_VERSIONS:
        return translate_2_2(body)
    return body, []


def spec3_document(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    """The spec 3 document Ignition reads from `doc`, a config `parse_ignition` accepts: the keys
    its spec version does not know dropped, spec 2.2 translated (what a merge starts from)."""
    version = _version_of(doc) or ""
    body, _ = _spec3_body(doc, version, validate_ignition_schema(doc, version))
    return body


_SPEC3_MERGE: JsonPath = ("ignition", "config", "merge")


def _spec2_located(finding: Finding) -> Finding:
    """A finding on the translated config, at its place in the spec 2.2 document: the one key
    the translation renames is ``ignition.config.append`` (spec 3's ``merge``)."""
    if finding.path[:3] == _SPEC3_MERGE:
        return Finding(("ignition", "config", "append", *finding.path[3:]), finding.message, finding.severity)
    return finding


def _without(doc: Mapping[str, Any], paths: Sequence[JsonPath]) -> Mapping[str, Any]:
    """`doc` without the keys at `paths`; containers on the way are copied, `doc` is untouched."""
    if not paths:
        return doc
    root: Any = dict(doc)
    copied: set[JsonPath] = {()}
    for path in paths:
        node = root
        for depth, part in enumerate(path[:-1]):
            child = node[part]
            prefix = path[: depth + 1]
            if prefix not in copied:
                child = dict(child) if isinstance(child, Mapping) else list(child)
                node[part] = child
                copied.add(prefix)
            node = child
        node.pop(path[-1], None)
    result: Mapping[str, Any] = root
    return result


def _version_of(doc: Mapping[str, Any]) -> str | None:
    ign = doc.get("ignition")
    if isinstance(ign, Mapping):
        version = ign.get("version")
        if isinstance(version, str) and version:
            return version
    return None


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    return {
        dict: "object",
        list: "array",
        str: "string",
        bool: "boolean",
        int: "integer",
        float: "number",
    }.get(type(value), type(value).__name__)
