"""mcd.planner.rpmostree_args: rpm-ostree command lines for kernel type, extensions, rebase and cleanup."""

from __future__ import annotations

import pytest

from mcd.config.ostables import (
    DEFAULT_KERNEL_PACKAGES,
    SUPPORTED_EXTENSIONS,
    ExtensionError,
    canonical_kernel_type,
    extension_packages,
)
from mcd.planner.rpmostree_args import (
    KernelTypeError,
    cleanup_pending_command,
    extensions_command,
    extensions_not_installed,
    kernel_override_reset_command,
    kernel_swap_revert_command,
    kernel_switch_command,
    missing_extension_packages,
    missing_extensions_error,
    node_arch,
    rebase_command,
    staged_check_packages,
)

RT_SWITCH = [
    "rpm-ostree", "override", "remove",
    "kernel", "kernel-core", "kernel-modules", "kernel-modules-core", "kernel-modules-extra",
    "--install", "kernel-rt-core", "--install", "kernel-rt-modules", "--install", "kernel-rt-modules-extra",
]  # fmt: skip
K64_SWITCH = [
    "rpm-ostree", "override", "remove",
    "kernel", "kernel-core", "kernel-modules", "kernel-modules-core", "kernel-modules-extra",
    "--install", "kernel-64k-core", "--install", "kernel-64k-modules",
    "--install", "kernel-64k-modules-core", "--install", "kernel-64k-modules-extra",
]  # fmt: skip
RT_RESET = [
    "rpm-ostree", "override", "reset",
    "kernel", "kernel-core", "kernel-modules", "kernel-modules-core", "kernel-modules-extra",
    "--uninstall", "kernel-rt-core", "--uninstall", "kernel-rt-modules",
    "--uninstall", "kernel-rt-modules-extra",
]  # fmt: skip


@pytest.mark.parametrize(
    ("given", "canonical"),
    [
        ("realtime", "realtime"),
        ("64k-pages", "64k-pages"),
        ("default", "default"),
        ("", "default"),
        (None, "default"),
        ("Realtime", "default"),
        ("rt", "default"),
    ],
)
def test_canonical_kernel_type(given: str | None, canonical: str) -> None:
    assert canonical_kernel_type(given) == canonical


# --- extensions -----------------------------------------------------------------------------------


def test_supported_extensions_table() -> None:
    assert set(SUPPORTED_EXTENSIONS) == {
        "two-node-ha", "ipsec", "usbguard", "kerberos", "kernel-devel", "sandboxed-containers", "sysstat",
    }  # fmt: skip
    assert SUPPORTED_EXTENSIONS["ipsec"] == ("NetworkManager-libreswan", "libreswan", "openvswitch3.5-ipsec")


def test_extension_packages_sorted_unique() -> None:
    assert extension_packages(["sysstat", "kerberos", "sysstat"]) == [
        "krb5-workstation",
        "libkadm5",
        "sysstat",
    ]
    assert extension_packages([]) == []


def test_unknown_extensions_raise_upstream_message() -> None:
    with pytest.raises(ExtensionError) as err:
        extension_packages(["usbguard", "zsh", "vim", "zsh"])
    assert str(err.value) == "invalid extensions found: [zsh vim zsh]"
    with pytest.raises(ExtensionError):
        extensions_command([], ["zsh"])


def test_extensions_command_installs_then_uninstalls_sorted() -> None:
    assert extensions_command(["usbguard", "sysstat", "kata-containers"], ["kernel-devel", "usbguard"]) == [
        "rpm-ostree", "update",
        "--install", "kernel-devel", "--install", "kernel-headers",
        "--uninstall", "kata-containers", "--uninstall", "sysstat",
    ]  # fmt: skip


def test_extensions_command_leaves_unmanaged_layered_packages_alone() -> None:
    assert extensions_command(["htop", "sysstat"], ["sysstat"]) is None
    assert extensions_command(["htop"], []) is None


# --- kernel type ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("removals", "packages"),
    [
        ([], ["kernel-rt-core"]),
        (list(DEFAULT_KERNEL_PACKAGES), []),
        (["moby-engine"], ["kernel-rt-core"]),  # no kernel package removed
        (["kernel"], ["kernel-rt"]),  # only kernel-rt-* / kernel-64k-* count
    ],
)
def test_no_reset_without_both_halves_of_a_swap(removals: list[str], packages: list[str]) -> None:
    assert kernel_override_reset_command(removals, packages) is None


def test_reset_keeps_only_the_kernel_swap_of_the_booted_deployment() -> None:
    cmd = kernel_override_reset_command(["moby-engine", "kernel", "kernel-core"], ["htop", "kernel-64k-core"])
    assert cmd == [
        "rpm-ostree",
        "override",
        "reset",
        "kernel",
        "kernel-core",
        "--uninstall",
        "kernel-64k-core",
    ]


