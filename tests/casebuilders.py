"""MachineConfigs built from the sides of upstream's case tables (../shared/cases)."""

from __future__ import annotations

from typing import Any

from builders import data_url, load, mc, mc_object

from mcd.config.machineconfig import MachineConfig


def reconcile_side_mc(name: str, side: dict[str, Any]) -> MachineConfig:
    spec: dict[str, Any] = {}
    for key in ("fips", "kernelArguments", "osImageURL"):
        if key in side:
            spec[key] = side[key]
    obj = mc_object(name, ignition=side["ignition"], **spec)
    if "annotations" in side:
        obj["metadata"]["annotations"] = side["annotations"]
    return load(obj)


def legacy_side_mc(side: dict[str, Any]) -> MachineConfig:
    files = [
        {"path": f["path"], "contents": {"source": data_url(f["contents"])}, "mode": f.get("mode", 420)}
        for f in side.get("files", [])
    ]
    return mc(
        side["name"],
        files=files,
        units=side.get("units") or None,
        ssh_keys=side.get("core_ssh_keys") or None,
        osImageURL=side.get("osImageURL", ""),
        kernelArguments=side.get("kernelArguments"),
        kernelType=side.get("kernelType", ""),
        extensions=side.get("extensions"),
        fips=side.get("fips", False),
    )


def ndp_configs(diff: dict[str, Any]) -> tuple[MachineConfig, MachineConfig]:
    """Two configs whose diff is exactly the case's diff description."""
    old_files = [{"path": p, "contents": {"source": "data:,old"}, "mode": 420} for p in diff.get("files", [])]
    new_files = [{"path": p, "contents": {"source": "data:,new"}, "mode": 420} for p in diff.get("files", [])]
    old_units = [{"name": u, "contents": "[Unit]\nDescription=old\n"} for u in diff.get("units", [])]
    new_units = [{"name": u, "contents": "[Unit]\nDescription=new\n"} for u in diff.get("units", [])]
    old_spec: dict[str, Any] = {"osImageURL": "quay.io/os@sha256:" + "a" * 64}
    new_spec: dict[str, Any] = dict(old_spec)
    if diff.get("osUpdate"):
        new_spec["osImageURL"] = "quay.io/os@sha256:" + "b" * 64
    if diff.get("kargs"):
        new_spec["kernelArguments"] = ["nosmt"]
    if diff.get("kernelType"):
        new_spec["kernelType"] = "realtime"
    if diff.get("extensions"):
        new_spec["extensions"] = ["usbguard"]
    if diff.get("fips"):
        new_spec["fips"] = True
    old = mc("rendered-old", files=old_files, units=old_units, ssh_keys=["ssh-ed25519 AAAA old"], **old_spec)
    new_keys = ["ssh-ed25519 AAAA new"] if diff.get("passwd") else ["ssh-ed25519 AAAA old"]
    new = mc("rendered-new", files=new_files, units=new_units, ssh_keys=new_keys, **new_spec)
    return old, new


def registries_mc(name: str, text: str) -> MachineConfig:
    """A config whose only file is this registries.conf."""
    return mc(
        name, files=[{"path": "/etc/containers/registries.conf", "contents": {"source": data_url(text)}}]
    )
