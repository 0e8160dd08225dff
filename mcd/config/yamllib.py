"""PyYAML, as mcd imports it: the same module, without its slowest compile. Pure.

Importing `yaml` compiles `yaml.reader.Reader.NON_PRINTABLE`, a negated class of every character
YAML allows, up to U+10FFFF: about 7 ms of every short command that reads or writes YAML (a
third of PyYAML's import), for a pattern most of mcd's reads never use (they go through
libyaml's C parser, which has its own check; `yaml.safe_load`, for a kubeconfig, a certificate
bundle or `rpm-ostree --version`, reads with PyYAML's reader and uses it). The same set of
characters written as the complement (the few
characters YAML forbids) compiles in under a millisecond; it is put in `re`'s cache under
PyYAML's pattern first, so PyYAML's `re.compile` finds it compiled (tests/unit/test_yamllib.py
proves the two classes match the same characters). Where `re` keeps no such cache, PyYAML
compiles its own: slower, not different.

Every module of mcd that uses PyYAML imports it from here, in a function where it is needed
only there (a JSON input never loads it).
"""

from __future__ import annotations

import re
import sys

# yaml.reader's pattern, character for character, and the same set of characters written as
# the complement of YAML's printable ones (C0 controls but tab and line breaks, DEL, C1 controls
# but NEL, the surrogates, U+FFFE and U+FFFF)
READER_PATTERN = "[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"
SAME_CHARACTERS = "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x84\x86-\x9f\ud800-\udfff\ufffe\uffff]"


def _precompile_reader_pattern() -> None:
    cache = getattr(re, "_cache", None)
    if "yaml.reader" not in sys.modules and isinstance(cache, dict):
        cache.setdefault((str, READER_PATTERN, 0), re.compile(SAME_CHARACTERS))


_precompile_reader_pattern()

import yaml  # noqa: E402  (after the pattern is in the cache)
from yaml.emitter import Emitter, ScalarAnalysis  # noqa: E402

__all__ = ["Emitter", "ScalarAnalysis", "yaml"]
