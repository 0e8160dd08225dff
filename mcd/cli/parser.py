"""The `mcd` argument parser: every command's flags, with an `MCD_*` environment variable for
each agent flag (flags > environment > defaults). Which function runs a command is `mcd.cli.main`'s
business: the parser only records the command's name (`args.command`)."""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence

from mcd import __version__
from mcd.cli.envdefaults import env_default, one_of, resolve, to_bool, to_count, to_seconds
from mcd.cli.watchflags import add_watcher_flags

TYPE_CHECKING = False  # not typing's: its import is a few ms of every short command
if TYPE_CHECKING:
    from typing import Any, NoReturn

EXIT_INPUT = 1
_POOL_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")
# Defaults of other layers, stated here for the help text (tests/cli/test_startup.py checks that
# they agree with their owners): building the parser imports none of those layers, so `mcd --help`
# pays for argparse alone and `mcd validate` loads nothing that could touch a node.
DEFAULT_LOCK_TIMEOUT = 600.0  # mcd.host.rootlock.DEFAULT_TIMEOUT
DEFAULT_MAX_FILE_SIZE = 256 << 20  # mcd.config.contents.DEFAULT_MAX_FILE_SIZE
HIGHLY_AVAILABLE = "HighlyAvailable"  # mcd.planner.nodefacts
TOPOLOGIES = ("SingleReplica", HIGHLY_AVAILABLE, "HighlyAvailableArbiter", "DualReplica")
SubParsers = argparse._SubParsersAction


class UsageParser(argparse.ArgumentParser):
    """A usage error is one line and a hint, as kubectl prints it (not the whole usage first)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_INPUT, f"{self.prog}: error: {message}\nSee '{self.prog} --help'.\n")


class _Formatter(argparse.HelpFormatter):
    """argparse's formatter, its width found as shutil finds it: argparse imports shutil for it
    (with bz2, lzma ...) on the first add_argument, ~3 ms of every short command."""

    def __init__(
        self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width: int | None = None
    ) -> None:
        columns = _terminal_columns() - 2 if width is None else width
        super().__init__(prog, indent_increment, max_help_position, columns)


def _terminal_columns() -> int:
    """shutil.get_terminal_size().columns: $COLUMNS, else the terminal of stdout, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns > 0:
        return columns
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns or 80  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):
        return 80


def version_flag(parser: argparse.ArgumentParser, prog: str) -> None:
    parser.add_argument("--version", action="version", version=f"{prog} {__version__}")


def _env(name: str, default: str | None = "") -> Any:
    return env_default(name, default)


def _env_bool(name: str, default: bool) -> Any:
    return env_default(name, default, to_bool, "true or false")


def _bool_flag(value: str) -> bool:
    try:
        return to_bool(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}") from None


def _size(text: str) -> int:
    try:
        from mcd.config.contents import parse_size

        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _max_file_size_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-file-size",
        type=_size,
        default=DEFAULT_MAX_FILE_SIZE,
        metavar="SIZE",
        help=f"largest decoded file a config may declare (default {DEFAULT_MAX_FILE_SIZE >> 20}M; "
        "K, M, G suffixes)",
    )


def _lock_timeout_flag(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--lock-timeout",
        type=float,
        default=DEFAULT_LOCK_TIMEOUT,
        metavar="SECONDS",
        help=f"how long to wait for another mcd holding the root's lock ({what}; 0: fail at once; "
        f"default {DEFAULT_LOCK_TIMEOUT:g})",
    )


def _log_format_flag(parser: argparse.ArgumentParser, default: object = "text") -> None:
    parser.add_argument(
        "--log-format",
        choices=("text", "json"),
        default=default,
        help="text: klog's lines, I1128 12:00:00.123456 PID file.py:LINE] message (default; the "
        "journal's own lines when stderr is the journal); json: one JSON object per line",
    )


