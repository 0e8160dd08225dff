"""`mcd start` flags of the watchers (drift monitor, SSH login monitor, config directory); each
defaults to its MCD_<FLAG> environment variable like every other flag of `mcd start`."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from mcd.cli.envdefaults import env_default, one_of, to_bool, to_seconds

DRIFT_POLICIES = ("degrade", "observe", "heal")


def add_watcher_flags(s: argparse.ArgumentParser, bool_flag: Callable[[str], bool]) -> None:
    s.add_argument(
        "--drift-policy",
        choices=DRIFT_POLICIES,
        default=env_default("DRIFT_POLICY", "degrade", one_of(DRIFT_POLICIES), " or ".join(DRIFT_POLICIES)),
        help="what a hand change to a managed path does: degrade the node (default, as "
        "upstream), observe (Event and metric only) or heal (put it back; see docs/watchers.md)",
    )
    s.add_argument(
        "--config-dir",
        default=env_default("CONFIG_DIR", None),
        metavar="DIR",
        help="read MachineConfigs, the MachineConfiguration and the desired config's name from "
        "DIR (a ConfigMap volume or git-sync checkout) instead of the API server; without "
        "--node-name no cluster is used and the state goes to the root's records (mcd status)",
    )
    s.add_argument(
        "--config-grace",
        type=float,
        default=env_default("CONFIG_GRACE", 5.0, to_seconds, "a number of seconds"),
        metavar="SECONDS",
        help="apply a --config-dir change once it has been stable this long (default 5)",
    )
    s.add_argument(
        "--ssh-login-monitor",
        type=bool_flag,
        nargs="?",
        const=True,
        default=env_default("SSH_LOGIN_MONITOR", True, to_bool, "true or false"),
        metavar="BOOL",
        help="annotate the node ssh=accessed after a login this boot (default true)",
    )
