"""What an update did, as the agent reports it, and the MachineConfig objects it reads parsed into
the executor's type: values shared by `mcd.agent.node_apply` (which makes them) and the sync,
the config cache and the local agent (which read them)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from mcd.config.findings import InputError
from mcd.config.ignition import ParseOptions
from mcd.config.machineconfig import MachineConfig, machineconfig_from_object
from mcd.node.errors import McdError
from mcd.planner.plan import Plan
from mcd.update.perform import ActionError, event_name

# how the agent parses every config it keeps (the one on disk, the desired one, the watch's): no
# decoded file contents kept, only their size and SHA-256. A config lives as long as the agent,
# and its thousands of files' bytes are needed only for the few an update writes or a check finds
# changed (decoded again then); one set of options for all, so each config parses like the other
AGENT_PARSE = ParseOptions(keep_data_up_to=0)


@dataclass(frozen=True)
class ServiceAction:
    """A rebootless post-config action: `verb` is reload, restart or daemon-reload."""

    verb: str
    service: str  # as upstream's events name it (crio.service as crio; daemon-reload itself)
    skipped: bool  # not run: the root is not a running system


@dataclass(frozen=True)
class Applied:
    """What one update did: the post-config actions run (or skipped) and whether it needs a reboot."""

    plan: Plan
    reboot: bool
    actions: tuple[ServiceAction, ...]
    # another process (a second mcd on this root) applied the config while this one waited for
    # the root's lock: nothing was done here, no reboot is asked for again
    elsewhere: bool = False


def service_action(label: str) -> ServiceAction:
    """The executor's label of an action run ("reload crio.service", "daemon-reload", with
    " (skipped: …)" when not run) as a value."""
    what, _, note = label.partition(" (")
    verb, _, service = what.partition(" ")
    return ServiceAction(verb, event_name(verb, service) if service else verb, skipped=bool(note))


class ApplyError(McdError):
    """The update failed (rolled back, or not); `event`: the Warning Event upstream posts for
    the post-config action that failed, as (reason, message), if that is what failed."""

    def __init__(self, message: str, event: tuple[str, str] | None) -> None:
        super().__init__(message)
        self.event = event


def action_event(exc: BaseException) -> tuple[str, str] | None:
    """The Event of the failed action behind `exc` (its chain of causes), if any."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ActionError):
            return seen.event
        seen = seen.__cause__
    return None


def parse_machineconfig(
    obj: Mapping[str, Any], what: str, *, text: bytes | None = None, like: MachineConfig | None = None
) -> MachineConfig:
    """A MachineConfig object from the API as the executor's type; McdError naming it when invalid.

    `text`: the JSON text `obj` was decoded from (the update records it as it is); `like`: a
    config parsed before whose files and units alike are taken over instead of parsed again.
    """
    try:
        mc = machineconfig_from_object(obj, what, options=AGENT_PARSE, like=like)
    except InputError as exc:
        raise McdError("; ".join(exc.lines())) from None
    if mc.config is None:
        errors = "; ".join(f.render(what) for f in mc.located_findings() if f.severity == "error")
        raise McdError(f"invalid MachineConfig {what}: {errors}")
    return mc if text is None else replace(mc, raw_text=(mc.raw, text))
