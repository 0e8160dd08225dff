"""Where the agent's MachineConfigs come from: the copy on disk, the MachineConfig watch's parse
(`mcd.agent.mccache`), else the API server; and the cluster's disruption policies.

Shared by the decision (`mcd.agent.sync`) and the update run (`mcd.agent.phases`), which read the
same configs: one parse of a rendered config (tens of megabytes) serves both.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from mcd import policy
from mcd.agent.applied import parse_machineconfig
from mcd.agent.mccache import Ahead
from mcd.agent.node_apply import NodeApplier
from mcd.config.machineconfig import OCL_IMAGE_ANNOTATION, ORIGINAL_OS_IMAGE_ANNOTATION, MachineConfig
from mcd.kube.errors import NotFoundError
from mcd.node.errors import McdError


class ConfigApi(Protocol):
    def get_machineconfig_json(self, name: str) -> tuple[dict[str, Any], bytes | None]:
        """The MachineConfig `name`, and the JSON text it was decoded from when there is one."""

    def get_machineconfiguration(self, name: str = "cluster") -> dict[str, Any] | None: ...


class ConfigReader:
    """The MachineConfigs a sync reads, parsed once per resourceVersion (one entry kept)."""

    def __init__(
        self, api: ConfigApi, applier: NodeApplier, ahead: Callable[[str], Ahead | None] | None = None
    ) -> None:
        self.api, self.applier = api, applier
        # the desired config as a watch parsed it ahead, taken by name
        self._ahead = ahead
        # parsed MachineConfigs by name and resourceVersion (rendered configs are large and immutable)
        self._mcs: dict[str, tuple[str, MachineConfig]] = {}
        self._lock = threading.Lock()

    def machineconfig(
        self, name: str, like: MachineConfig | None = None, *, stage: bool = False
    ) -> MachineConfig:
        """The MachineConfig `name` as the watch parsed it ahead, else from the API server, parsed;
        what it declares as `like` does (the config on disk, mostly) is taken over from that one.
        `stage`: the config to update to, whose update record is written meanwhile
        (`NodeApplier.stage`)."""
        ahead = self._ahead(name) if self._ahead is not None else None
        if ahead is not None:  # kept for a retry, which reads the server for a newer version
            if stage and (text := ahead.config.source_text) is not None:
                self.applier.stage(text)
            with self._lock:
                self._mcs = {name: (ahead.resource_version, ahead.config)}
            return ahead.config
        try:
            obj, text = self.api.get_machineconfig_json(name)
        except NotFoundError:
            raise McdError(f'machineconfig.machineconfiguration.openshift.io "{name}" not found') from None
        if stage and text is not None:
            self.applier.stage(text)
        rv = str((obj.get("metadata") or {}).get("resourceVersion", ""))
        with self._lock:
            cached = self._mcs.get(name)
        if cached is not None and rv and cached[0] == rv:
            return cached[1]
        mc = parse_machineconfig(obj, f"MachineConfig {name}", text=text, like=like)
        with self._lock:
            # one entry: the desired config (a rendered config parsed is tens of megabytes)
            self._mcs = {name: (rv, mc)}
        return mc

    def disk_or_cluster(self, name: str) -> MachineConfig:
        """The config `name`: the copy on disk when it is that one (no API read; survives its deletion)."""
        disk = self.applier.disk_config()
        if disk is not None and disk.name == name:
            return disk
        return self.machineconfig(name, disk)

    def applied(self) -> None:
        """An update went through: its config is the one on disk now (`disk_config`), kept there once."""
        with self._lock:
            self._mcs = {}

    def policies(self) -> tuple[policy.ClusterPolicies, tuple[str, ...]]:
        """The node disruption policy and the storage overrides of MachineConfiguration/cluster."""
        try:
            return policy.settings_from_machineconfiguration(self.api.get_machineconfiguration("cluster"))
        except policy.PolicyError as exc:
            raise McdError(str(exc)) from None


@dataclass(frozen=True)
class Images:
    """The on-cluster-layering images of an update: the node's now, and the desired one ("" none)."""

    current: str
    desired: str


def with_image(mc: MachineConfig, image: str) -> MachineConfig:
    """`mc` running the layered `image`, as upstream's daemon embeds it in a copy of the config
    (`osImageURL` replaced, the original kept in an annotation); `mc` itself without one.

    Only the value changes: `raw`, which the update records as currentconfig, stays as read
    (upstream strips the image from the record too; it goes to currentimage).
    """
    if not image or mc.ocl_image == image:
        return mc
    annotations = dict(mc.annotations)
    annotations[ORIGINAL_OS_IMAGE_ANNOTATION] = mc.os_image_url
    annotations[OCL_IMAGE_ANNOTATION] = image
    return replace(mc, os_image_url=image, annotations=tuple(annotations.items()))
