"""Command line: `mcd validate`, `mcd plan` (kubectl-like: --help everywhere, -o json|yaml|text).

Heavy modules are imported inside the commands so that each command pays only for what it
uses: `mcd plan` must start fast.
Exit codes: 0 success, 1 bad input or usage, 2 a valid answer that is "no" (unreconcilable).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO

EXIT_OK, EXIT_INPUT, EXIT_UNRECONCILABLE = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_INPUT, f"{self.prog}: error: {message}\n")


def _read(path: str) -> bytes:
    """Bytes of a file argument; raises InputError naming it when unreadable."""
    from mcd.config.findings import Finding, InputError

    try:
        return sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except OSError as exc:
        raise InputError(path, [Finding((), f"cannot read: {exc.strerror or exc}")]) from None


def _dump(obj: Any, fmt: str, out: TextIO) -> None:
    if fmt == "yaml":
        import yaml

        out.write(yaml.safe_dump(obj, sort_keys=False, default_flow_style=False))
    else:
        out.write(json.dumps(obj, indent=2) + "\n")


def cmd_validate(args: argparse.Namespace) -> int:
    from mcd.config.findings import Finding, InputError
    from mcd.config.ignition import ParseOptions
    from mcd.config.load import load_objects, machineconfig_at
    from mcd.config.overrides import storage_overrides
    from mcd.policy import PolicyError, policies_from_machineconfiguration

    # contents are streamed and measured, never kept: memory stays flat whatever the file sizes
    options = ParseOptions(max_file_size=args.max_file_size, keep_data_up_to=0)
    results: list[dict[str, Any]] = []
    failed = False
    for name in args.files:
        findings: list[Finding] = []
        try:
            for path, obj in load_objects(_read(name), name):
                kind = obj.get("kind")
                if kind == "MachineConfiguration":
                    try:
                        policies_from_machineconfiguration(obj)
                    except PolicyError as exc:
                        findings += [f.located(path) for f in exc.findings]
                    findings += [f.located(path) for f in storage_overrides(obj)[1]]
                elif kind not in (None, "MachineConfig"):
                    msg = "expected a MachineConfig, an Ignition config or a MachineConfiguration"
                    findings.append(Finding(path, f"{msg}, got kind {kind!r}"))
                else:
                    try:
                        findings += machineconfig_at(path, obj, name, options=options).located_findings()
                    except InputError as exc:  # one bad object does not hide the others' findings
                        findings += list(exc.findings)
        except InputError as exc:
            findings += list(exc.findings)
        errors = [f for f in findings if f.severity == "error"]
        failed = failed or bool(errors)
        results.append(
            {
                "file": name,
                "valid": not errors,
                "findings": [
                    {"path": _path(f), "message": f.message, "severity": f.severity} for f in findings
                ],
            }
        )
        if args.output == "text":
            for f in findings:
                (sys.stdout if f.severity == "error" else sys.stderr).write(f.render(name) + "\n")
    if args.output != "text":
        _dump({"files": results, "valid": not failed}, args.output, sys.stdout)
    return EXIT_INPUT if failed else EXIT_OK


def _path(f: Any) -> str:
    from mcd.config.findings import format_path

    return format_path(f.path)


def cmd_plan(args: argparse.Namespace) -> int:
    from mcd import policy
    from mcd.config.ignition import ParseOptions
    from mcd.config.load import load_machineconfig
    from mcd.config.machineconfig import empty_machineconfig
    from mcd.config.machineconfiguration import load_machineconfiguration
    from mcd.plan import Facts, plan

    if args.root_mount is not None:
        return _plan_on_root(args)
    if args.new is None:
        args.parser.error("give OLD and NEW, or --root-mount DIR and NEW")
    # small files are kept (registries.conf is read), larger ones measured and decoded on demand
    options = ParseOptions(max_file_size=args.max_file_size)
    old = (
        empty_machineconfig()
        if args.old == "-"
        else load_machineconfig(_read(args.old), args.old, options=options)
    )
    new = load_machineconfig(_read(args.new), args.new, options=options)
    policies = policy.DEFAULT_POLICIES
    overrides: tuple[str, ...] = ()
    if args.policy:
        machineconfiguration = load_machineconfiguration(_read(args.policy), args.policy)
        policies = policy.policies_of(machineconfiguration)
        overrides = machineconfiguration.storage_overrides
    facts = Facts(
        forcefile=args.forcefile,
        node_fips=None if args.node_fips is None else args.node_fips == "1",
        topology=args.topology,
        arch=args.arch,
    )
    result = plan(old, new, facts, policies, legacy=args.legacy, storage_overrides=overrides)
    # `validate`'s errors (the new config), and what keeps the old one from parsing at all
    bad_input = [(args.new, f) for f in new.located_findings() if f.severity == "error"]
    if old.ignition.stage == "parse":
        bad_input = [(args.old, f) for f in old.located_findings() if f.severity == "error"] + bad_input
    return _print_plan(result, args, bad_input)


def _print_plan(result: Any, args: argparse.Namespace, bad_input: Sequence[tuple[str, Any]] = ()) -> int:
    from mcd.plantext import plan_text

    doc = result.to_json()
    if bad_input:
        # the document still answers (upstream reports an invalid config as unreconcilable)
        doc["reconcilable"] = False
        doc["inputErrors"] = [f.render(source) for source, f in bad_input]
    if args.output == "text":
        sys.stdout.write(plan_text(result))
    else:
        _dump(doc, args.output, sys.stdout)
    if bad_input:
        for source, f in bad_input:
            sys.stderr.write(f.render(source) + "\n")
        return EXIT_INPUT
    return EXIT_OK if result.reconcilable else EXIT_UNRECONCILABLE


def _plan_on_root(args: argparse.Namespace) -> int:
    """`mcd plan --root-mount DIR NEW`: what `mcd start --once-from NEW` would do on that root."""
    from mcd.config.findings import Finding, InputError
    from mcd.oncefrom import plan_once_from

    given = [o for o in ("--policy", "--legacy", "--forcefile", "--node-fips") if _flag_given(args, o)]
    if args.new is not None or given:
        what = "OLD" if args.new is not None else ", ".join(given)
        raise InputError(
            "mcd plan",
            [Finding((), f"with --root-mount, {what} comes from the node: give only NEW")],
        )
    return _print_plan(plan_once_from(_host(args.root_mount), args.old), args)


def _flag_given(args: argparse.Namespace, flag: str) -> bool:
    value = getattr(args, flag.lstrip("-").replace("-", "_"))
    return value not in (None, False)


def _host(root_mount: str) -> Any:
    from mcd.execute import Host
    from mcd.host.root import HostRoot
    from mcd.host.runner import SubprocessRunner

    root = Path(root_mount)
    if not root.is_dir():
        from mcd.config.findings import Finding, InputError

        raise InputError(
            root_mount, [Finding((), "not a directory (give the node's root with --root-mount DIR)")]
        )
    return Host.for_root(HostRoot(root), SubprocessRunner())


def _setup_logging(verbosity: int) -> None:
    import logging

    level = logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    # one line per HTTP connection says nothing an operator needs, even at -vv
    logging.getLogger("urllib3").setLevel(logging.WARNING)


def cmd_start(args: argparse.Namespace) -> int:
    _setup_logging(max(args.verbose, args.v))
    if not args.once_from:
        return _start_agent(args)
    from mcd.oncefrom import describe, run_once_from

    outcome = run_once_from(_host(args.root_mount), args.once_from, skip_reboot=args.skip_reboot)
    _dump(describe(outcome), args.output, sys.stdout)
    return EXIT_OK


def _start_agent(args: argparse.Namespace) -> int:
    """The cluster agent: sync the node until stopped; a simulated reboot restarts this process."""
    import os

    from mcd.agent.node_apply import NodeApplier
    from mcd.agent.settings import AgentSettings
    from mcd.config.findings import Finding, InputError
    from mcd.daemon import Daemon
    from mcd.host.root import HostRoot
    from mcd.host.runner import SubprocessRunner
    from mcd.kube.client import KubeClient
    from mcd.sync import Result

    if args.config_dir and not args.node_name:
        return _start_local(args)
    if not args.node_name:
        raise InputError("--node-name", [Finding((), "required (or the NODE_NAME environment variable)")])
    if not Path(args.root_mount).is_dir():
        raise InputError(args.root_mount, [Finding((), "--root-mount is not a directory")])
    settings = AgentSettings(
        node_name=args.node_name,
        root_mount=args.root_mount,
        kubeconfig=args.kubeconfig,
        metrics_url=args.metrics_url,
        kubelet_healthz_enabled=args.kubelet_healthz_enabled,
        kubelet_healthz_endpoint=args.kubelet_healthz_endpoint,
        builtin_drainer=args.builtin_drainer,
        resync_seconds=args.resync_interval,
        drain_timeout_seconds=args.drain_timeout,
        drift_policy=args.drift_policy,
        ssh_login_monitor=args.ssh_login_monitor,
        config_dir=args.config_dir or "",
        config_grace_seconds=args.config_grace,
    )
    client = KubeClient.from_kubeconfig(settings.kubeconfig or None)
    applier = NodeApplier(HostRoot(Path(settings.root_mount)), SubprocessRunner())
    result = Daemon(settings, client, applier).run()
    client.close()
    if result is Result.SIMULATED_REBOOT:
        # the post-boot path of a real node: a new process, which starts with the boot checks
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(sys.executable, [sys.executable, "-m", "mcd", *sys.argv[1:]])
    return EXIT_OK


def _start_local(args: argparse.Namespace) -> int:
    """`--config-dir` without a cluster: configs from the directory, state in the root's records."""
    from mcd.localagent import run_local

    return run_local(args.root_mount, args.config_dir, args.config_grace, args.drift_policy)


