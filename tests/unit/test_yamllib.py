"""mcd.config.yamllib: PyYAML's reader pattern, taken from `re`'s cache, matches what PyYAML's own
pattern matches, and a fresh process that imports PyYAML through it finds it there."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from mcd.config import yamllib

EVERY_CHARACTER = "".join(map(chr, range(0x110000)))


def test_the_complement_matches_the_same_characters() -> None:
    theirs = re.compile(yamllib.READER_PATTERN)
    mine = re.compile(yamllib.SAME_CHARACTERS)
    assert mine.findall(EVERY_CHARACTER) == theirs.findall(EVERY_CHARACTER)
    assert len(mine.findall(EVERY_CHARACTER)) == 61 + 2048 + 2  # controls, surrogates, U+FFFE/F


def _run(probe: str) -> str:
    return subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout


@pytest.mark.allow_commands
def test_the_pattern_is_pyyamls_own() -> None:
    """A fresh PyYAML, imported alone, compiles exactly the pattern the cache is given for it."""
    shown = _run("import json, yaml.reader; print(json.dumps(yaml.reader.Reader.NON_PRINTABLE.pattern))")
    assert json.loads(shown) == yamllib.READER_PATTERN


@pytest.mark.allow_commands
def test_a_fresh_import_takes_the_compiled_complement() -> None:
    probe = "import json, mcd.config.yamllib, yaml.reader; print(json.dumps(yaml.reader.{}.pattern))"
    shown = _run(probe.format("Reader.NON_PRINTABLE"))
    assert json.loads(shown) == yamllib.SAME_CHARACTERS


@pytest.mark.allow_commands
@pytest.mark.parametrize("text", ["a: \\x07", "a: b\\x85c\\ufffe", "ok: \\U0001f600", "x: \\x7f"])
def test_the_python_reader_answers_as_with_its_own_pattern(text: str) -> None:
    """PyYAML's pure-Python reader, on the complement: what it accepts and the error it gives."""
    probe = (
        "{imports}\n"
        "try:\n"
        f"    print(repr(yaml.load('{text}', Loader=yaml.SafeLoader)))\n"
        "except yaml.reader.ReaderError as e:\n"
        "    print(repr(e.character), e.position)\n"
    )
    theirs = _run(probe.format(imports="import yaml"))
    mine = _run(probe.format(imports="from mcd.config.yamllib import yaml"))
    assert mine == theirs
