"""`mcd status`: the node's status records (`mcd.host.status`) as text, JSON or YAML."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from mcd.config.findings import Finding, InputError
from mcd.config.text import shown
from mcd.host.root import HostRoot
from mcd.host.status import Status, read_status


def render_text(s: Status) -> str:
    lines = [
        f"current config:  {s.current_config or '(none)'}",
        f"desired config:  {s.desired_config or '(unknown)'}",
        f"state:           {s.state or '(unknown)'}" + (f" since {s.since}" if s.since else ""),
    ]
    if s.reason:
        lines.append(f"reason:          {s.reason}")
    if s.update_in_progress:
        lines.append("update:          in progress (interrupted updates finish on the next start)")
    if s.reboot_owed:
        lines.append(f"reboot owed:     yes, for {s.reboot_owed['config']} ({s.reboot_owed['reason']})")
    else:
        lines.append("reboot owed:     no")
    if s.last_drift:
        d = s.last_drift
        lines.append(f"last drift:      {d.get('time', '?')} {d.get('reason', '')}")
    else:
        lines.append("last drift:      none seen")
    return "\n".join(lines) + "\n"


def show(root_mount: str, output: str, out: TextIO, dump: Callable[[Any, str, TextIO], None]) -> None:
    """`mcd status`: InputError when the root is not a directory."""

    if not Path(root_mount).is_dir():
        # a sentence about the flag, not a located finding: there is no document here
        raise InputError("mcd", [Finding((), f"--root-mount {shown(root_mount)} is not a directory")])
    st = read_status(HostRoot(Path(root_mount)))
    if output == "text":
        out.write(render_text(st))
    else:
        dump(st.to_dict(), output, out)
