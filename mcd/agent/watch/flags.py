"""`mcd start` flags of the watchers (drift monitor, SSH login monitor, config directory); each
defaults to its MCD_<FLAG> environment variable like every other flag of `mcd start`."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def add_watcher_flags(
    s: argparse.ArgumentParser,
    _env: Callable[..., str],
    _env_bool: Callable[[str, bool], bool],
    _bool_flag: Callable[[str], bool],
) -> None:
    s.add_argument(
        "--drift-policy",
        choices=("degrade", "observe", "heal"),
        default=_env("DRIFT_POLICY", "degrade"),
        help="what a hand change to a managed path does: degrade the node (default, as "
        "upstream), observe (Event and metric only) or heal (put it back; see docs/watchers.md)",
    )
    s.add_argument(
        "--config-dir",
        default=_env("CONFIG_DIR") or None,
        metavar="DIR",
        help="read MachineConfigs, the MachineConfiguration and the desired config's name from "
        "DIR (a ConfigMap volume or git-sync checkout) instead of the API server; without "
        "--node-name no cluster is used and the state goes to the root's records (mcd status)",
    )
    s.add_argument(
        "--config-grace",
        type=float,
        default=float(_env("CONFIG_GRACE", "5")),
        metavar="SECONDS",
        help="apply a --config-dir change once it has been stable this long (default 5)",
    )
    s.add_argument(
        "--ssh-login-monitor",
        type=_bool_flag,
        nargs="?",
        const=True,
        default=_env_bool("SSH_LOGIN_MONITOR", True),
        metavar="BOOL",
        help="annotate the node ssh=accessed after a login this boot (default true)",
    )