def test_switch_command_alone() -> None:
    assert kernel_switch_command("realtime") == RT_SWITCH
    assert kernel_switch_command("64k-pages", "aarch64") == K64_SWITCH
    assert kernel_switch_command("64k-pages", "arm64") == K64_SWITCH
    assert kernel_switch_command("default") is None
    assert kernel_switch_command("bogus", "s390x") is None


@pytest.mark.parametrize("arch", ["x86_64", "amd64", "ppc64le", "s390x"])
def test_64k_pages_only_on_aarch64(arch: str) -> None:
    with pytest.raises(KernelTypeError, match=r"^64k-pages is only supported for aarch64 architecture$"):
        kernel_switch_command("64k-pages", arch)


def test_revert_follows_the_booted_deployment_over_the_old_type() -> None:
    # the old config says realtime, the booted deployment carries no swap: nothing to reset
    assert kernel_swap_revert_command("realtime", (), ()) is None
    # the old config says default, the booted deployment runs the realtime kernel
    assert kernel_swap_revert_command("default", DEFAULT_KERNEL_PACKAGES, ("kernel-rt-core", "usbguard")) == [
        "rpm-ostree", "override", "reset", *DEFAULT_KERNEL_PACKAGES, "--uninstall", "kernel-rt-core",
    ]  # fmt: skip


def test_revert_without_a_booted_deployment_is_what_the_old_type_implies() -> None:
    assert kernel_swap_revert_command("realtime") == RT_RESET
    assert kernel_swap_revert_command("default") is None
    assert kernel_swap_revert_command("") is None


def test_missing_extension_packages() -> None:
    assert missing_extension_packages(["usbguard", "htop"], ["usbguard"]) == []
    # upstream names them in the order it expects them, each time it expects one
    assert missing_extension_packages(["usbguard"], ["sysstat", "libkadm5", "usbguard", "sysstat"]) == [
        "sysstat",
        "libkadm5",
        "sysstat",
    ]


def test_staged_check_packages_follow_the_extensions_then_the_table() -> None:
    assert staged_check_packages(["usbguard", "kerberos"]) == ["usbguard", "krb5-workstation", "libkadm5"]
    assert staged_check_packages(["kernel-devel", "sysstat"]) == ["kernel-devel", "kernel-headers", "sysstat"]
    assert missing_extensions_error(["libkadm5", "sysstat"]) == (
        "the following extension packages are missing from the staged deployment: [libkadm5 sysstat]"
    )


@pytest.mark.parametrize(
    ("machine", "arch"),
    [
        ("x86_64", "x86_64"),
        ("amd64", "x86_64"),
        ("aarch64", "aarch64"),
        ("arm64", "aarch64"),
        ("s390x", "s390x"),
        ("ppc64le", "ppc64le"),
        ("ppc64el", "ppc64le"),
        ("AARCH64\n", "aarch64"),
    ],
)
def test_node_arch(machine: str, arch: str) -> None:
    assert node_arch(machine) == arch


# --- rebase and cleanup ---------------------------------------------------------------------------


def test_rebase_commands() -> None:
    url = "quay.io/openshift/os@sha256:abc"
    assert rebase_command(url) == [
        "rpm-ostree", "rebase", "--experimental",
        "ostree-unverified-registry:quay.io/openshift/os@sha256:abc",
    ]  # fmt: skip


def test_cleanup_commands() -> None:
    assert cleanup_pending_command() == ["rpm-ostree", "cleanup", "-p"]


# --- the extensions of the booted deployment (upstream's verifyExtensionPackages) ---------------


def test_every_extension_with_one_whole_package_set_passes() -> None:
    installed = ["usbguard", "krb5-workstation", "libkadm5", "vim"]
    assert extensions_not_installed(["usbguard", "kerberos"], installed) is None


def test_a_legacy_package_set_passes_too() -> None:
    # ipsec before 4.x: only the libreswan packages, no openvswitch ipsec
    legacy = ["NetworkManager-libreswan", "libreswan"]
    assert extensions_not_installed(["ipsec"], legacy) is None


def test_the_first_extension_without_a_set_is_named_with_each_sets_missing_packages() -> None:
    error = extensions_not_installed(["usbguard", "ipsec"], ["usbguard", "libreswan"])
    assert error == (
        'extension "ipsec" verification failed: no valid package set is fully installed. Tried 2 '
        "package set(s), missing packages per set: "
        "[[NetworkManager-libreswan openvswitch3.5-ipsec] [NetworkManager-libreswan]]"
    )


def test_an_extension_with_no_package_set_is_upstreams_error() -> None:
    assert extensions_not_installed(["nope"], []) == (
        'extension "nope" has no valid package sets defined'
    )