def _env(name: str, default: str = "") -> str:
    import os

    return os.environ.get(f"MCD_{name}", default)


def _env_bool(name: str, default: bool) -> bool:
    value = _env(name, "true" if default else "false").strip().lower()
    return value in ("1", "true", "yes", "on")


def _bool_flag(value: str) -> bool:
    v = value.strip().lower()
    if v in ("1", "true", "yes", "on"):
        return True
    if v in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")


def cmd_firstboot(args: argparse.Namespace) -> int:
    from mcd.firstboot import firstboot
    from mcd.host.state import ENCAPSULATED_CONFIG
    from mcd.oncefrom import describe

    _setup_logging(args.verbose)
    if args.persist_nics:
        sys.stderr.write("mcd firstboot-complete-machineconfig: --persist-nics is not supported; ignored\n")
        return EXIT_OK
    outcome = firstboot(
        _host(args.root_mount),
        args.machineconfig_file,
        default_path=args.machineconfig_file == ENCAPSULATED_CONFIG,
        skip_reboot=args.skip_reboot,
    )
    summary = describe(outcome) if outcome is not None else {"applied": False}
    _dump(summary, args.output, sys.stdout)
    return EXIT_OK


def cmd_check_disk(args: argparse.Namespace) -> int:
    from mcd.checkdisk import check_disk

    _setup_logging(args.verbose)
    result = check_disk(_host(args.root_mount), args.config)
    if args.output == "text":
        if result.clean:
            sys.stdout.write(f"on-disk state matches {result.config_name}\n")
        else:
            sys.stdout.write(result.reason() + "\n")
            for e in result.errors[1:]:
                sys.stdout.write(f"  also: {e}\n")
    else:
        obj = {
            "config": result.config_name,
            "clean": result.clean,
            "errors": list(result.errors),
            "reason": "" if result.clean else result.reason(),
        }
        _dump(obj, args.output, sys.stdout)
    return EXIT_OK if result.clean else EXIT_UNRECONCILABLE


