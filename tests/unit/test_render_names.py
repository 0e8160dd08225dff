"""The rendered name and the YAML it hashes, byte for byte as an OpenShift cluster makes them.

The expected values in tests/fixtures/render/ were produced by upstream's own code run on these
inputs (the machine-config-operator's vendored Ignition 3.5 merge, clarketm/json, ghodss/yaml
and gopkg.in/yaml.v2 2.4.0, with MergeMachineConfigs' and the render controller's steps): the
name a cluster gives the same MachineConfigs. Pure: no I/O besides reading the tables."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcd.render import RenderError, blockyaml, goyaml, render_pool, rendered_name
from mcd.render.goyaml import go_yaml

TABLES = Path(__file__).resolve().parents[1] / "fixtures" / "render"
# named cases, then random pools (files, directories, links, units, users, kernel arguments,
# spec 2.2 to 3.5, compression, hashes, headers, roles, OS images)
NAMES: list[dict[str, Any]] = [
    case
    for table in ("upstream-names.json", "upstream-names-random.json")
    for case in json.loads((TABLES / table).read_text())
]
# named cases, then random text (indicators, quotes, breaks, tabs, controls, non-ASCII, numbers)
YAML = [
    json.loads(line)
    for table in ("upstream-yaml.jsonl", "upstream-yaml-random.jsonl")
    for line in (TABLES / table).read_text().split("\n")
    if line
]


@pytest.mark.parametrize("case", NAMES, ids=[c["case"] for c in NAMES])
def test_the_rendered_config_and_its_name_are_upstream_s(case: dict[str, Any]) -> None:
    rendered = render_pool(case["pool"], case["configs"], os_image_url=case["osImageURL"])
    assert rendered["spec"] == case["spec"]
    assert rendered["metadata"]["name"] == case["name"]


@pytest.mark.parametrize("case", YAML, ids=[c["case"] for c in YAML])
def test_the_hashed_text_is_the_go_yaml_library_s(case: dict[str, Any]) -> None:
    assert go_yaml(case["value"]) == case["yaml"]


def test_the_name_is_the_md5_of_the_salt_and_the_spec_yaml() -> None:
    spec = {"config": {"ignition": {"version": "3.5.0"}}, "fips": True}
    salt = bytes.fromhex(
        "107ccee48b38afaf4fe586769d9ad36e195d2ffdac6a2507ae0da0b96e115734db830cceda8d7487"
        "bcb5c097e93e7ea54053b3770fa8d0c5926b3ae385bcee1a211aebca20ad1fea2990944f06ce1716"
    )
    text = "config:\n  ignition:\n    version: 3.5.0\nfips: true\n"
    assert go_yaml(spec) == text
    assert rendered_name("infra", spec) == "rendered-infra-" + hashlib.md5(salt + text.encode()).hexdigest()


def test_the_input_order_does_not_change_the_name() -> None:
    configs = NAMES[2]["configs"]
    forward = render_pool("worker", configs)["metadata"]["name"]
    assert render_pool("worker", list(reversed(configs)))["metadata"]["name"] == forward


@pytest.mark.parametrize("character", ["\x7f", "\x85", "\x9f", "\uffff"])
def test_text_upstream_cannot_hash_is_refused_where_it_is(character: str) -> None:
    unit = {"name": "a.service", "contents": f"[Unit]\nDescription=x{character}\n"}
    config = {
        "kind": "MachineConfig",
        "metadata": {"name": "10-unit", "labels": {"machineconfiguration.openshift.io/role": "worker"}},
        "spec": {"config": {"ignition": {"version": "3.5.0"}, "systemd": {"units": [unit]}}},
    }
    with pytest.raises(RenderError) as caught:
        render_pool("worker", [config])
    assert (caught.value.index, caught.value.name) == (0, "10-unit")
    assert caught.value.path == ("spec", "config", "systemd", "units", 0, "contents")
    assert f"U+{ord(character):04X}" in caught.value.message


@given(st.text(alphabet=st.characters(max_codepoint=0x7F)))
def test_the_narrow_ascii_classes_match_as_the_full_ones_on_ascii_text(text: str) -> None:
    """goyaml compiles its two wide character classes only for text that is not ASCII."""
    for narrow, full in (
        (goyaml._NOT_PRINTABLE_ASCII, goyaml._NOT_PRINTABLE),
        (goyaml._QUOTED_SPECIAL_ASCII, goyaml._QUOTED_SPECIAL),
    ):
        assert goyaml._class_for(text, narrow, full) is narrow
        assert narrow.findall(text) == re.findall(full, text)


def test_text_that_is_not_ascii_gets_the_full_class() -> None:
    pattern = goyaml._class_for("é\u2028", goyaml._QUOTED_SPECIAL_ASCII, goyaml._QUOTED_SPECIAL)
    assert pattern.pattern == goyaml._QUOTED_SPECIAL
    assert pattern.findall("é\u2028\x01 a") == ["\u2028", "\x01", " "]


# -- the direct writer (blockyaml) against the emitter's way, and against upstream's tables

# pieces: indicators, quotes, breaks, a tab, non-ASCII, words read as other types, long words
_PIECES = st.sampled_from([*"ab1.0-:#?'\"\\|{}[],&*!%@` \n\t", "é", "yes", "1e3", "x" * 30])
_TEXT = st.lists(_PIECES, max_size=12).map("".join)
_KEYS = st.one_of(st.sampled_from(["a", "b", "B", "a10", "a2", "on", "", "1", "k" * 130, "x-y"]), _TEXT)
_SCALARS = st.one_of(st.booleans(), st.none(), st.integers(-(2**63), 2**63), _TEXT)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_KEYS, inner, max_size=4)),
    max_leaves=25,
)


@settings(max_examples=150)
@given(st.dictionaries(_KEYS, _VALUES, max_size=5))
def test_the_direct_writer_writes_what_the_emitter_writes_or_leaves_it_to_it(value: dict[str, Any]) -> None:
    text = blockyaml.go_block_text(value)
    if text is not None:
        assert text == goyaml.emitted(value)


@pytest.mark.parametrize("case", YAML, ids=[c["case"] for c in YAML])
def test_the_direct_writer_agrees_with_upstream_where_it_writes(case: dict[str, Any]) -> None:
    text = blockyaml.go_block_text(case["value"])
    assert text is None or text == case["yaml"]


UNIT = "[Unit]\nDescription=A b\n\n[Service]\n"


def test_a_rendered_config_of_the_common_shapes_is_written_directly() -> None:
    """Files with data URLs, modes and flags, units with multi-line contents and dropins,
    a long description with spaces, a key yaml.v2 reads as a boolean: no fallback."""
    spec: dict[str, Any] = {
        "config": {
            "ignition": {"version": "3.5.0"},
            "storage": {
                "files": [
                    {"path": "/etc/a", "mode": 420, "overwrite": True, "contents": {"source": "data:,a%20b"}},
                    {"path": "/etc/b", "mode": 384, "contents": {"source": "data:;base64,eA=="}},
                ]
            },
            "systemd": {
                "units": [
                    {"name": "a.service", "enabled": True, "contents": UNIT},
                    {"name": "b.service", "dropins": [{"name": "10-x.conf", "contents": "[Service]\nX=1"}]},
                ]
            },
        },
        "kernelArguments": [],
        "extensions": None,
        "fips": False,
        "osImageURL": "quay.io/x@sha256:00",
        "on": "a few words with spaces",
    }
    text = blockyaml.go_block_text(spec)
    assert text is not None
    assert text == goyaml.emitted(spec)
    block = "    - contents: |\n        [Unit]\n        Description=A b\n\n        [Service]\n"
    assert block in text
    assert '"on": a few words with spaces\n' in text
