"""Located findings about configuration input, and the error for input that cannot be used. Pure: no I/O.

Every problem found in user input is reported as a `Finding` that carries the JSON path of
the offending value (``spec.config.storage.files[3].mode``), so an admin can find it in the
file without reading a traceback. Validation collects findings (errors and warnings) and only
`mcd validate` prints warnings.

`InputError` is input that cannot be used at all: a file, document or argument, with its
findings. Raised by the loaders (`mcd.config.load`, `machineconfig`, `machineconfiguration`),
`mcd.policy.settings_of` and the commands for a bad argument; for the CLI, which prints its lines
and exits with the input error code. The agent turns it into its own error (`NodeApplier`: a
McdError, the config directory: a ConfigDirError).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from mcd.config.record import record
from mcd.config.text import escape_controls, shown

TYPE_CHECKING = False  # not typing's: its import is a few ms of every short command
if TYPE_CHECKING:
    from typing import Literal

PathPart = str | int
JsonPath = tuple[PathPart, ...]


def format_path(parts: Iterable[PathPart]) -> str:
    """Render path parts as ``a.b[3].c``; the empty path is ``$`` (the document itself)."""
    out: list[str] = []
    for part in parts:
        if isinstance(part, int):
            out.append(f"[{part}]")
        elif out:
            out.append(f".{part}")
        else:
            out.append(part)
    return "".join(out) or "$"


@record
class Finding:
    """One problem at one place of a document."""

    path: JsonPath
    message: str
    # warnings (e.g. an unused key, as Ignition reports them) never make a config invalid
    severity: Literal["error", "warning"] = "error"

    def located(self, prefix: JsonPath = ()) -> Finding:
        """The same finding, its path placed under `prefix` (e.g. ``("spec", "config")``)."""
        return Finding(prefix + self.path, self.message, self.severity)

    def render(self, source: str) -> str:
        """``FILE: JSON-PATH: message``, the line `mcd validate` prints (``FILE: message`` for the
        document as a whole); control characters from the input are escaped."""
        tag = "warning: " if self.severity == "warning" else ""
        where = f"{format_path(self.path)}: " if self.path else ""
        # a file name long enough for ENAMETOOLONG would drown the line: clipped like a value
        return escape_controls(f"{shown(source)}: {where}{tag}{self.message}")


class InputError(Exception):
    """Input that cannot be used at all (bad syntax, wrong kind of object, invalid config).

    Carries the source name (a file name or ``-``) and one or more located findings.
    """

    def __init__(self, source: str, findings: Sequence[Finding]) -> None:
        self.source = source
        self.findings = tuple(findings)
        super().__init__("\n".join(self.lines()))

    def lines(self) -> list[str]:
        return [f.render(self.source) for f in self.findings]