def cmd_status(args: argparse.Namespace) -> int:
    from mcd.status import show

    show(args.root_mount, args.output, sys.stdout, _dump)
    return EXIT_OK


def cmd_sandbox(args: argparse.Namespace) -> int:
    from mcd.config.findings import Finding, InputError
    from mcd.sim.sandbox import SandboxError, make_sandbox_root

    try:
        root = make_sandbox_root(args.dir, coreos=args.coreos)
    except SandboxError as exc:
        raise InputError(args.dir, [Finding((), str(exc))]) from None
    sys.stdout.write(
        f"sandbox root ready at {root} (try: mcd start --once-from FILE --root-mount {root} --skip-reboot)\n"
    )
    return EXIT_OK


def cmd_sim_cluster(args: argparse.Namespace) -> int:
    try:
        from mcd.sim.cluster import SimClusterOptions, parse_listen, serve
    except ImportError as exc:  # cryptography comes with the `sim` extra only
        sys.stderr.write(f"mcd sim-cluster: needs the sim extra (pip install 'mcd[sim]'): {exc}\n")
        return EXIT_INPUT
    listen = parse_listen(args.listen)  # ValueError: main prints "mcd: <why>", exit 1
    audit = Path(args.audit_log_path) if args.audit_log_path else None
    return serve(SimClusterOptions(Path(args.kubeconfig), listen, tuple(args.node), audit))


