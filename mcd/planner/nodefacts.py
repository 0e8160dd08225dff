"""What the planner knows about the node it plans for. Pure: a record, filled by the host probe.

`mcd plan OLD NEW` plans without a node: every host fact is then None ("unknown") and the
planner assumes a node that runs exactly the old config. `mcd plan --root-mount` and the
executor fill them from the root (`mcd.host.facts.probe`), so the plan printed is the one run.
"""

from __future__ import annotations

from mcd.config.record import record

# the control plane topologies a node can report (upstream's controlPlaneTopology values): a
# single-node cluster skips the drain; any value mcd does not know counts as HighlyAvailable
SINGLE_REPLICA = "SingleReplica"
HIGHLY_AVAILABLE = "HighlyAvailable"
TOPOLOGIES = (SINGLE_REPLICA, HIGHLY_AVAILABLE, "HighlyAvailableArbiter", "DualReplica")


@record
class Facts:
    """Node facts the planner decides from; gathered by the host probe or given by flags."""

    forcefile: bool = False
    node_fips: bool | None = None
    topology: str = HIGHLY_AVAILABLE
    coreos: bool = True
    arch: str = "x86_64"  # x86_64, aarch64, s390x or ppc64le (mcd.planner.rpmostree_args.node_arch)
    # The booted deployment (CoreOS, from `rpm-ostree status`); None when unknown, e.g. `mcd plan`
    # without a node: the OS step then assumes the node runs what the old config says.
    booted_image: str | None = None
    requested_packages: tuple[str, ...] | None = None
    requested_base_removals: tuple[str, ...] | None = None
    # `start --skip-certificate-write`: the kubelet CA is written by someone else
    skip_certificate_write: bool = False
    # --- the disk (None: unknown, the node is assumed to hold the old config exactly) ---
    # paths declared identically in the old and new config that are exactly right on disk: files,
    # and the unit files, masks and dropins of units declared identically (a re-run repairs the rest)
    matching_paths: frozenset[str] | None = None
    # units declared identically in both configs, with an enablement, that systemd reports as declared
    enablement_matches: frozenset[str] | None = None
    # core's authorized_keys.d/ignition (and its directories) are what the new config's keys make
    ssh_keys_match: bool | None = None
    # paths with a `.mcdorig` backup and no `.mcdnoorig` stamp: dropping them restores the original
    backed_up: frozenset[str] | None = None
    # units the new config rewrites that are enabled now and whose [Install] links may change
    enabled_rewrites: frozenset[str] | None = None
    # contents-less units with an enablement whose unit file systemd finds on the node
    unit_files: frozenset[str] | None = None
    # units the new config drops whose file in /etc/systemd/system is a regular file
    regular_unit_files: frozenset[str] | None = None
    # leaked enablement links (OCPBUGS-33694) present on the node
    leaked_links: frozenset[str] = frozenset()
    # permission bits of the kubelet's kubeconfig when it is a regular file
    kubeconfig_mode: int | None = None
    # accounts: core exists, the root has /etc/shadow, users whose hash already is the wanted one
    has_core: bool | None = None
    has_shadow: bool | None = None
    password_matches: frozenset[str] | None = None
    # the reason of a reboot an earlier update recorded and the node has not done yet
    owed_reboot: str | None = None
    # the legacy tuning file /etc/pivot/kernel-args (None: absent or unknown) and the running
    # kernel command line
    tuning_file: str | None = None
    cmdline: str = ""
    # RHEL CoreOS or CentOS Stream CoreOS (`is_el`): only there does upstream switch the kernel
    # type, install extensions or allowlist tuning arguments. None: unknown (`mcd plan` without a
    # node), planned as the OpenShift default, RHCOS
    el: bool | None = None


def is_el(os_release: str) -> bool:
    """Whether an os-release text names an Enterprise Linux CoreOS, as upstream's osrelease.IsEL.

    `ID` rhcos or scos, or rhel/centos with `VARIANT_ID=coreos` (the layered 4.19+ images);
    Fedora CoreOS (`ID=fedora`, `VARIANT_ID=coreos`) is not.
    """
    fields: dict[str, str] = {}
    for line in os_release.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            fields[key.strip()] = value.strip().strip("\"'")
    os_id, variant = fields.get("ID", ""), fields.get("VARIANT_ID", "")
    return os_id in ("rhcos", "scos") or (os_id in ("rhel", "centos") and variant == "coreos")


# a node about which nothing is known (`mcd plan OLD NEW`)
NO_FACTS = Facts()
