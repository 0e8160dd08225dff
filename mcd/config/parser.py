"""A parser that validates what changed, not what it already knows to be valid. Pure: no I/O.

A node's agent parses the same few rendered configs again and again (the current and the
desired one on every sync), and two renderings of a pool differ in a few of their thousands of
files. A `Parser` remembers the last configs it parsed without a finding, and each new parse
takes over every file and unit declared exactly as in one of them (`mcd.config.reuse`): those
are neither validated nor decoded again; everything else, and every check across items, runs
as in a first parse. The verdict is the same as a parse from nothing (tests/unit/test_parser.py
compares them on every case table, fixture and random mutations).

What it keeps is owned by the object: the caller decides how long it lives (a command: one run;
the agent: the process), and nothing is kept at module level.
"""

from __future__ import annotations

from collections.abc import Mapping

from mcd.config.findings import JsonPath
from mcd.config.ignition_model import DEFAULT_PARSE, ParseOptions
from mcd.config.load import load_machineconfig
from mcd.config.machineconfig import MachineConfig, machineconfig_from_object

TYPE_CHECKING = False  # not typing's: its import is a few ms of every short command
if TYPE_CHECKING:
    from typing import Any

DEFAULT_KEEP = 4  # the current and desired config, with room for one rollout's change of mind


class Parser:
    """Parses MachineConfigs, taking items over from the last `keep` it parsed cleanly."""

    def __init__(self, keep: int = DEFAULT_KEEP) -> None:
        self.keep = keep
        self._known: dict[object, MachineConfig] = {}  # by name, least recently parsed first

    def like(self, name: object) -> MachineConfig | None:
        """The config to take items over from for an object named `name`: the last one parsed
        under that name, else the last one parsed (a new rendering of the same pool)."""
        found = self._known.get(name)
        if found is None and self._known:
            found = next(reversed(self._known.values()))
        return found

    def load(self, data: bytes, source: str, *, options: ParseOptions = DEFAULT_PARSE) -> MachineConfig:
        """`load_machineconfig`, validating only what no remembered config declares alike."""
        return self._remember(load_machineconfig(data, source, options=options, like=self.like))

    def from_object(
        self,
        obj: Mapping[str, Any],
        source: str,
        path: JsonPath = (),
        *,
        options: ParseOptions = DEFAULT_PARSE,
    ) -> MachineConfig:
        """`machineconfig_from_object`, validating only what no remembered config declares alike."""
        meta = obj.get("metadata")
        like = self.like(meta.get("name") if isinstance(meta, Mapping) else None)
        return self._remember(machineconfig_from_object(obj, source, path, options=options, like=like))

    def forget(self) -> None:
        """Drop every remembered config (the next parse validates everything)."""
        self._known.clear()

    def _remember(self, mc: MachineConfig) -> MachineConfig:
        # only a config without a finding is a source to take items over from (mcd.config.reuse)
        if mc.config is not None and not mc.ignition.findings:
            self._known.pop(mc.name, None)
            self._known[mc.name] = mc
            while len(self._known) > self.keep:
                del self._known[next(iter(self._known))]
        return mc