def _output_flag(parser: argparse.ArgumentParser) -> None:
    """kubectl's habit on every read command: for people by default, -o for machines."""
    parser.add_argument(
        "-o",
        "--output",
        choices=("text", "json", "yaml"),
        default="text",
        help="text: for people (default); json or yaml: for machines",
    )


# One default root for every command (docs/usage.md): where the daemon's pod mounts the node, as
# upstream's; MCD_ROOT_MOUNT=/ makes it the host's own root for an admin on the node.
def _root_mount_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--root-mount",
        default=_env("ROOT_MOUNT", "/rootfs"),
        metavar="DIR",
        help="the node's root (default $MCD_ROOT_MOUNT, else /rootfs, where the daemon's pod mounts it; "
        "on the node itself: --root-mount /)",
    )


def _pool_name(text: str) -> str:
    # a pool is a Kubernetes object: its name is a DNS subdomain, and part of the rendered name
    if not _POOL_NAME.fullmatch(text) or len(text) > 200:
        message = f"{text!r} is not a pool name (lower case letters, digits, '-' and '.')"
        raise argparse.ArgumentTypeError(message)
    return text


def _role_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--role",
        action="append",
        type=_pool_name,
        metavar="ROLE",
        help="select the MachineConfigs labelled machineconfiguration.openshift.io/role: ROLE (repeat for "
        "a custom pool's selector, e.g. --role worker --role infra; default: the pool's name)",
    )


