"""Whether a newly rendered config can be applied in place on nodes that run the pool's current
one, as upstream's render controller checks before it targets a pool (`getRenderedMachineConfig`,
`generateAndValidateRenderedMachineConfig`). Pure: no I/O.

The rules are the agent's (`mcd.planner.reconcile`, upstream's `IsRenderedConfigReconcilable`), so
a config the controller targets is one the agents accept: without the check, the nodes the
rollout picks first go Unreconcilable one by one. As upstream, the error names the MachineConfig
that brought the change when one alone does, so the admin knows which to delete.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mcd.config.findings import InputError
from mcd.config.machineconfig import MachineConfig, machineconfig_from_object
from mcd.planner.reconcile import reconcile


def _parse(obj: Mapping[str, Any]) -> MachineConfig | str:
    name = str((obj.get("metadata") or {}).get("name", ""))
    try:
        return machineconfig_from_object(obj, f"machineconfig {name}")
    except InputError as exc:
        return f"machineconfig {name!r}: {exc}"


def _errors(current: MachineConfig, new: Mapping[str, Any]) -> list[str]:
    parsed = _parse(new)
    return [parsed] if isinstance(parsed, str) else reconcile(current, parsed)


def unreconcilable(
    current: Mapping[str, Any], rendered: Mapping[str, Any], sources: Sequence[Mapping[str, Any]]
) -> str | None:
    """Why `rendered` cannot follow `current` in place (None: it can), naming the one of `sources`
    (the configs merged into it) whose own change is the reason, when there is one."""
    old = _parse(current)
    if isinstance(old, str):
        return None  # a current config no one can read: the agents say so on their own nodes
    full = _errors(old, rendered)
    if not full:
        return None
    text = "; ".join(full)
    current_name = old.name
    for source in sources:
        for error in _errors(old, source):
            # the reason without its "new machineconfig … is not reconcilable against …: " prefix
            reason = error.split(": ", 1)[-1]
            if reason and reason in text:
                name = (source.get("metadata") or {}).get("name", "")
                return (
                    f'reconciliation failed between current config "{current_name}" '
                    f'and base config "{name}": {reason}'
                )
    return f"render reconciliation error: {text}"
