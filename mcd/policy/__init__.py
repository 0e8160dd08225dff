"""Post-config-change actions: NodeDisruptionPolicy (NDP) lookup and the legacy action table. Pure: no I/O.

Two tables decide what the daemon does after writing a new config without a full reboot:

* **NodeDisruptionPolicy** (every in-cluster update): the ``MachineConfiguration/cluster`` object's
  ``status.nodeDisruptionPolicyStatus.clusterPolicies``, which the operator builds by merging the
  admin's ``spec.nodeDisruptionPolicy`` over `DEFAULT_POLICIES`. Each changed file, unit and the SSH
  key set maps to a list of `Action`; `combine_actions` folds those lists into the final one.
* **Legacy table** (firstboot, ``--once-from``, HyperShift): fixed per-path rules giving
  ``none`` / ``reload crio`` / ``restart crio`` / ``reboot``.

The package is only the *per-path* part: `model` (types, limits, defaults), `parse` (API
documents), `decide` (NDP actions per change), `legacy` (the legacy table) and `action` (the
one typed value either table's choice becomes, `PostConfigAction`, and the drain rule on it). The
short-circuits that come first — forcefile present, ``osImageURL`` / kernel arguments / FIPS /
kernel type / extensions changed (and, in legacy mode, any unit change) ⇒ Reboot; no file,
unit or passwd change ⇒ ``[None]`` — are decided by `mcd.planner.plan`, which then calls the functions
here for the changed paths only.
"""

from __future__ import annotations

from mcd.policy.action import ActionKind, PostConfigAction, drain_required
from mcd.policy.decide import (
    Decision,
    actions_for_changes,
    combine_actions,
    file_decision,
    ndp_drain_required,
    sshkey_decision,
    unit_decision,
)
from mcd.policy.legacy import (
    LegacyDecision,
    combine_legacy,
    legacy_actions_for_files,
    legacy_drain_required,
    legacy_file_decision,
)
from mcd.policy.model import DEFAULT_POLICIES, Action, ClusterPolicies, FilePolicy, PolicyError, UnitPolicy
from mcd.policy.parse import (
    DEFAULT_SETTINGS,
    Settings,
    merge_policies,
    parse_cluster_policies,
    policies_from_machineconfiguration,
    settings_from_machineconfiguration,
    settings_of,
)

__all__ = [
    "DEFAULT_POLICIES",
    "DEFAULT_SETTINGS",
    "Action",
    "ActionKind",
    "ClusterPolicies",
    "Decision",
    "FilePolicy",
    "LegacyDecision",
    "PolicyError",
    "PostConfigAction",
    "Settings",
    "UnitPolicy",
    "actions_for_changes",
    "combine_actions",
    "combine_legacy",
    "drain_required",
    "file_decision",
    "legacy_actions_for_files",
    "legacy_drain_required",
    "legacy_file_decision",
    "merge_policies",
    "ndp_drain_required",
    "parse_cluster_policies",
    "policies_from_machineconfiguration",
    "settings_from_machineconfiguration",
    "settings_of",
    "sshkey_decision",
    "unit_decision",
]
