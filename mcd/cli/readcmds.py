"""The read commands: `mcd validate`, `mcd plan`, `mcd render`, `mcd status`, `mcd version`,
and what the node commands share with them (reading an input, printing a
document, the --root-mount directory). Human output by default, `-o json|yaml` for machines.

Heavy modules are imported inside the commands so that each command pays only for what it
uses (tests/cli/test_startup.py).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

TYPE_CHECKING = False  # not typing's: its import is a few ms of every short command
if TYPE_CHECKING:  # typing's names cost `mcd --help` an import it does not otherwise need
    from pathlib import Path
    from typing import Any, TextIO

EXIT_OK, EXIT_INPUT, EXIT_UNRECONCILABLE = 0, 1, 2
POD_ROOT = "/rootfs"  # --root-mount's default: where the daemon's pod mounts the node


def read_input(path: str) -> bytes:
    """Bytes of a file argument; raises InputError naming it when unreadable."""
    from mcd.cli.inputs import read_file
    from mcd.config.findings import Finding, InputError

    try:
        return sys.stdin.buffer.read() if path == "-" else read_file(path)
    except OSError as exc:
        raise InputError(path, [Finding((), f"cannot read: {exc.strerror or exc}")]) from None


def dump(obj: Any, fmt: str, out: TextIO) -> None:
    if fmt == "yaml":
        from mcd.render.yamlout import yaml_text  # yaml.safe_dump's text, faster on large configs

        out.write(yaml_text(obj))
    else:
        import json

        out.write(json.dumps(obj, indent=2) + "\n")


def cmd_validate(args: argparse.Namespace) -> int:
    from mcd.cli.inputs import files_of
    from mcd.config.findings import InputError
    from mcd.config.ignition import ParseOptions

    # contents are streamed and measured, never kept: memory stays flat whatever the file sizes
    options = ParseOptions(max_file_size=args.max_file_size, keep_data_up_to=0)
    results: list[dict[str, Any]] = []
    failed = False
    for arg in args.files:
        try:
            names = files_of(arg)
        except InputError as exc:  # a directory with nothing to validate: that path fails
            names, failed = [], True
            results.append(_validation(arg, list(exc.findings), args.output, unreadable=True))
        for name in names:
            try:
                findings = _findings(read_input(name), name, options)
                unreadable = False
            except InputError as exc:
                findings, unreadable = list(exc.findings), True
            result = _validation(name, findings, args.output, unreadable=unreadable)
            failed = failed or not result["valid"]
            results.append(result)
    if args.output != "text":
        dump({"files": results, "valid": not failed}, args.output, sys.stdout)
    return EXIT_INPUT if failed else EXIT_OK


def _findings(data: bytes, name: str, options: Any) -> list[Any]:
    """What `mcd validate` finds in one file's objects."""
    from mcd.config.findings import Finding, InputError
    from mcd.config.load import load_objects, machineconfig_at

    findings: list[Finding] = []
    try:
        for path, obj in load_objects(data, name):
            kind = obj.get("kind")
            if kind == "MachineConfiguration":
                from mcd.policy import PolicyError, settings_from_machineconfiguration

                try:
                    settings_from_machineconfiguration(obj)
                except PolicyError as exc:
                    findings += [f.located(path) for f in exc.findings]
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
    return findings


def _validation(name: str, findings: list[Any], output: str, *, unreadable: bool) -> dict[str, Any]:
    """One file's verdict; in text, its findings printed: errors about the content on stdout (the
    answer), warnings and a file that cannot be read at all on stderr."""
    errors = [f for f in findings if f.severity == "error"]
    if output == "text":
        for f in findings:
            to_stdout = f.severity == "error" and not unreadable
            (sys.stdout if to_stdout else sys.stderr).write(f.render(name) + "\n")
    return {
        "file": name,
        "valid": not errors,
        "findings": [{"path": _path(f), "message": f.message, "severity": f.severity} for f in findings],
    }


def _path(f: Any) -> str:
    from mcd.config.findings import format_path

    return format_path(f.path)


def cmd_plan(args: argparse.Namespace) -> int:
    from mcd import policy
    from mcd.config.ignition import ParseOptions
    from mcd.config.load import load_machineconfig
    from mcd.config.machineconfig import empty_machineconfig
    from mcd.config.machineconfiguration import load_machineconfiguration
    from mcd.planner.plan import Facts, plan

    if args.root_mount is not None:
        return _plan_on_root(args)
    if args.new is None:
        # with --root-mount the node gives OLD: the hint says so
        missing = "OLD and NEW are" if args.old is None else "NEW is"
        args.parser.error(f"{missing} missing: mcd plan OLD NEW, or mcd plan --root-mount DIR NEW")
    # small files are kept (registries.conf is read), larger ones measured and decoded on demand
    options = ParseOptions(max_file_size=args.max_file_size)
    if args.pool is not None:
        old, new = (_rendered(args, path, options) for path in (args.old, args.new))
    else:
        old = (
            empty_machineconfig()
            if args.old == "-"
            else load_machineconfig(read_input(args.old), args.old, options=options)
        )
        # the files and units NEW declares as OLD does are taken over from OLD, not parsed again
        new = load_machineconfig(read_input(args.new), args.new, options=options, like=lambda _name: old)
    policies, overrides = (
        policy.settings_of(load_machineconfiguration(read_input(args.policy), args.policy))
        if args.policy
        else policy.DEFAULT_SETTINGS
    )
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


