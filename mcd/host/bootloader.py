"""The bootloader update before an OS rebase on Secure Boot hosts (upstream's bootupd step, spec §5.6).

A new OS image may be signed with a key the installed shim/GRUB does not trust yet; its kernel
would then fail to boot under Secure Boot. So before the rebase the bootloader is brought to the
one the target image ships: on RHEL 9.6 and later by the node's own `bootloader-update.service`;
otherwise (or when that fails) by running `bootupctl update` from the target image in a
privileged container. Only on CoreOS running on x86_64 or aarch64 with Secure Boot on (or when
`mokutil` cannot tell); a failure is logged and the rebase goes on, as upstream.
"""

from __future__ import annotations

import json
import logging
import os
import uuid

from mcd.host.osrelease import os_version, read_os_release
from mcd.host.root import HostRoot, PathEscapeError
from mcd.host.runner import CommandError, Runner
from mcd.planner.managed_paths import INTERNAL_REGISTRY_PULL_SECRET
from mcd.planner.rpmostree_args import node_arch

LOG = logging.getLogger(__name__)

KUBELET_AUTH = "/var/lib/kubelet/config.json"
UPDATE_SERVICE = "bootloader-update.service"
SECURE_BOOT_ON = "SecureBoot enabled"
# the machines whose Secure Boot chain the update is for (upstream's GOARCH check)
ARCHES = ("x86_64", "aarch64")
# pulling or installing from an OS image may take long; systemd-run's default would cut it short
CONTAINER_TIMEOUT = 3600.0
_SYSTEMD_RUN = ("systemd-run", "-p", "EnvironmentFile=-/etc/mco/proxy.env", "--collect", "--wait")


class BootloaderError(RuntimeError):
    """A step of the bootloader update failed (logged as a warning by `update_before_rebase`)."""


class Bootloader:
    """Updates one running CoreOS node's bootloader from a target image, through `runner` (which
    runs commands inside the node)."""

    def __init__(
        self,
        runner: Runner,
        root: HostRoot,
        *,
        machine: str | None = None,
        os_release: str | None = None,
    ) -> None:
        self._runner = runner
        self._root = root
        # given by tests; else read from the root when needed
        self._os_release_text = os_release
        self._arch = node_arch(machine if machine is not None else os.uname().machine)

    def update_before_rebase(self, image: str) -> bool:
        """Bring the bootloader to `image`'s where upstream does; True when an update ran and
        succeeded. Never raises: a failure is logged and the rebase goes on."""
        if self._arch not in ARCHES:
            return False
        if not self.secure_boot():
            LOG.info("Secure Boot not enabled: bootloader update not required")
            return False
        try:
            self._update(image)
        except BootloaderError as exc:
            LOG.warning("bootloader update failed: %s", exc)
            return False
        return True

    def secure_boot(self) -> bool:
        """`mokutil --sb-state` says Secure Boot is on; when it cannot tell, assume it is."""
        try:
            out = self._runner.run(["mokutil", "--sb-state"]).stdout
        except (CommandError, OSError) as exc:
            LOG.info("mokutil failed, assuming Secure Boot may be enabled: %s", exc)
            return True
        return SECURE_BOOT_ON in out

    def _update(self, image: str) -> None:
        if os_version(self._os_release()) >= (9, 6):
            # the node's own unit: its output lands in the journal (a oneshot: start waits for it)
            try:
                self._runner.run(["systemctl", "start", UPDATE_SERVICE])
                LOG.info("bootloader updated by %s", UPDATE_SERVICE)
                return
            except (CommandError, OSError) as exc:
                LOG.info("%s failed, updating from the image instead: %s", UPDATE_SERVICE, exc)
        self._from_image(image)

    def _from_image(self, image: str) -> None:
        """`bootupctl update` from the target image, pulled first unless podman has it already."""
        if not self._image_present(image):
            pull = [*_SYSTEMD_RUN[:1], "--unit", "machine-config-daemon-bootupd", *_SYSTEMD_RUN[1:], "--"]
            pull += ["podman", "pull", *self._authfile(), image]
            self._run(pull, "pulling image for bootupctl")
        run = [*_SYSTEMD_RUN[:1], "--unit", "machine-config-daemon-bootupd-update", *_SYSTEMD_RUN[1:], "--"]
        # bootupctl insists on running under systemd (INVOCATION_ID); it writes /boot and the ESP
        run += ["podman", "run", "--env", f"INVOCATION_ID={uuid.uuid4()}", "--privileged", "--pid=host"]
        run += [
            "--net=host",
            "--rm",
            "-v",
            "/boot:/boot:rslave",
            "-v",
            "/dev:/dev",
            image,
            "bootupctl",
            "update",
        ]
        self._run(run, "bootupctl update")
        LOG.info("bootloader updated from %s", image)

    def _os_release(self) -> str:
        return self._os_release_text if self._os_release_text is not None else read_os_release(self._root)

    def _image_present(self, image: str) -> bool:
        argv = ["podman", "images", "--format=json", "--filter", f"reference={image}"]
        try:
            listed = json.loads(self._runner.run(argv).stdout or "[]")
        except (CommandError, OSError, ValueError) as exc:
            LOG.info("could not check local podman storage, pulling: %s", exc)
            return False
        return bool(listed)

    def _authfile(self) -> list[str]:
        # the merged secret (internal registry and global) when the daemon wrote it, else the kubelet's
        for path in (INTERNAL_REGISTRY_PULL_SECRET, KUBELET_AUTH):
            try:
                if self._root.join(path, follow_final=True).exists():
                    return ["--authfile", path]
            except PathEscapeError:
                continue
        return []

    def _run(self, argv: list[str], what: str) -> None:
        try:
            self._runner.run(argv, timeout=CONTAINER_TIMEOUT)
        except (CommandError, OSError) as exc:
            raise BootloaderError(f"{what}: {exc}") from exc
