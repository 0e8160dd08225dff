"""rpm-ostree command lines for OS changes: kernel type, extensions, rebase, cleanup. Pure: no I/O.

These only build argument vectors; the executor runs them. Behaviour follows upstream MCD
(pkg/daemon/update.go applyOSChanges/switchKernel/generateExtensionsArgs; spec §5.1, §5.2,
§5.6). The extension and kernel package tables they use live in `mcd.config.ostables`.
"""

from __future__ import annotations

from collections.abc import Sequence

from mcd.config.ostables import (
    DEFAULT_KERNEL_PACKAGES,
    KERNEL_64K_PACKAGES,
    KERNEL_TYPE_64K_PAGES,
    KERNEL_TYPE_REALTIME,
    REALTIME_KERNEL_PACKAGES,
    SUPPORTED_EXTENSIONS,
    canonical_kernel_type,
    extension_package_sets,
    extension_packages,
    go_list,
)

_SWAP_PACKAGES = {KERNEL_TYPE_REALTIME: REALTIME_KERNEL_PACKAGES, KERNEL_TYPE_64K_PAGES: KERNEL_64K_PACKAGES}
_ARM64 = frozenset({"aarch64", "arm64"})


class KernelTypeError(ValueError):
    """A kernel type that cannot be applied on this node."""


def extensions_command(installed_requested: Sequence[str], extensions: Sequence[str]) -> list[str] | None:
    """`rpm-ostree update` bringing layered extension packages to what `extensions` needs.

    `installed_requested` is the booted deployment's `requested-packages`. Missing packages are
    installed; installed packages that belong to some supported extension but are no longer
    needed are removed (other layered packages are not ours to touch). Installs come first, each
    group sorted. None when nothing changes. Unknown extensions raise ExtensionError, as the
    validation upstream runs first does.
    """
    required = set(extension_packages(extensions))
    installed = set(installed_requested)
    managed = {p for pkgs in SUPPORTED_EXTENSIONS.values() for p in pkgs}
    args: list[str] = []
    for pkg in sorted(required - installed):
        args += ["--install", pkg]
    for pkg in sorted((installed & managed) - required):
        args += ["--uninstall", pkg]
    if not args:
        return None
    return ["rpm-ostree", "update", *args]


def kernel_override_reset_command(
    requested_base_removals: Sequence[str], requested_packages: Sequence[str]
) -> list[str] | None:
    """`rpm-ostree override reset` undoing a kernel swap recorded in the booted deployment.

    Takes the deployment's `requested-base-removals` (kernel packages only) and
    `requested-packages` (realtime and 64k kernel packages only); None unless both hold some.
    """
    removals = [r for r in requested_base_removals if r == "kernel" or r.startswith("kernel-")]
    swapped = [p for p in requested_packages if p.startswith(("kernel-rt-", "kernel-64k-"))]
    if not removals or not swapped:
        return None
    cmd = ["rpm-ostree", "override", "reset", *removals]
    for pkg in swapped:
        cmd += ["--uninstall", pkg]
    return cmd


def kernel_swap_revert_command(
    old_type: str,
    requested_base_removals: Sequence[str] | None = None,
    requested_packages: Sequence[str] | None = None,
) -> list[str] | None:
    """The `override reset` undoing a realtime/64k kernel swap before the OS changes again.

    Upstream reads the swap from the booted deployment's package requests, which is what the
    node really runs; pass them when known. Without them (no node to ask, e.g. `mcd plan`) the
    swap is the one `old_type` implies. None when there is no swap to undo.
    """
    if requested_base_removals is None and requested_packages is None:
        implied = _SWAP_PACKAGES.get(canonical_kernel_type(old_type), ())
        return kernel_override_reset_command(DEFAULT_KERNEL_PACKAGES if implied else (), implied)
    return kernel_override_reset_command(requested_base_removals or (), requested_packages or ())


def kernel_switch_command(new_type: str, arch: str = "x86_64") -> list[str] | None:
    """The `override remove … --install …` that puts the realtime or 64k kernel in; None for default.

    `arch` is the node's machine (uname -m or GOARCH). Raises KernelTypeError for 64k-pages on
    anything but aarch64.
    """
    new = canonical_kernel_type(new_type)
    if new == KERNEL_TYPE_64K_PAGES and arch not in _ARM64:
        raise KernelTypeError("64k-pages is only supported for aarch64 architecture")
    if new not in _SWAP_PACKAGES:
        return None
    switch = ["rpm-ostree", "override", "remove", *DEFAULT_KERNEL_PACKAGES]
    for pkg in _SWAP_PACKAGES[new]:
        switch += ["--install", pkg]
    return switch


def staged_check_packages(extensions: Sequence[str]) -> list[str]:
    """The packages the staged deployment must request, in upstream's order: by extension, then
    as the extension table lists them (the order its error names the missing ones in)."""
    return [p for e in extensions for p in SUPPORTED_EXTENSIONS[e]]


def missing_extension_packages(requested_packages: Sequence[str], expected: Sequence[str]) -> list[str]:
    """The `expected` extension packages a deployment's `requested-packages` lack, in `expected` order."""
    requested = set(requested_packages)
    return [p for p in expected if p not in requested]


NO_STAGED_DEPLOYMENT = "no staged deployment found after applying extensions"


def missing_extensions_error(missing: Sequence[str]) -> str:
    """Upstream's error when the staged deployment does not request every extension package."""
    return f"the following extension packages are missing from the staged deployment: {go_list(missing)}"


def extensions_not_installed(extensions: Sequence[str], installed: Sequence[str]) -> str | None:
    """Upstream's verdict on the extensions of the config a node booted into, or None when each
    has one of its package sets (current or legacy) wholly among the `installed` packages.

    The text is upstream's (`verifyExtensionPackages`), with each set's missing packages as Go
    prints a list of lists.
    """
    have = set(installed)
    for ext in extensions:
        sets = extension_package_sets(ext)
        if not sets:
            return f'extension "{ext}" has no valid package sets defined'
        missing = [[p for p in package_set if p not in have] for package_set in sets]
        if any(not m for m in missing):
            continue
        per_set = "[" + " ".join(go_list(m) for m in missing) + "]"
        return (
            f'extension "{ext}" verification failed: no valid package set is fully installed. '
            f"Tried {len(sets)} package set(s), missing packages per set: {per_set}"
        )
    return None


EXTENSIONS_VERIFICATION_FAILED = "extension package verification failed"


# GOARCH and Debian spellings of the machines upstream runs on
_ARCH_NAMES = {"amd64": "x86_64", "arm64": "aarch64", "ppc64el": "ppc64le"}


def node_arch(machine: str) -> str:
    """A machine name (`uname -m` or GOARCH) as the daemon names it: x86_64, aarch64, s390x, ppc64le."""
    name = machine.strip().lower()
    return _ARCH_NAMES.get(name, name)


def rebase_command(os_image_url: str) -> list[str]:
    """Rebase onto an OS image pulled from its registry (signature not verified, as upstream)."""
    return ["rpm-ostree", "rebase", "--experimental", f"ostree-unverified-registry:{os_image_url}"]


def cleanup_rollback_command() -> list[str]:
    """Remove the rollback deployment, as upstream does when the cluster agent starts."""
    return ["rpm-ostree", "cleanup", "-r"]


def cleanup_pending_command() -> list[str]:
    """Discard a staged (pending) deployment."""
    return ["rpm-ostree", "cleanup", "-p"]
