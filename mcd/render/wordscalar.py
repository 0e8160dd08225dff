"""PyYAML's scalar analysis of a word of printable ASCII, known at once.

PyYAML's emitter looks at every character of every scalar in Python to choose a style. Most of
a config's text is single words of printable ASCII (data URLs, paths, names): no space, no line
break, nothing to escape. For those the answer depends only on the first and last characters
and a few indicators, so both YAML writers (`goyaml`, `yamlout`) take it from here and leave
every other scalar to PyYAML's own analysis.
"""

from __future__ import annotations

import re

from mcd.config.yamllib import ScalarAnalysis

_WORD = re.compile(r"[\x21-\x7e]+")
# what PyYAML's analysis treats as an indicator at the start of a scalar, and inside a flow one
LEADING_INDICATORS = "#,[]{}&*!|>'\"%@`"
_FLOW_INDICATORS = ",?[]{}:"


def is_word(text: str) -> bool:
    """Whether `text` is a word of printable ASCII (no space, no line break, nothing escaped)."""
    return _WORD.fullmatch(text) is not None


def word_block_plain(word: str) -> bool:
    """Whether PyYAML's analysis lets a word of printable ASCII be plain in a block: no
    indicator first, no final `:`, no document marker, not `-` or `?` alone."""
    return not (
        word[0] in LEADING_INDICATORS
        or word.startswith(("---", "..."))
        or word.endswith(":")
        or word in ("-", "?")
    )


def word_analysis(scalar: str) -> ScalarAnalysis | None:
    """The analysis of `scalar` when it is a word of printable ASCII; None for anything else."""
    if not is_word(scalar):
        return None
    # the end of the text counts as white space: a final ":" is an indicator, and "-" or "?"
    # alone are; "---" and "..." start a document
    flow = scalar[0] in LEADING_INDICATORS or scalar == "-" or any(c in _FLOW_INDICATORS for c in scalar)
    block_plain = word_block_plain(scalar)
    return ScalarAnalysis(
        scalar=scalar,
        empty=False,
        multiline=False,
        allow_flow_plain=block_plain and not flow,
        allow_block_plain=block_plain,
        allow_single_quoted=True,
        allow_double_quoted=True,
        allow_block=True,
    )
