"""The commands' `-o yaml`: `yaml.safe_dump(obj, sort_keys=False, default_flow_style=False)`'s
text exactly, faster. Pure: the text is returned.

PyYAML's emitter looks at every character of every scalar in Python, twice (to choose a style,
then to write it): a rendered config of 2,000 files of 1 KiB took seconds. Most of a config's
text is single words of printable ASCII (data URLs, paths, names) and unit texts of printable
lines: a config made only of such values is written directly in the emitter's block layout
(`mcd.render.blockyaml`); otherwise the emitter writes it, with a word's style known at once.
tests/cli/test_yaml_output.py compares both ways with safe_dump on random documents.
"""

from __future__ import annotations

from mcd.config.yamllib import ScalarAnalysis, yaml
from mcd.render.blockyaml import dump_block_text
from mcd.render.wordscalar import word_analysis

TYPE_CHECKING = False  # not typing's: its import is a few ms of every short command
if TYPE_CHECKING:
    from typing import Any

_BREAKS_OR_SPACE = frozenset(" \n\x85\u2028\u2029")


class _Dumper(yaml.SafeDumper):
    """yaml.SafeDumper, with the short way for words of printable ASCII."""

    def analyze_scalar(self, scalar: str) -> ScalarAnalysis:
        return word_analysis(scalar) or super().analyze_scalar(scalar)

    def write_plain(self, text: str, split: bool = True) -> None:
        if not text or not _BREAKS_OR_SPACE.isdisjoint(text) or self.encoding:
            super().write_plain(text, split)
            return
        # PyYAML's loop over text with no space and no break: one write of the whole text
        if self.root_context:
            self.open_ended = True
        if not self.whitespace:
            self.column += 1
            self.stream.write(" ")
        self.whitespace = False
        self.indention = False
        self.column += len(text)
        self.stream.write(text)


def yaml_text(obj: Any) -> str:
    """`obj` as `yaml.safe_dump(obj, sort_keys=False, default_flow_style=False)` writes it."""
    direct = dump_block_text(obj)
    if direct is not None:
        return direct
    text: str = yaml.dump(obj, Dumper=_Dumper, sort_keys=False, default_flow_style=False)
    return text
