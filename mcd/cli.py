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
    from mcd.config.load import load_objects, parse_documents  # noqa: F401
    from mcd.config.machineconfig import machineconfig_from_ignition, machineconfig_from_object
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
                elif kind is None and "ignition" in obj:
                    findings += machineconfig_from_ignition(obj, name, path).located_findings()
                elif kind == "MachineConfig":
                    findings += machineconfig_from_object(obj, name, path).located_findings()
                else:
                    findings.append(
                        Finding(
                            path,
                            f"expected a MachineConfig, an Ignition config or a "
                            f"MachineConfiguration, got kind {kind!r}",
                        )
                    )
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
    from mcd.config.findings import InputError
    from mcd.config.load import load_machineconfig, load_objects
    from mcd.config.machineconfig import empty_machineconfig
    from mcd.plan import Facts, plan
    from mcd.render import plan_text

    old = empty_machineconfig() if args.old == "-" else load_machineconfig(_read(args.old), args.old)
    new = load_machineconfig(_read(args.new), args.new)
    policies = policy.DEFAULT_POLICIES
    overrides: list[str] = []
    if args.policy:
        objs = [
            (p, o)
            for p, o in load_objects(_read(args.policy), args.policy)
            if o.get("kind") == "MachineConfiguration"
        ]
        if len(objs) != 1:
            from mcd.config.findings import Finding

            raise InputError(
                args.policy, [Finding((), f"expected one MachineConfiguration, found {len(objs)}")]
            )
        path, obj = objs[0]
        try:
            policies = policy.policies_from_machineconfiguration(obj)
        except policy.PolicyError as exc:
            raise InputError(args.policy, [f.located(path) for f in exc.findings]) from None
        overrides = _storage_overrides(obj)
    facts = Facts(
        forcefile=args.forcefile,
        node_fips=None if args.node_fips is None else args.node_fips == "1",
        topology=args.topology,
    )
    result = plan(old, new, facts, policies, legacy=args.legacy, storage_overrides=overrides)
    if args.output == "text":
        sys.stdout.write(plan_text(result))
    else:
        _dump(result.to_json(), args.output, sys.stdout)
    return EXIT_OK if result.reconcilable else EXIT_UNRECONCILABLE


def _storage_overrides(obj: Any) -> list[str]:
    spec = obj.get("spec") or {}
    ivo = spec.get("irreconcilableValidationOverrides") if isinstance(spec, dict) else None
    storage = ivo.get("storage") if isinstance(ivo, dict) else None
    return [s for s in storage if isinstance(s, str)] if isinstance(storage, list) else []


def build_parser() -> argparse.ArgumentParser:
    from mcd import __version__

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
    p.add_argument("new", metavar="NEW", help="desired rendered MachineConfig")
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
        choices=("SingleReplica", "HighlyAvailable", "HighlyAvailableArbiter", "DualReplica"),
        help="control plane topology (SingleReplica skips the drain)",
    )
    p.add_argument("-o", "--output", choices=("json", "yaml", "text"), default="json")
    p.set_defaults(func=cmd_plan)
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
    except BrokenPipeError:
        return EXIT_OK
    except KeyboardInterrupt:
        return 130