def _os_image_url_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--os-image-url",
        metavar="URL",
        help="the cluster's OS image, which a config's osImageURL overrides (upstream's ControllerConfig "
        "spec.baseOSContainerImage; default: a ControllerConfig among the inputs, else empty)",
    )


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Every command's flags, one function per command (`_add_<command>`); given the name of a
    `command`, only that command's (what parsing its command line needs: a short command does
    not build the nine others)."""
    parser = UsageParser(
        prog="mcd",
        description="Apply and explain OpenShift / Fedora CoreOS MachineConfigs (MCD compatible).",
        epilog="The simulator (mcd-sim: sandbox roots, a stand-in API server, simulated updates and "
        "rollouts; formerly mcd sandbox, sim-cluster and simulate) is a command of its own that a node "
        "install does not carry: pip install ./sim from the mcd repository (make setup installs it).",
    )
    version_flag(parser, "mcd")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=UsageParser)
    only = _ADDERS.get(command or "")
    for add in _ADDERS.values() if only is None else (only,):
        add(sub)
    return parser

def _add_validate(sub: SubParsers[UsageParser]) -> None:
    v = sub.add_parser(
        "validate",
        help="check MachineConfigs, Ignition configs or MachineConfigurations",
        description="Validate files; print one line per finding as FILE: JSON-PATH: message. "
        "A directory gives its *.yaml, *.yml and *.json files. Exit 0 when every file is valid, 1 otherwise.",
    )
    v.add_argument(
        "files", nargs="+", metavar="PATH", help="YAML or JSON file, or a directory of them ('-': stdin)"
    )
    _output_flag(v)
    _max_file_size_flag(v)


def _add_plan(sub: SubParsers[UsageParser]) -> None:
    p = sub.add_parser(
        "plan",
        help="explain what updating from OLD to NEW would do (touches nothing)",
        description="Decide, as the Machine Config Daemon would, whether OLD -> NEW is reconcilable, which "
        "post-update actions it needs and whether the node is drained; explain every changed path. "
        "Exit 0 reconcilable, 2 unreconcilable, 1 bad input.",
    )
    # both optional for argparse: cmd_plan says which one is missing, and with --root-mount the
    # one file given is NEW (argparse would call it OLD)
    p.add_argument(
        "old", metavar="OLD", nargs="?", help="current rendered MachineConfig ('-' for the empty config)"
    )
    p.add_argument("new", metavar="NEW", nargs="?", help="desired rendered MachineConfig")
    p.add_argument(
        "--root-mount",
        metavar="DIR",
        help="plan NEW against the node at DIR (its recorded config, files and units), with the action "
        "table `mcd start --once-from` uses there: usage `mcd plan --root-mount DIR NEW`",
    )
    _lock_timeout_flag(p, "with --root-mount, shared: waits for an update to finish")
    p.add_argument(
        "--policy", metavar="FILE", help="MachineConfiguration object with the node disruption policy"
    )
    p.add_argument(
        "--legacy",
        action="store_true",
        help="use the legacy action table (firstboot / once-from) instead of the policy",
    )
    p.add_argument(
        "--forcefile",
        action="store_true",
        help="plan as if /run/machine-config-daemon-force existed on the node",
    )
    p.add_argument("--node-fips", choices=("0", "1"), help="the node's /proc/sys/crypto/fips_enabled")
    p.add_argument(
        "--topology",
        default=HIGHLY_AVAILABLE,
        choices=TOPOLOGIES,
        help="control plane topology (SingleReplica skips the drain)",
    )
    p.add_argument("--arch", default="x86_64", help="node architecture (64k-pages kernels need aarch64)")
    p.add_argument(
        "--pool",
        type=_pool_name,
        metavar="NAME",
        help="OLD and NEW are each a file or directory of the pool's own MachineConfigs, rendered first "
        "as `mcd render --pool NAME` renders them (OLD '-': the empty config)",
    )
    _role_flag(p)
    _os_image_url_flag(p)
    _output_flag(p)
    _max_file_size_flag(p)
    p.set_defaults(parser=p)


def _add_render(sub: SubParsers[UsageParser]) -> None:
    r = sub.add_parser(
        "render",
        help="merge a pool's MachineConfigs into its rendered MachineConfig, named as OpenShift names it",
        description="Merge the MachineConfigs labelled machineconfiguration.openshift.io/role: NAME among "
        "PATHs (files, or directories of *.yaml, *.yml and *.json files) into the pool's rendered "
        "MachineConfig, as the machine-config-controller does, named rendered-NAME-<hash> as an OpenShift "
        "cluster would name it: a summary, or the MachineConfig itself with -o yaml (or json). "
        "Exit 0, or 1 for bad input (FILE: JSON-PATH: message).",
    )
    r.add_argument("paths", nargs="+", metavar="PATH", help="MachineConfig file or directory ('-': stdin)")
    r.add_argument("--pool", required=True, type=_pool_name, metavar="NAME", help="the pool (e.g. worker)")
    _role_flag(r)
    _os_image_url_flag(r)
    _output_flag(r)


def _add_retry_flags(s: argparse.ArgumentParser) -> None:
    """How soon the agent tries again: a drain a budget refuses, a failed sync."""
    s.add_argument("--eviction-retry", type=float,
                   default=env_default("EVICTION_RETRY", 5.0, to_seconds, "a number of seconds"),
                   metavar="SECONDS", help="seconds between tries of a drain a PodDisruptionBudget "
                   "refuses (the built-in drainer's evictions), and how long the controller's "
                   "drain may wait before the budgets holding it are named (default 5, "
                   "upstream's eviction retry)")
    s.add_argument("--retry-start", type=float,
                   default=env_default("RETRY_START", 1.0, to_seconds, "a number of seconds"),
                   metavar="SECONDS", help="wait before a failed sync is tried again, doubling up to "
                   "60 s (default 1, upstream's node queue)")


def _add_start(sub: SubParsers[UsageParser]) -> None:
    s = sub.add_parser(
        "start",
        help="run the node agent, or apply a config once (--once-from)",
        description="Without --once-from: the cluster agent. It watches its Node, applies the "
        "MachineConfig named by the desiredConfig annotation to the root and reports through the node "
        "annotations, as the Machine Config Daemon does. With --once-from: apply a MachineConfig or Ignition "
        "config from a file or http(s) URL to the root, with the legacy post-update action (no cluster "
        "needed). Every flag defaults to an MCD_<FLAG> environment variable (--node-name also to NODE_NAME).",
    )
    s.add_argument("--once-from", metavar="FILE|URL", default=_env("ONCE_FROM", None),
                   help="MachineConfig or Ignition config to apply once")
    s.add_argument("--root-mount", default=_env("ROOT_MOUNT", "/rootfs"), metavar="DIR",
                   help="host root (default /rootfs)")
    s.add_argument("--skip-reboot", action="store_true", default=_env_bool("SKIP_REBOOT", False),
                   help="once-from: do not reboot even when the change needs it")
    _lock_timeout_flag(s, "once-from: the whole update; the agents: each update and recovery")
    s.add_argument("--node-name", default=_env("NODE_NAME", os.environ.get("NODE_NAME", "")),
                   help="the node this agent manages (env NODE_NAME)")
    s.add_argument("--kubeconfig", default=_env("KUBECONFIG"), metavar="FILE",
                   help="kubeconfig to use (default: $KUBECONFIG as kubectl reads it, else the in-cluster "
                   "service account)")
    s.add_argument("--kubelet-kubeconfig", metavar="NODE-PATH",
                   default=_env("KUBELET_KUBECONFIG", "/var/lib/kubelet/kubeconfig"),
                   help="the kubelet's kubeconfig on the node (under --root-mount): the node and its Events "
                   "are written with its credentials, as upstream's (default /var/lib/kubelet/kubeconfig; "
                   "absent or empty: with the reader's)")
    s.add_argument("--api-endpoint-kubeconfig", metavar="NODE-PATH",
                   default=_env("API_ENDPOINT_KUBECONFIG", "/etc/kubernetes/kubeconfig"),
                   help="without --kubeconfig, the in-cluster client talks to this node kubeconfig's server "
                   "(api-int on OpenShift) instead of the kubernetes Service (default "
                   "/etc/kubernetes/kubeconfig; absent or empty: the Service)")
    s.add_argument("--metrics-url", default=_env("METRICS_URL", "127.0.0.1:8797"), metavar="HOST:PORT",
                   help="where /metrics, /healthz and /readyz listen, plain HTTP (default 127.0.0.1:8797; "
                   "empty: none)")
    s.add_argument("--secure-metrics-url", default=_env("SECURE_METRICS_URL", ""), metavar="HOST:PORT",
                   help="also serve /metrics over TLS here, to callers whose bearer token may get "
                   "nodes/metrics of this node (TokenReview, SubjectAccessReview); empty: none")
    s.add_argument("--tls-cert-file", default=_env("TLS_CERT_FILE", ""), metavar="FILE",
                   help="serving certificate of --secure-metrics-url (absent: self-signed)")
    s.add_argument("--tls-private-key-file", default=_env("TLS_PRIVATE_KEY_FILE", ""), metavar="FILE",
                   help="its key")
    s.add_argument("--kubelet-healthz-enabled", type=_bool_flag, nargs="?", const=True,
                   default=_env_bool("KUBELET_HEALTHZ_ENABLED", True), metavar="BOOL",
                   help="poll the kubelet's health endpoint (default true)")
    s.add_argument("--kubelet-healthz-endpoint", default=_env("KUBELET_HEALTHZ_ENDPOINT",
                   "http://localhost:10248/healthz"), metavar="URL")
    s.add_argument("--builtin-drainer", type=_bool_flag, nargs="?", const=True,
                   default=_env_bool("BUILTIN_DRAINER", False), metavar="BOOL",
                   help="cordon and evict pods itself instead of asking the machine-config-controller")
    s.add_argument("--adopt", type=_bool_flag, nargs="?", const=True, default=_env_bool("ADOPT", False), metavar="BOOL", help="a node without mcd state: record its desiredConfig as current without writing it, report what differs")  # noqa: E501
    s.add_argument("--drain-timeout", type=float,
                   default=env_default("DRAIN_TIMEOUT", 3600.0, to_seconds, "a number of seconds"),
                   metavar="SECONDS", help="give up a drain after this long (default 3600, as upstream)")
    _add_retry_flags(s)
    s.add_argument("--resync-interval", type=float,
                   default=env_default("RESYNC_INTERVAL", 600.0, to_seconds, "a number of seconds"),
                   metavar="SECONDS", help="sync the node at least this often (default 600)")
    s.add_argument("--api-unreachable-limit", type=float,
                   default=env_default("API_UNREACHABLE_LIMIT", 300.0, to_seconds, "a number of seconds"),
                   metavar="SECONDS",
                   help="/readyz fails once the API server has not answered this long (default 300); "
                   "liveness never does")
    add_watcher_flags(s, _bool_flag)
    _max_file_size_flag(s)
    s.add_argument("-v", "--verbose", action="count",
                   default=env_default("VERBOSE", 0, to_count, "a count of -v (0, 1, 2)"),
                   help="more logging (-v, -vv)")
    _log_format_flag(s, env_default("LOG_FORMAT", "text", one_of(("text", "json")), "text or json"))
    s.add_argument("--v", type=int, default=0, metavar="LEVEL",
                   help="upstream's klog verbosity (2-3: -v, 4+: -vv)")
    # what upstream's DaemonSet passes: accepted so its manifest runs mcd unchanged, then ignored
    s.add_argument("--payload-version", metavar="VERSION", help="upstream compatibility; ignored")
    s.add_argument("--tls-cipher-suites", metavar="SUITES", help="upstream compatibility; ignored")
    s.add_argument("--tls-min-version", metavar="VERSION", help="upstream compatibility; ignored")
    s.add_argument("-o", "--output", choices=("json", "yaml"), default="json")


def _add_firstboot(sub: SubParsers[UsageParser]) -> None:
    f = sub.add_parser(
        "firstboot-complete-machineconfig",
        help="apply the encapsulated MachineConfig on first boot",
        description="Apply the rendered MachineConfig Ignition left on the node (OS image, kernel arguments, "
        "kernel type, extensions) before the kubelet starts, then reboot.",
    )
    _root_mount_flag(f)
    f.add_argument(
        "--machineconfig-file",
        default="/etc/ignition-machine-config-encapsulated.json",
        metavar="PATH",
        help="MachineConfig to apply, a path inside the root",
    )
    f.add_argument("--persist-nics", action="store_true", help="only pin the NIC names and exit")
    f.add_argument("--skip-reboot", action="store_true", help="do not reboot at the end")
    _lock_timeout_flag(f, "the whole update")
    f.add_argument("-v", "--verbose", action="count", default=0)
    _log_format_flag(f)
    f.add_argument("-o", "--output", choices=("json", "yaml"), default="json")


def _add_check_disk(sub: SubParsers[UsageParser]) -> None:
    c = sub.add_parser(
        "check-disk",
        help="verify the on-disk state against a config (exit 0 clean, 2 drift)",
        description="Compare files, units, masks, enablement (and on CoreOS kernel arguments and the booted "
        "image) with CONFIG, by default the config recorded in /etc/machine-config-daemon/currentconfig.",
    )
    c.add_argument(
        "config", nargs="?", metavar="CONFIG", help="MachineConfig file (default: the recorded one)"
    )
    _root_mount_flag(c)
    _lock_timeout_flag(c, "shared: waits for an update to finish")
    _max_file_size_flag(c)
    c.add_argument("-v", "--verbose", action="count", default=0)
    _log_format_flag(c)
    c.add_argument("-o", "--output", choices=("text", "json", "yaml"), default="text")


def _add_status(sub: SubParsers[UsageParser]) -> None:
    st = sub.add_parser(
        "status",
        help="what the node runs and was asked to run, its state, the last drift, a reboot owed",
        description="Read the node's status from its root alone (no cluster needed): the config applied, "
        "the desired one, the state and reason the daemon last reported, the last config drift its monitor "
        "saw and whether a reboot is owed.",
    )
    _root_mount_flag(st)
    _output_flag(st)


def _add_pool_controller(sub: SubParsers[UsageParser]) -> None:
    pc = sub.add_parser(
        "pool-controller",
        help="render MachineConfigPools and roll their nodes onto them (clusters without the operator)",
        description="For every MachineConfigPool: merge the MachineConfigs its selector picks into "
        "rendered-<pool>-<hash>, target it, point at most maxUnavailable nodes at a time at it, answer the "
        "daemons' drain requests and write the pool's status. One replica leads through a Lease.",
    )
    pc.add_argument("--kubeconfig", default=_env("KUBECONFIG"), metavar="FILE",
                    help="kubeconfig (default $KUBECONFIG, else the in-cluster service account)")
    pc.add_argument("--namespace", default="", metavar="NS", help="the Lease's namespace "
                    "(default $POD_NAMESPACE, else openshift-machine-config-operator)")
    pc.add_argument("--lease-name", default="machine-config-controller", metavar="NAME",
                    help="the Lease replicas elect a leader through (default machine-config-controller)")
    pc.add_argument("--identity", default="", metavar="ID",
                    help="this replica's name in the Lease (default HOSTNAME_<random>)")
    pc.add_argument("--lease-duration", type=float, default=15.0, metavar="S",
                    help="seconds a leader that stops renewing keeps the Lease (default 15)")
    pc.add_argument("--interval", type=float, default=2.0, metavar="S",
                    help="seconds between two looks at every pool from the caches (default 2)")
    pc.add_argument("--eviction-retry", type=float, default=5.0, metavar="S",
                    help="seconds before an eviction a PodDisruptionBudget refused is tried again "
                    "(default 5, as upstream's drain)")
    pc.add_argument("--metrics-url", default="", metavar="HOST:PORT", help="serve /metrics there")
    pc.add_argument("--once", action="store_true", help="one pass as the leader, then release the Lease")
    pc.add_argument("-v", "--verbose", action="count", default=0)
    _log_format_flag(pc, env_default("LOG_FORMAT", "text", one_of(("text", "json")), "text or json"))


def _add_version(sub: SubParsers[UsageParser]) -> None:
    ver = sub.add_parser(
        "version",
        help="print mcd's version (and the Python it runs on)",
        description="Print mcd's version; -o json|yaml for machines (as `kubectl version -o json`).",
    )
    _output_flag(ver)


def _add_completion(sub: SubParsers[UsageParser]) -> None:
    comp = sub.add_parser(
        "completion",
        help="print a shell completion script (bash or zsh)",
        description="Print a completion script for SHELL: commands and each command's flags. "
        "bash: source <(mcd completion bash); zsh: source <(mcd completion zsh).",
    )
    comp.add_argument("shell", choices=("bash", "zsh"), metavar="SHELL", help="bash or zsh")


# each command's name and the function that adds it, in the order `mcd --help` lists them
_ADDERS = {
    "validate": _add_validate,
    "plan": _add_plan,
    "render": _add_render,
    "start": _add_start,
    "firstboot-complete-machineconfig": _add_firstboot,
    "check-disk": _add_check_disk,
    "status": _add_status,
    "pool-controller": _add_pool_controller,
    "version": _add_version,
    "completion": _add_completion,
}


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line, with the environment defaults of the command that runs converted
    (EnvValueError names a variable its flag cannot take)."""
    words = list(sys.argv[1:] if argv is None else argv)
    # a command named first needs its own parser only; anything else (a flag, an unknown command,
    # none) gets them all, for the help and the error that lists them
    args = build_parser(words[0] if words else None).parse_args(words)
    resolve(args)
    return args
