"""`mcd check-disk`: verify a node root against a config (upstream's on-disk validation).

Files, units, masks and enablement (`mcd.host.ondisk`), and on rpm-ostree systems the booted
image and the kernel arguments; by default against the config recorded on the node.
"""

from __future__ import annotations

from dataclasses import dataclass

from mcd.cli.oncefrom import read_source
from mcd.config.contents import DEFAULT_MAX_FILE_SIZE
from mcd.config.findings import Finding, InputError
from mcd.config.ignition import ParseOptions
from mcd.config.load import load_machineconfig
from mcd.host import ondisk, rootlock, state, unitdirs
from mcd.planner import kargs as kargs_mod
from mcd.update.transaction import Host, load_mc


@dataclass(frozen=True)
class DiskCheck:
    config_name: str
    errors: tuple[str, ...]
    # the on-cluster-layering image the config carries ("" without): upstream's reason names it
    ocl_image: str = ""

    @property
    def clean(self) -> bool:
        return not self.errors

    def reason(self) -> str:
        """The Degraded reason upstream writes for the first problem."""
        against = self.ocl_image or self.config_name
        return f"unexpected on-disk state validating against {against}: {self.errors[0]}"


def check_disk(
    host: Host, config_file: str | None = None, max_file_size: int = DEFAULT_MAX_FILE_SIZE
) -> DiskCheck:
    """Verify files, units and (on CoreOS) kernel arguments and OS image against a config; large
    files are compared as they are decoded, never held whole.

    Under the root's shared lock: an update running meanwhile is waited for, never seen half done.
    """
    with rootlock.hold(host.root, shared=True, timeout=host.lock_timeout):
        return _check_disk(host, config_file, max_file_size)


def _check_disk(host: Host, config_file: str | None, max_file_size: int) -> DiskCheck:
    options = ParseOptions(max_file_size=max_file_size)
    if config_file is not None:
        data, source = read_source(config_file)
        mc = load_machineconfig(data, source, options=options)
    else:
        recorded = state.read_current_config(host.root)
        if recorded is None:
            raise InputError(state.CURRENT_CONFIG, [Finding((), "no config recorded on this node; name one")])
        mc = load_mc(recorded, state.CURRENT_CONFIG, options)
    if mc.config is None:
        raise InputError(mc.name, [f.located(mc.ignition_path) for f in mc.ignition.errors])
    errors: list[str] = []
    if host.rpmostree is not None:
        booted = host.rpmostree.booted_image()
        want = mc.ocl_image or mc.os_image_url
        if booted != want:  # an empty osImageURL too: upstream compares the strings
            errors.append(f'expected target osImageURL "{want}", have "{booted}"')
        missing = kargs_mod.missing_kargs_error(host.rpmostree.kargs_output(), list(mc.kernel_arguments))
        if missing:
            errors.append(missing)
    # a systemd directory leading out of the root: the links systemd reads are not the root's
    errors += unitdirs.escapes(host.root)
    errors += ondisk.check_config(host.root, mc.config, host.systemd.is_enabled)
    return DiskCheck(mc.name, tuple(errors), mc.ocl_image)
