"""Command line: `mcd validate`, `mcd plan` (kubectl-like: --help everywhere, -o json|yaml|text).

Heavy modules are imported inside the commands so that each command pays only for what it
uses: `mcd plan` must start fast.
Exit codes: 0 success, 1 bad input or usage, 2 a valid answer that is "no" (unreconcilable).
"""

from __future__ import annotations

import argparse
import json
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
    from mcd.config.load import load_objects, machineconfig_at
    from mcd.policy import PolicyError, policies_from_machineconfiguration

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
                elif kind not in (None, "MachineConfig"):
                    msg = "expected a MachineConfig, an Ignition config or a MachineConfiguration"
                    findings.append(Finding(path, f"{msg}, got kind {kind!r}"))
                else:
                    try:
                        findings += machineconfig_at(path, obj, name).located_findings()
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
    from mcd.config.load import load_machineconfig
    from mcd.config.machineconfig import empty_machineconfig
    from mcd.config.machineconfiguration import load_machineconfiguration
    from mcd.plan import Facts, plan

    if args.root_mount is not None:
        return _plan_on_root(args)
    if args.new is None:
        args.parser.error("give OLD and NEW, or --root-mount DIR and NEW")
    old = empty_machineconfig() if args.old == "-" else load_machineconfig(_read(args.old), args.old)
    new = load_machineconfig(_read(args.new), args.new)
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
    return _print_plan(plan(old, new, facts, policies, legacy=args.legacy, storage_overrides=overrides), args)


def _print_plan(result: Any, args: argparse.Namespace) -> int:
    from mcd.plantext import plan_text

    if args.output == "text":
        sys.stdout.write(plan_text(result))
    else:
        _dump(result.to_json(), args.output, sys.stdout)
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

        raise InputError(root_mount, [Finding((), "--root-mount is not a directory")])
    return Host.for_root(HostRoot(root), SubprocessRunner())


def _setup_logging(verbosity: int) -> None:
    import logging

    level = logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)


def cmd_start(args: argparse.Namespace) -> int:
    from mcd.oncefrom import describe, run_once_from

    _setup_logging(args.verbose)
    if not args.once_from:
        sys.stderr.write("mcd start: cluster mode is not available yet; use --once-from FILE|URL\n")
        return EXIT_INPUT
    outcome = run_once_from(_host(args.root_mount), args.once_from, skip_reboot=args.skip_reboot)
    _dump(describe(outcome), args.output, sys.stdout)
    return EXIT_OK


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


def cmd_sandbox(args: argparse.Namespace) -> int:
    from mcd.sim.sandbox import make_sandbox_root

    root = make_sandbox_root(args.dir, coreos=args.coreos)
    sys.stdout.write(
        f"sandbox root ready at {root} (try: mcd start --once-from FILE --root-mount {root} --skip-reboot)\n"
    )
    return EXIT_OK


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
    p.set_defaults(func=cmd_plan, parser=p)

    s = sub.add_parser(
        "start",
        help="apply a config once (--once-from), as the Machine Config Daemon does",
        description="Apply a MachineConfig or Ignition config from a file or http(s) URL to the root, with "
        "the legacy post-update action (no cluster needed). Re-running with the same config changes nothing.",
    )
    s.add_argument("--once-from", metavar="FILE|URL", help="MachineConfig or Ignition config to apply")
    s.add_argument("--root-mount", default="/rootfs", metavar="DIR", help="host root (default /rootfs)")
    s.add_argument("--skip-reboot", action="store_true", help="do not reboot even when the change needs it")
    s.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-v, -vv)")
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
    return parser


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
    except Exception as exc:  # host-side failures: a clear message, never a traceback
        from mcd.execute import Unreconcilable, UpdateError

        if isinstance(exc, Unreconcilable):
            sys.stderr.write(f"mcd: unreconcilable: {exc}\n")
            return EXIT_UNRECONCILABLE
        if isinstance(exc, UpdateError | OSError | RuntimeError | ValueError | LookupError):
            sys.stderr.write(f"mcd: {exc}\n")
            return EXIT_INPUT
        raise
    except BrokenPipeError:
        return EXIT_OK
    except KeyboardInterrupt:
        return 130
