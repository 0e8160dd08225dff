"""What a MachineConfig's kernelType and extensions may name, and the packages they stand for. Pure.

Config-layer tables (upstream's SupportedExtensions and the kernel package sets): validation,
the diff and the planner read them; `mcd.planner.rpmostree_args` builds rpm-ostree command lines from them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType


def go_list(items: Sequence[str]) -> str:
    """A string slice as Go's %v prints it: `[a b c]`."""
    return "[" + " ".join(items) + "]"


KERNEL_TYPE_DEFAULT = "default"
KERNEL_TYPE_REALTIME = "realtime"
KERNEL_TYPE_64K_PAGES = "64k-pages"

# The base kernel packages a kernel-type switch removes, and what it installs instead. The
# realtime list leaves out the kernel-rt meta-package on purpose: it drags in unwanted deps.
DEFAULT_KERNEL_PACKAGES = (
    "kernel",
    "kernel-core",
    "kernel-modules",
    "kernel-modules-core",
    "kernel-modules-extra",
)
REALTIME_KERNEL_PACKAGES = ("kernel-rt-core", "kernel-rt-modules", "kernel-rt-modules-extra")
KERNEL_64K_PACKAGES = (
    "kernel-64k-core",
    "kernel-64k-modules",
    "kernel-64k-modules-core",
    "kernel-64k-modules-extra",
)

SUPPORTED_EXTENSIONS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "two-node-ha": ("pacemaker", "pcs", "fence-agents-all"),
        "ipsec": ("NetworkManager-libreswan", "libreswan", "openvswitch3.5-ipsec"),
        "usbguard": ("usbguard",),
        "kerberos": ("krb5-workstation", "libkadm5"),
        "kernel-devel": ("kernel-devel", "kernel-headers"),
        "sandboxed-containers": ("kata-containers",),
        "sysstat": ("sysstat",),
    }
)


# The package sets extensions had in earlier releases: a node that booted an older OS image
# before this agent was updated holds one of these, which upstream's boot check accepts too.
LEGACY_EXTENSION_PACKAGES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {"ipsec": ("NetworkManager-libreswan", "libreswan")}  # <= 4.x had only the libreswan packages
)


def extension_package_sets(extension: str) -> list[tuple[str, ...]]:
    """Every package set that makes `extension` installed: the current one, then the legacy one."""
    return [
        table[extension] for table in (SUPPORTED_EXTENSIONS, LEGACY_EXTENSION_PACKAGES) if extension in table
    ]


class ExtensionError(ValueError):
    """A MachineConfig names extensions that are not supported."""


def canonical_kernel_type(t: str | None) -> str:
    """`realtime` and `64k-pages` as given (case-sensitive); anything else is `default`."""
    return t if t in (KERNEL_TYPE_REALTIME, KERNEL_TYPE_64K_PAGES) else KERNEL_TYPE_DEFAULT


def extension_packages(extensions: Sequence[str]) -> list[str]:
    """The packages the extensions need, sorted and without duplicates.

    Raises ExtensionError with upstream's message, listing every unknown extension in order.
    """
    invalid = [e for e in extensions if e not in SUPPORTED_EXTENSIONS]
    if invalid:
        raise ExtensionError(f"invalid extensions found: {go_list(invalid)}")
    return sorted({p for e in extensions for p in SUPPORTED_EXTENSIONS[e]})
