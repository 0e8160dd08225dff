"""The `mcd` argument parser: every command's flags, with an `MCD_*` environment variable for
each agent flag (flags > environment > defaults). Which function runs a command is `mcd.cli.main`'s
business: the parser only records the command's name (`args.command`)."""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from mcd import __version__
from mcd.cli.envdefaults import env_default, resolve, to_bool, to_count, to_seconds
from mcd.cli.watchflags import add_watcher_flags
from mcd.config.contents import DEFAULT_MAX_FILE_SIZE, parse_size
from mcd.host.rootlock import DEFAULT_TIMEOUT as DEFAULT_LOCK_TIMEOUT
from mcd.planner.nodefacts import HIGHLY_AVAILABLE, TOPOLOGIES

EXIT_INPUT = 1
_POOL_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_INPUT, f"{self.prog}: error: {message}\n")


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


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="mcd",
        description="Apply and explain OpenShift / Fedora CoreOS MachineConfigs (MCD compatible).",
        epilog="sandbox, sim-cluster and simulate need the simulator, which a node install does not "
        "carry: pip install ./sim from the mcd repository (make setup installs it).",
    )
    parser.add_argument("--version", action="version", version=f"mcd {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    v = sub.add_parser(
        "validate",
        help="check MachineConfigs, Ignition configs or MachineConfigurations",
        description="Validate files; print one line per finding as FILE: JSON-PATH: message. "
        "Exit 0 when every file is valid, 1 otherwise.",
    )
    v.add_argument("files", nargs="+", metavar="FILE", help="YAML or JSON file ('-' for standard input)")
    v.add_argument("-o", "--output", choices=("text", "json", "yaml"), default="text")
    _max_file_size_flag(v)

    p = sub.add_parser(
        "plan",
        help="explain what updating from OLD to NEW would do (touches nothing)",
        description="Decide, as the Machine Config Daemon would, whether OLD -> NEW is reconcilable, which "
        "post-update actions it needs and whether the node is drained; explain every changed path. "
        "Exit 0 reconcilable, 2 unreconcilable, 1 bad input.",
    )
    p.add_argument("old", metavar="OLD", help="current rendered MachineConfig ('-' for the empty config)")
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
    p.add_argument("-o", "--output", choices=("json", "yaml", "text"), default="json")
    _max_file_size_flag(p)
    p.set_defaults(parser=p)

    r = sub.add_parser(
        "render",
        help="merge a pool's MachineConfigs into its rendered MachineConfig, named as OpenShift names it",
        description="Merge the MachineConfigs labelled machineconfiguration.openshift.io/role: NAME among "
        "PATHs (files, or directories of *.yaml, *.yml and *.json files) into the pool's rendered "
        "MachineConfig, as the machine-config-controller does, named rendered-NAME-<hash> as an OpenShift "
        "cluster would name it. Exit 0, or 1 for bad input (FILE: JSON-PATH: message).",
    )
    r.add_argument("paths", nargs="+", metavar="PATH", help="MachineConfig file or directory ('-': stdin)")
    r.add_argument("--pool", required=True, type=_pool_name, metavar="NAME", help="the pool (e.g. worker)")
    _role_flag(r)
    _os_image_url_flag(r)
    r.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml")

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
                   help="where /metrics and /healthz listen (default 127.0.0.1:8797; empty: none)")
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
    s.add_argument("--resync-interval", type=float,
                   default=env_default("RESYNC_INTERVAL", 600.0, to_seconds, "a number of seconds"),
                   metavar="SECONDS", help="sync the node at least this often (default 600)")
    s.add_argument("--api-unreachable-limit", type=float,
                   default=env_default("API_UNREACHABLE_LIMIT", 300.0, to_seconds, "a number of seconds"),
                   metavar="SECONDS",
                   help="/healthz and the watchdog fail once the API server has not answered this long "
                   "(default 300)")
    add_watcher_flags(s, _bool_flag)
    _max_file_size_flag(s)
    s.add_argument("-v", "--verbose", action="count",
                   default=env_default("VERBOSE", 0, to_count, "a count of -v (0, 1, 2)"),
                   help="more logging (-v, -vv)")
    s.add_argument("--v", type=int, default=0, metavar="LEVEL",
                   help="upstream's klog verbosity (2-3: -v, 4+: -vv)")
    # what upstream's DaemonSet passes: accepted so its manifest runs mcd unchanged, then ignored
    s.add_argument("--payload-version", metavar="VERSION", help="upstream compatibility; ignored")
    s.add_argument("--tls-cipher-suites", metavar="SUITES", help="upstream compatibility; ignored")
    s.add_argument("--tls-min-version", metavar="VERSION", help="upstream compatibility; ignored")
    s.add_argument("-o", "--output", choices=("json", "yaml"), default="json")

    f = sub.add_parser(
        "firstboot-complete-machineconfig",
        help="apply the encapsulated MachineConfig on first boot",
        description="Apply the rendered MachineConfig Ignition left on the node (OS image, kernel arguments, "
        "kernel type, extensions) before the kubelet starts, then reboot.",
    )
    f.add_argument("--root-mount", default="/rootfs", metavar="DIR", help="host root (default /rootfs)")
    f.add_argument(
        "--machineconfig-file",
        default="/etc/ignition-machine-config-encapsulated.json",
        metavar="PATH",
        help="MachineConfig to apply, a path inside the root",
    )
    f.add_argument("--persist-nics", action="store_true", help="upstream compatibility; not supported")
    f.add_argument("--skip-reboot", action="store_true", help="do not reboot at the end")
    _lock_timeout_flag(f, "the whole update")
    f.add_argument("-v", "--verbose", action="count", default=0)
    f.add_argument("-o", "--output", choices=("json", "yaml"), default="json")

    c = sub.add_parser(
        "check-disk",
        help="verify the on-disk state against a config (exit 0 clean, 2 drift)",
        description="Compare files, units, masks, enablement (and on CoreOS kernel arguments and the booted "
        "image) with CONFIG, by default the config recorded in /etc/machine-config-daemon/currentconfig.",
    )
    c.add_argument(
        "config", nargs="?", metavar="CONFIG", help="MachineConfig file (default: the recorded one)"
    )
    c.add_argument("--root-mount", default="/rootfs", metavar="DIR", help="host root (default /rootfs)")
    _lock_timeout_flag(c, "shared: waits for an update to finish")
    _max_file_size_flag(c)
    c.add_argument("-v", "--verbose", action="count", default=0)
    c.add_argument("-o", "--output", choices=("text", "json", "yaml"), default="text")

    st = sub.add_parser(
        "status",
        help="what the node runs and was asked to run, its state, the last drift, a reboot owed",
        description="Read the node's status from its root alone (no cluster needed): the config applied, "
        "the desired one, the state and reason the daemon last reported, the last config drift its monitor "
        "saw and whether a reboot is owed.",
    )
    st.add_argument("--root-mount", default=_env("ROOT_MOUNT", "/"), metavar="DIR",
                    help="node root (default /: an admin on the node)")
    st.add_argument("-o", "--output", choices=("text", "json", "yaml"), default="text")

    x = sub.add_parser(
        "sandbox",
        help="create a minimal root directory to try mcd on",
        description="Create DIR (or complete it) as a minimal node root: /etc/passwd and /etc/group with "
        "root and core, and /home/core. Use it as --root-mount.",
    )
    x.add_argument("dir", metavar="DIR")
    x.add_argument(
        "--coreos", action="store_true", help="mark it as an rpm-ostree system (/run/ostree-booted)"
    )

    k = sub.add_parser(
        "sim-cluster",
        help="serve a local Kubernetes API for tests and demos (never a production path)",
        description="Serve the Kubernetes API objects mcd uses (Nodes, Pods, Events, MachineConfigs, "
        "MachineConfigPools, MachineConfiguration …) over HTTPS on loopback until SIGINT/SIGTERM. The "
        "kubeconfig (server, CA, a random bearer token) is written once the server is ready.",
    )
    k.add_argument("--kubeconfig", required=True, metavar="FILE", help="kubeconfig to write (mode 0600)")
    k.add_argument("--listen", default="127.0.0.1:0", metavar="HOST:PORT", help="default 127.0.0.1:0")
    k.add_argument("--node", action="append", default=[], metavar="NAME", help="create a Ready worker Node")
    k.add_argument("--audit-log-path", metavar="FILE", help="append one audit.k8s.io/v1 Event per request")
    k.add_argument("--user", action="append", default=[], metavar="USER=FILE",
                   help="also write a kubeconfig for USER to FILE: a bearer token, or for system:node:NAME "
                   "a client certificate (group system:nodes); a ServiceAccount is "
                   "system:serviceaccount:NS:NAME")
    k.add_argument("--rbac", action="append", default=[], metavar="PATH",
                   help="enforce RBAC with the ClusterRoles, Roles and bindings of this YAML file or "
                   "directory (e.g. manifests/; kubelets also get what the Node authorizer grants)")

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
                    help="seconds between passes (default 2)")
    pc.add_argument("--eviction-retry", type=float, default=5.0, metavar="S",
                    help="seconds before an eviction a PodDisruptionBudget refused is tried again "
                    "(default 5, as upstream's drain)")
    pc.add_argument("--once", action="store_true", help="one pass as the leader, then release the Lease")
    pc.add_argument("-v", "--verbose", action="count", default=0)

    m = sub.add_parser(
        "simulate",
        help="run the cluster agent on a sandbox node of an in-process cluster, from OLD to NEW",
        description="Start the stand-in API server and controller in this process, join a sandbox node "
        "to them on OLD, run `mcd start --node-name` as a real process, point the node at NEW and print "
        "every annotation change and Event until it is Done on NEW (exit 0; 1 on timeout).",
    )
    m.add_argument("--workdir", metavar="DIR",
                   help="kubeconfig, node root, agent log (default: a temporary directory)")
    m.add_argument("--old", default="examples/old.yaml", metavar="FILE", help="config the node joins on")
    m.add_argument("--new", metavar="FILE",
                   help="config it is updated to (examples/new.yaml; with --nodes examples/reboot.yaml)")
    m.add_argument("--node", default="worker-0", metavar="NAME", help="node name (default worker-0)")
    m.add_argument("--timeout", type=float, metavar="S",
                   help="seconds in all (default 60; with --nodes 120 + 10 per node)")
    fleet = m.add_argument_group(
        "a pool of nodes", "with --nodes: N agents, a pool controller rolling them to NEW, a timeline"
    )
    fleet.add_argument("--nodes", type=_positive, metavar="N", help="simulate a pool of N nodes")
    fleet.add_argument("--max-unavailable", type=_count_or_percent, metavar="M",
                       help="the pool's spec.maxUnavailable: a count or a percentage (default 1)")
    fleet.add_argument("--pdb", type=_pdb_spec, metavar="minAvailable=X|maxUnavailable=X",
                       help="run a workload of pods (one per node) under this PodDisruptionBudget")
    fleet.add_argument("--replicas", type=_positive, metavar="R",
                       help="the workload's pods (default one per node)")
    fleet.add_argument("--pod-start", type=float, default=2.0, metavar="S",
                       help="seconds a rescheduled pod takes to be Ready (default 2)")
    fleet.add_argument("--pool", nargs="+", metavar=("NAME", "PATH"),
                       help="the pool's name and the admin's MachineConfigs (files, directories) added "
                       "to OLD's, instead of NEW")
    fleet.add_argument("--controller", choices=("pool-controller", "stand-in"), default="pool-controller",
                       help="mcd pool-controller as a process (default), or the in-process stand-in")
    fleet.add_argument("--reboot-seconds", type=float, default=0.0, metavar="S",
                       help="how long each node stays down (NotReady, its agent stopped) in its reboot "
                       "(default 0: as long as the agent takes to start again)")
    fleet.add_argument("--kill-controller-after", type=int, default=0, metavar="K",
                       help="SIGKILL the pool controller once K nodes are Done and start another "
                       "(the rollout must lose nothing)")
    fleet.add_argument("-o", "--output", choices=("text", "json"), default="text",
                       help="json: the figures a CI gate checks")
    fleet.add_argument("--picture", metavar="FILE.svg", help="write the rollout as an SVG picture")
    return parser


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, not {text!r}")
    return int(text)


def _count_or_percent(text: str) -> int | str:
    """A Kubernetes IntOrString as maxUnavailable takes it: 2 or 25%."""
    if text.endswith("%") and text[:-1].isdigit():
        return text
    if text.isdigit():
        return int(text)
    raise argparse.ArgumentTypeError(f"expected a count or a percentage (2 or 25%), not {text!r}")


def _pdb_spec(text: str) -> dict[str, int | str]:
    key, sep, value = text.partition("=")
    if not sep or key not in ("minAvailable", "maxUnavailable"):
        raise argparse.ArgumentTypeError(f"expected minAvailable=X or maxUnavailable=X, not {text!r}")
    return {key: _count_or_percent(value)}


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line, with the environment defaults of the command that runs converted
    (EnvValueError names a variable its flag cannot take)."""
    args = build_parser().parse_args(argv)
    resolve(args)
    return args
