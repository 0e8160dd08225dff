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
_LEADING_INDICATORS = "#,[]{}&*!|>'\"%@`"
_FLOW_INDICATORS = ",?[]{}:"


def word_analysis(scalar: str) -> ScalarAnalysis | None:
    """The analysis of `scalar` when it is a word of printable ASCII; None for anything else."""
    if not _WORD.fullmatch(scalar):
        return None
    # the end of the text counts as white space: a final ":" is an indicator, and "-" or "?"
    # alone are; "---" and "..." start a document
    flow = scalar[0] in _LEADING_INDICATORS or scalar == "-" or any(c in _FLOW_INDICATORS for c in scalar)
    block_plain = not (
        scalar[0] in _LEADING_INDICATORS
        or scalar.startswith(("---", "..."))
        or scalar.endswith(":")
        or scalar in ("-", "?")
    )
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