def _rendered(args: argparse.Namespace, path: str, options: Any) -> Any:
    """`mcd plan --pool`: the pool's rendered config from the MachineConfigs at `path`."""
    from mcd.cli.render import rendered_from
    from mcd.config.machineconfig import empty_machineconfig, machineconfig_from_object

    if path == "-":
        return empty_machineconfig()
    rendered = rendered_from([path], args, read_input)
    return machineconfig_from_object(rendered, path, options=options)


def cmd_render(args: argparse.Namespace) -> int:
    from mcd.cli.render import cmd_render as render

    return render(args, read_input, dump)


def _print_plan(result: Any, args: argparse.Namespace, bad_input: Sequence[tuple[str, Any]] = ()) -> int:
    from mcd.planner.plantext import plan_text

    doc = result.to_json()
    if bad_input:
        # the document still answers (upstream reports an invalid config as unreconcilable)
        doc["reconcilable"] = False
        doc["inputErrors"] = [f.render(source) for source, f in bad_input]
    if args.output == "text":
        sys.stdout.write(plan_text(result))
    else:
        dump(doc, args.output, sys.stdout)
    if bad_input:
        for source, f in bad_input:
            sys.stderr.write(f.render(source) + "\n")
        return EXIT_INPUT
    return EXIT_OK if result.reconcilable else EXIT_UNRECONCILABLE


def _plan_on_root(args: argparse.Namespace) -> int:
    """`mcd plan --root-mount DIR NEW`: what `mcd start --once-from NEW` would do on that root."""
    from mcd.cli.oncefrom import plan_once_from
    from mcd.config.findings import Finding, InputError

    rendering = [o for o in ("--pool", "--role", "--os-image-url") if _flag_given(args, o)]
    if rendering:
        message = f"{', '.join(rendering)} renders OLD and NEW from MachineConfigs: not with --root-mount"
        raise InputError("mcd plan", [Finding((), message)])
    if args.old is None:
        args.parser.error("NEW is missing: mcd plan --root-mount DIR NEW (the node at DIR gives OLD)")
    given = [o for o in ("--policy", "--legacy", "--forcefile", "--node-fips") if _flag_given(args, o)]
    if args.new is not None or given:
        what = "OLD" if args.new is not None else ", ".join(given)
        raise InputError(
            "mcd plan",
            [Finding((), f"with --root-mount, {what} comes from the node: give only NEW")],
        )
    return _print_plan(plan_once_from(host_at(args.root_mount, args.lock_timeout), args.old), args)


def _flag_given(args: argparse.Namespace, flag: str) -> bool:
    value = getattr(args, flag.lstrip("-").replace("-", "_"))
    return value not in (None, False)


def host_at(root_mount: str, lock_timeout: float) -> Any:
    from mcd.host.root import HostRoot
    from mcd.host.runner import SubprocessRunner
    from mcd.update.transaction import Host

    root = root_dir(root_mount)
    host = Host.for_root(HostRoot(root), SubprocessRunner())
    host.lock_timeout = lock_timeout
    return host


def root_dir(root_mount: str) -> Path:
    """The --root-mount directory, or an error that reads as a sentence about the flag."""
    from pathlib import Path

    from mcd.config.findings import Finding, InputError
    from mcd.host.errors import shown_path

    root = Path(root_mount)
    try:
        if root.is_dir():
            return root
    except OSError:  # a name too long for the kernel: not a directory either
        pass
    hint = f"give --root-mount DIR for a root other than {POD_ROOT}"
    if root_mount != POD_ROOT:
        hint = "give the node's root with --root-mount DIR"
    raise InputError(
        "mcd", [Finding((), f"--root-mount {shown_path(root_mount)} is not a directory ({hint})")]
    )


def cmd_status(args: argparse.Namespace) -> int:
    from mcd.cli.status import show

    show(args.root_mount, args.output, sys.stdout, dump)
    return EXIT_OK


def cmd_version(args: argparse.Namespace) -> int:
    import platform

    from mcd import __version__

    if args.output == "text":
        sys.stdout.write(f"mcd {__version__}\n")
    else:
        python = platform.python_version()
        doc = {"mcdVersion": __version__, "pythonVersion": python, "platform": sys.platform}
        dump(doc, args.output, sys.stdout)
    return EXIT_OK