def cmd_simulate(args: argparse.Namespace) -> int:
    try:
        from mcd.sim.simulate import SimulateOptions, simulate
    except ImportError as exc:  # cryptography comes with the `sim` extra only
        sys.stderr.write(f"mcd simulate: needs the sim extra (pip install 'mcd[sim]'): {exc}\n")
        return EXIT_INPUT
    workdir = Path(args.workdir) if args.workdir else None
    return simulate(SimulateOptions(workdir, Path(args.old), Path(args.new), args.node, args.timeout))


def _size(text: str) -> int:
    from mcd.config.contents import parse_size

    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _max_file_size_flag(parser: argparse.ArgumentParser) -> None:
    from mcd.config.contents import DEFAULT_MAX_FILE_SIZE

    parser.add_argument(
        "--max-file-size",
        type=_size,
        default=DEFAULT_MAX_FILE_SIZE,
        metavar="SIZE",
        help=f"largest decoded file a config may declare (default {DEFAULT_MAX_FILE_SIZE >> 20}M; "
        "K, M, G suffixes)",
    )


def build_parser() -> argparse.ArgumentParser:
    from mcd import __version__
    from mcd.nodefacts import TOPOLOGIES

    parser = _Parser(
        prog="mcd",
        description="Apply and explain OpenShift / Fedora CoreOS MachineConfigs (MCD compatible).",
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
    v.set_defaults(func=cmd_validate)

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
        default="HighlyAvailable",
        choices=TOPOLOGIES,
        help="control plane topology (SingleReplica skips the drain)",
    )
    p.add_argument("--arch", default="x86_64", help="node architecture (64k-pages kernels need aarch64)")
    p.add_argument("-o", "--output", choices=("json", "yaml", "text"), default="json")
    _max_file_size_flag(p)
    p.set_defaults(func=cmd_plan, parser=p)

    s = sub.add_parser(
        "start",
        help="run the node agent, or apply a config once (--once-from)",
        description="Without --once-from: the cluster agent. It watches its Node, applies the "
        "MachineConfig named by the desiredConfig annotation to the root and reports through the node "
        "annotations, as the Machine Config Daemon does. With --once-from: apply a MachineConfig or Ignition "
        "config from a file or http(s) URL to the root, with the legacy post-update action (no cluster "
        "needed). Every flag defaults to an MCD_<FLAG> environment variable (--node-name also to NODE_NAME).",
    )
    s.add_argument("--once-from", metavar="FILE|URL", default=_env("ONCE_FROM") or None,
                   help="MachineConfig or Ignition config to apply once")
    s.add_argument("--root-mount", default=_env("ROOT_MOUNT", "/rootfs"), metavar="DIR",
                   help="host root (default /rootfs)")
    s.add_argument("--skip-reboot", action="store_true", default=_env_bool("SKIP_REBOOT", False),
                   help="once-from: do not reboot even when the change needs it")
    import os as _os

    s.add_argument("--node-name", default=_env("NODE_NAME") or _os.environ.get("NODE_NAME", ""),
                   help="the node this agent manages (env NODE_NAME)")
    s.add_argument("--kubeconfig", default=_env("KUBECONFIG"), metavar="FILE",
                   help="kubeconfig to use instead of the in-cluster service account")
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
    s.add_argument("--drain-timeout", type=float, default=float(_env("DRAIN_TIMEOUT", "3600")),
                   metavar="SECONDS", help="give up a drain after this long (default 3600, as upstream)")
    s.add_argument("--resync-interval", type=float, default=float(_env("RESYNC_INTERVAL", "600")),
                   metavar="SECONDS", help="sync the node at least this often (default 600)")
    from mcd.watch.flags import add_watcher_flags

    add_watcher_flags(s, _env, _env_bool, _bool_flag)
    s.add_argument("-v", "--verbose", action="count", default=int(_env("VERBOSE", "0") or 0),
                   help="more logging (-v, -vv)")
    s.add_argument("--v", type=int, default=0, metavar="LEVEL", help="upstream's klog verbosity (2+: -v)")
    s.add_argument("-o", "--output", choices=("json", "yaml"), default="json")
    s.set_defaults(func=cmd_start)

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
    f.add_argument("-v", "--verbose", action="count", default=0)
    f.add_argument("-o", "--output", choices=("json", "yaml"), default="json")
    f.set_defaults(func=cmd_firstboot)

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
    c.add_argument("-v", "--verbose", action="count", default=0)
    c.add_argument("-o", "--output", choices=("text", "json", "yaml"), default="text")
    c.set_defaults(func=cmd_check_disk)

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
    st.set_defaults(func=cmd_status)

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
    x.set_defaults(func=cmd_sandbox)

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
    k.set_defaults(func=cmd_sim_cluster)

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
    m.add_argument("--new", default="examples/new.yaml", metavar="FILE", help="config it is updated to")
    m.add_argument("--node", default="worker-0", metavar="NAME", help="node name (default worker-0)")
    m.add_argument("--timeout", type=float, default=60.0, metavar="S", help="seconds in all (default 60)")
    m.set_defaults(func=cmd_simulate)
    return parser


def _describe_error(exc: BaseException) -> str:
    """One line for a failure: control characters escaped, a path in an OS error clipped (a
    name too long for the kernel is not worth printing whole)."""
    from mcd.config.text import escape_controls, shown

    if isinstance(exc, OSError) and exc.strerror and isinstance(exc.filename, str | bytes):
        return f"{exc.strerror}: {shown(os.fsdecode(exc.filename), 120)}"
    return escape_controls(str(exc))


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help(sys.stderr)
        return EXIT_INPUT
    from mcd.config.findings import InputError

    try:
        code: int = args.func(args)
        return code
    except InputError as exc:
        for line in exc.lines():
            sys.stderr.write(line + "\n")
        return EXIT_INPUT
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:  # host-side failures: a clear message, never a traceback
        from mcd.execute import Unreconcilable, UpdateError

        if isinstance(exc, Unreconcilable):
            sys.stderr.write(f"mcd: unreconcilable: {exc}\n")
            return EXIT_UNRECONCILABLE
        if isinstance(exc, UpdateError | OSError | RuntimeError | ValueError | LookupError):
            sys.stderr.write(f"mcd: {_describe_error(exc)}\n")
            return EXIT_INPUT
        raise
    except KeyboardInterrupt:
        return 130
