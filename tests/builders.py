"""Builders of MachineConfig objects for tests (plain dicts, then parsed by the real loader)."""

from __future__ import annotations

import dataclasses
import json
import urllib.parse
from collections.abc import Iterable
from typing import Any

from mcd.config.findings import JsonPath
from mcd.config.machineconfig import MachineConfig, machineconfig_from_object
from mcd.planner.plan import PlannedChange
from mcd.policy import Action, PolicyError, PostConfigAction
from mcd.policy.model import SPEC_ACTION_TYPES, STATUS_ACTION_TYPES
from mcd.policy.parse import parse_action


def data_url(text: str) -> str:
    return "data:," + urllib.parse.quote(text, safe="")


def ign_file(path: str, text: str = "", mode: int | None = 420, **extra: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"path": path, "contents": {"source": data_url(text)}}
    if mode is not None:
        entry["mode"] = mode
    entry.update(extra)
    return entry


def mc_object(
    name: str = "mc",
    ignition: dict[str, Any] | None = None,
    files: list[dict[str, Any]] | None = None,
    units: list[dict[str, Any]] | None = None,
    ssh_keys: list[str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A MachineConfig object; `files`/`units`/`ssh_keys` build a 3.5.0 Ignition when `ignition` is None."""
    if ignition is None:
        ignition = {"ignition": {"version": "3.5.0"}}
        if files:
            ignition["storage"] = {"files": files}
        if units:
            ignition["systemd"] = {"units": units}
        if ssh_keys:
            ignition["passwd"] = {"users": [{"name": "core", "sshAuthorizedKeys": ssh_keys}]}
    return {
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": name},
        "spec": {"config": ignition, **spec},
    }


def mc(*args: Any, **kwargs: Any) -> MachineConfig:
    return load(mc_object(*args, **kwargs))


def load(obj: dict[str, Any]) -> MachineConfig:
    # a JSON round trip, as if read from a file
    return machineconfig_from_object(json.loads(json.dumps(obj)), "test")


def action_from_api(obj: object, path: JsonPath = (), *, allow_special: bool = True) -> Action:
    """One API action (the status enum, or the spec enum without ``Special``); PolicyError if invalid."""
    action, findings = parse_action(obj, path, STATUS_ACTION_TYPES if allow_special else SPEC_ACTION_TYPES)
    if findings or action is None:
        raise PolicyError(findings)
    return action


def reboot_argv(name: str = "new") -> tuple[str, ...]:
    """Upstream's reboot request for a config, word for word (written out, never built by mcd)."""
    return (
        "systemd-run",
        "--unit",
        "machine-config-daemon-reboot",
        "--description",
        f"machine-config-daemon: Node will reboot into config {name}",
        "-p",
        "Requires=ostree-finalize-staged.service",
        "-p",
        "After=ostree-finalize-staged.service",
        "/bin/sh",
        "-c",
        "systemctl reboot",
    )


def spellings(actions: Iterable[PostConfigAction]) -> tuple[str | Action, ...]:
    """Post-config actions in their table's terms (legacy words, or the API's `Action`): what
    the upstream case tables and the tests' expectations are written in."""
    return tuple(a.spelling() for a in actions)


def spelled(changes: Iterable[PlannedChange]) -> tuple[PlannedChange, ...]:
    """Planned changes with their actions in their table's terms (see `spellings`)."""
    return tuple(dataclasses.replace(c, actions=spellings(c.actions)) for c in changes)
