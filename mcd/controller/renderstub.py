"""A stand-in for `mcd.render.render_pool` until the render engine lands (same signature).

It merges the configs in name order (later files and units win, kernel arguments appended,
extensions united, FIPS if any, the last kernelType and osImageURL) and names the result
`rendered-<pool>-<hash of the spec>`. Pure.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any


class RenderError(ValueError):
    """A config that cannot be merged (its message names the MachineConfig)."""


def render_pool(
    pool: str, configs: Sequence[Mapping[str, Any]], *, os_image_url: str | None = None
) -> dict[str, Any]:
    files: dict[str, Any] = {}
    units: dict[str, Any] = {}
    users: dict[str, Any] = {}
    kargs: list[str] = []
    extensions: list[str] = []
    fips = False
    kernel_type = ""
    image = os_image_url or ""
    for mc in sorted(configs, key=lambda c: str((c.get("metadata") or {}).get("name", ""))):
        spec = mc.get("spec") or {}
        if not isinstance(spec, dict):
            raise RenderError(
                f"MachineConfig {mc.get('metadata', {}).get('name', '')}: spec: expected an object"
            )
        ign = spec.get("config") or {}
        for f in (ign.get("storage") or {}).get("files") or []:
            files[str(f.get("path", ""))] = f
        for u in (ign.get("systemd") or {}).get("units") or []:
            units[str(u.get("name", ""))] = u
        for u in (ign.get("passwd") or {}).get("users") or []:
            users[str(u.get("name", ""))] = u
        kargs.extend(spec.get("kernelArguments") or [])
        extensions.extend(e for e in spec.get("extensions") or [] if e not in extensions)
        fips = fips or bool(spec.get("fips"))
        kernel_type = spec.get("kernelType") or kernel_type
        image = spec.get("osImageURL") or image
    config: dict[str, Any] = {"ignition": {"version": "3.5.0"}}
    if files:
        config["storage"] = {"files": list(files.values())}
    if units:
        config["systemd"] = {"units": list(units.values())}
    if users:
        config["passwd"] = {"users": list(users.values())}
    out_spec = {"config": config, "kernelArguments": kargs, "extensions": extensions, "fips": fips,
                "kernelType": kernel_type, "osImageURL": image}  # fmt: skip
    digest = hashlib.sha256(json.dumps(out_spec, sort_keys=True).encode()).hexdigest()[:32]
    return {
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": f"rendered-{pool}-{digest}"},
        "spec": out_spec,
    }


def source_refs(configs: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """spec.configuration.source: one reference per merged MachineConfig, in merge order."""
    names = sorted(str((c.get("metadata") or {}).get("name", "")) for c in configs)
    return [
        {"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig", "name": n}
        for n in names
    ]
