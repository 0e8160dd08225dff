"""`mcd-sim`: the simulator's own command (`sandbox`, `sim-cluster`, `simulate`).

These commands were `mcd sandbox`, `mcd sim-cluster` and `mcd simulate` until the simulator left
the product's command line (issue 26): a node install carries none of the simulator, so its
`mcd` has no command that could only fail there. Flags and behaviour are unchanged; errors go
through mcd's own reporting (one line, no traceback), prefixed `mcd-sim:`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from mcd.cli.main import run_command
from mcd.cli.parser import UsageParser, version_flag
from mcd.cli.readcmds import EXIT_OK
from mcd.config.findings import Finding, InputError

PROG = "mcd-sim"


def _add_sandbox(sub: argparse._SubParsersAction[UsageParser]) -> None:
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


def _add_sim_cluster(sub: argparse._SubParsersAction[UsageParser]) -> None:
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
    k.add_argument(
        "--user",
        action="append",
        default=[],
        metavar="USER=FILE",
        help="also write a kubeconfig for USER to FILE: a bearer token, or for system:node:NAME "
        "a client certificate (group system:nodes); a ServiceAccount is system:serviceaccount:NS:NAME",
    )
    k.add_argument(
        "--rbac",
        action="append",
        default=[],
        metavar="PATH",
        help="enforce RBAC with the ClusterRoles, Roles and bindings of this YAML file or "
        "directory (e.g. manifests/; kubelets also get what the Node authorizer grants)",
    )


def _add_simulate(sub: argparse._SubParsersAction[UsageParser]) -> None:
    m = sub.add_parser(
        "simulate",
        help="run the cluster agent on a sandbox node of an in-process cluster, from OLD to NEW",
        description="Start the stand-in API server and controller in this process, join a sandbox node "
        "to them on OLD, run `mcd start --node-name` as a real process, point the node at NEW and print "
        "every annotation change and Event until it is Done on NEW (exit 0; 1 on timeout).",
    )
    m.add_argument(
        "--workdir", metavar="DIR", help="kubeconfig, node root, agent log (default: a temporary directory)"
    )
    m.add_argument("--old", default="examples/old.yaml", metavar="FILE", help="config the node joins on")
    m.add_argument(
        "--new",
        metavar="FILE",
        help="config it is updated to (examples/new.yaml; with --nodes examples/reboot.yaml)",
    )
    m.add_argument("--node", default="worker-0", metavar="NAME", help="node name (default worker-0)")
    m.add_argument(
        "--timeout",
        type=float,
        metavar="S",
        help="seconds in all (default 60; with --nodes 120 + 10 per node)",
    )
    _add_fleet_flags(
        m.add_argument_group(
            "a pool of nodes", "with --nodes: N agents, a pool controller rolling them to NEW, a timeline"
        )
    )


def _add_fleet_flags(fleet: argparse._ArgumentGroup) -> None:
    fleet.add_argument("--nodes", type=_positive, metavar="N", help="simulate a pool of N nodes")
    fleet.add_argument(
        "--max-unavailable",
        type=_count_or_percent,
        metavar="M",
        help="the pool's spec.maxUnavailable: a count or a percentage (default 1)",
    )
    fleet.add_argument(
        "--pdb",
        type=_pdb_spec,
        metavar="minAvailable=X|maxUnavailable=X",
        help="run a workload of pods (one per node) under this PodDisruptionBudget",
    )
    fleet.add_argument(
        "--replicas", type=_positive, metavar="R", help="the workload's pods (default one per node)"
    )
    fleet.add_argument(
        "--pod-start",
        type=float,
        default=2.0,
        metavar="S",
        help="seconds a rescheduled pod takes to be Ready (default 2)",
    )
    fleet.add_argument(
        "--pool",
        nargs="+",
        metavar=("NAME", "PATH"),
        help="the pool's name and the admin's MachineConfigs (files, directories) added to OLD's, "
        "instead of NEW",
    )
    fleet.add_argument(
        "--controller",
        choices=("pool-controller", "stand-in"),
        default="pool-controller",
        help="mcd pool-controller as a process (default), or the in-process stand-in",
    )
    fleet.add_argument(
        "--reboot-seconds",
        type=float,
        default=0.0,
        metavar="S",
        help="how long each node stays down (NotReady, its agent stopped) in its reboot "
        "(default 0: as long as the agent takes to start again)",
    )
    fleet.add_argument(
        "--kill-controller-after",
        type=int,
        default=0,
        metavar="K",
        help="SIGKILL the pool controller once K nodes are Done and start another "
        "(the rollout must lose nothing)",
    )
    fleet.add_argument(
        "-o", "--output", choices=("text", "json"), default="text", help="json: the figures a CI gate checks"
    )
    fleet.add_argument("--picture", metavar="FILE.svg", help="write the rollout as an SVG picture")


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


def build_parser() -> argparse.ArgumentParser:
    parser = UsageParser(
        prog=PROG,
        description="The mcd simulator: sandbox node roots, a stand-in Kubernetes API server and "
        "controller, and whole simulated updates and rollouts. For tests, benchmarks and demos; "
        "never on a node.",
    )
    version_flag(parser, PROG)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=UsageParser)
    _add_sandbox(sub)
    _add_sim_cluster(sub)
    _add_simulate(sub)
    return parser


def cmd_sandbox(args: argparse.Namespace) -> int:
    from mcd_sim.sandbox import SandboxError, make_sandbox_root

    try:
        root = make_sandbox_root(args.dir, coreos=args.coreos)
    except SandboxError as exc:
        raise InputError(args.dir, [Finding((), str(exc))]) from None
    sys.stdout.write(
        f"sandbox root ready at {root} (try: mcd start --once-from FILE --root-mount {root} --skip-reboot)\n"
    )
    return EXIT_OK


def cmd_sim_cluster(args: argparse.Namespace) -> int:
    from mcd_sim.cluster import SimClusterOptions, parse_listen, parse_user, serve

    listen = parse_listen(args.listen)  # ValueError: "mcd-sim: <why>", exit 1
    audit = Path(args.audit_log_path) if args.audit_log_path else None
    users = tuple(parse_user(u) for u in args.user)
    rbac = tuple(Path(p) for p in args.rbac)
    return serve(SimClusterOptions(Path(args.kubeconfig), listen, tuple(args.node), audit, users, rbac))


def cmd_simulate(args: argparse.Namespace) -> int:
    from mcd_sim.command import simulate_command

    return simulate_command(args)


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "sandbox": cmd_sandbox,
    "sim-cluster": cmd_sim_cluster,
    "simulate": cmd_simulate,
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    command = COMMANDS.get(args.command or "")
    if command is None:
        parser.print_help(sys.stderr)
        return 1
    return run_command(command, args, PROG)
