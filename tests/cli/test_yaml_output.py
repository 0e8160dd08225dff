"""`-o yaml` (mcd.render.yamlout) writes exactly what yaml.safe_dump writes: on random documents
whose text mixes words of printable ASCII (the short way) with everything else (PyYAML's way),
and on the documents the commands print."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from mcd.render.blockyaml import dump_block_text
from mcd.render.yamlout import yaml_text

REPO = Path(__file__).resolve().parents[2]
# characters that change PyYAML's choices: indicators, quotes, spaces, breaks, controls, unicode
TRICKY = "-?:#,[]{}&*!|>'\"%@`.~ \n\t\r\x85\u2028\ufeff\x01é0123456789abcxyzTFN"
words = st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=12)
texts = st.one_of(
    words,
    st.text(alphabet=TRICKY, max_size=12),
    st.sampled_from(["-", "?", ":", "---", "...", "a:", "-a", "?a", ":a", "#a", "a#b", "yes", "null", "1.5"]),
    st.builds(lambda w, n: (w + " ") * n, words, st.integers(1, 30)),  # long enough to fold
    st.builds(lambda w, n: w * n, words, st.integers(1, 20)),  # one long word
)
scalars = st.one_of(texts, st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False))
documents = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=20,
)


def assert_same(doc: Any) -> None:
    assert yaml_text(doc) == yaml.safe_dump(doc, sort_keys=False, default_flow_style=False)


@settings(max_examples=400, deadline=None)
@given(documents)
def test_random_documents_are_written_as_safe_dump_writes_them(doc: Any) -> None:
    assert_same(doc)


def test_the_examples_and_fixtures_are_written_as_safe_dump_writes_them() -> None:
    paths = [*(REPO / "examples").rglob("*.yaml"), *(REPO / "tests" / "fixtures").glob("*.yaml")]
    assert paths
    for path in paths:
        for doc in yaml.safe_load_all(path.read_text()):
            assert_same(doc)
            assert_same(json.loads(json.dumps(doc, default=str)))


def test_a_long_value_folds_where_safe_dump_folds_it_after_a_word_key() -> None:
    """The column after a word counts: a long text folds at the 80th column."""
    for width in range(1, 70, 3):
        assert_same({"k" * width: "ab " * 40, "list": ["x" * width, {"y" * width: "cd ef " * 20}]})


# -- the direct writer (mcd.render.blockyaml) takes configs of the common shapes; it must write
# what safe_dump writes or leave the text to it
lines = st.lists(
    st.sampled_from(["[Unit]", "A=b c", "it's", "", " ", "x" * 40, "y z " * 12, ":", "- a", "#"]), max_size=8
).map("\n".join)


items = st.lists(st.one_of(lines, words, st.integers()), max_size=3)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(words, items, max_size=4), lines)
def test_text_with_line_breaks_is_single_quoted_as_safe_dump_does(doc: dict[str, Any], text: str) -> None:
    doc["contents"] = [{"name": text, "contents": text + "\n"}]
    direct = dump_block_text(doc)
    assert direct is None or direct == yaml.safe_dump(doc, sort_keys=False, default_flow_style=False)


def test_a_config_of_the_common_shapes_is_written_directly() -> None:
    """Files with data URLs, units whose text has empty lines, a quote and a line long enough
    to fold, words the resolver reads as numbers or booleans: no fallback, safe_dump's text."""
    description = " ".join(["a long description"] * 6)
    unit = f"[Unit]\nDescription={description}\n\n[Service]\nExecStart=/bin/sh -c 'x'\n"
    doc = {
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "spec": {
            "config": {
                "ignition": {"version": "3.5.0"},
                "storage": {"files": [{"path": "/etc/a", "mode": 420, "contents": {"source": "data:,a"}}]},
                "systemd": {"units": [{"name": "a.service", "enabled": True, "contents": unit}]},
            },
            "kernelArguments": [],
            "fips": False,
            "extensions": None,
            "labels": {"version": "1.5", "on": "yes", "empty": ""},
        },
    }
    direct = dump_block_text(doc)
    assert direct is not None
    assert direct == yaml.safe_dump(doc, sort_keys=False, default_flow_style=False)
    assert "        contents: '[Unit]\n\n          Description=a long" in direct
    assert "a long\n          description a long" in direct  # folded past the 80th column
