"""Command line: `mcd validate`, `mcd plan`, `mcd render` (kubectl-like: --help, -o json|yaml|text).

Heavy modules are imported inside the commands so that each command pays only for what it
uses: `mcd plan` must start fast.
Exit codes: 0 success, 1 bad input or usage, 2 a valid answer that is "no" (unreconcilable).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

EXIT_OK, EXIT_INPUT, EXIT_UNRECONCILABLE = 0, 1, 2
POD_ROOT = "/rootfs"  # --root-mount's default: where the daemon's pod mounts the node


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
    from mcd.policy import PolicyError, settings_from_machineconfiguration

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
    from mcd.planner.plan import Facts, plan

    if args.root_mount is not None:
        return _plan_on_root(args)
    if args.new is None:
        args.parser.error("give OLD and NEW, or --root-mount DIR and NEW")
    # small files are kept (registries.conf is read), larger ones measured and decoded on demand
    options = ParseOptions(max_file_size=args.max_file_size)
    if args.pool is not None:
        old, new = (_rendered(args, path, options) for path in (args.old, args.new))
    else:
        old = (
            empty_machineconfig()
            if args.old == "-"
            else load_machineconfig(_read(args.old), args.old, options=options)
        )
        new = load_machineconfig(_read(args.new), args.new, options=options)
    policies, overrides = (
        policy.settings_of(load_machineconfiguration(_read(args.policy), args.policy))
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
    rendered = rendered_from([path], args, _read)
    return machineconfig_from_object(rendered, path, options=options)


def cmd_render(args: argparse.Namespace) -> int:
    from mcd.cli.render import cmd_render as render

    return render(args, _read, _dump)


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
        _dump(doc, args.output, sys.stdout)
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
    given = [o for o in ("--policy", "--legacy", "--forcefile", "--node-fips") if _flag_given(args, o)]
    if args.new is not None or given:
        what = "OLD" if args.new is not None else ", ".join(given)
        raise InputError(
            "mcd plan",
            [Finding((), f"with --root-mount, {what} comes from the node: give only NEW")],
        )
    return _print_plan(plan_once_from(_host(args.root_mount, args.lock_timeout), args.old), args)


def _flag_given(args: argparse.Namespace, flag: str) -> bool:
    value = getattr(args, flag.lstrip("-").replace("-", "_"))
    return value not in (None, False)


def _host(root_mount: str, lock_timeout: float) -> Any:
    from mcd.host.root import HostRoot
    from mcd.host.runner import SubprocessRunner
    from mcd.update.transaction import Host

    root = _root_dir(root_mount)
    host = Host.for_root(HostRoot(root), SubprocessRunner())
    host.lock_timeout = lock_timeout
    return host


def _root_dir(root_mount: str) -> Path:
    """The --root-mount directory, or an error that reads as a sentence about the flag."""
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


def kubeconfig_path(flag: str, environ: Mapping[str, str]) -> str:
    """As kubectl: the flag (or MCD_KUBECONFIG), then $KUBECONFIG (a list of files, merged by the
    client as kubectl merges them); empty: the in-cluster service account."""
    return flag or environ.get("KUBECONFIG", "")


def _klog_verbosity(v: int) -> int:
    """Upstream's `--v=LEVEL` (klog) in mcd's -v counts: 2 (what OpenShift passes) is -v, 4+ is -vv."""
    return 2 if v >= 4 else 1 if v >= 2 else 0


def cmd_start(args: argparse.Namespace) -> int:
    from mcd.cli.logsetup import log_unused_flags, setup_logging

    setup_logging(max(args.verbose, _klog_verbosity(args.v)))
    log_unused_flags(args)
    if not args.once_from:
        return _start_agent(args)
    from mcd.cli.oncefrom import describe, run_once_from

    outcome = run_once_from(
        _host(args.root_mount, args.lock_timeout),
        args.once_from,
        skip_reboot=args.skip_reboot,
        max_file_size=args.max_file_size,
    )
    _dump(describe(outcome), args.output, sys.stdout)
    return EXIT_OK


def _start_agent(args: argparse.Namespace) -> int:
    """The cluster agent: sync the node until stopped; a simulated reboot restarts this process."""

    from mcd.agent.loop import Daemon
    from mcd.agent.node_apply import NodeApplier
    from mcd.agent.settings import AgentSettings
    from mcd.agent.sync import Result
    from mcd.config.findings import Finding, InputError
    from mcd.host.root import HostRoot
    from mcd.host.runner import SubprocessRunner
    from mcd.kube.client import KubeClient

    if args.config_dir and not args.node_name:
        return _start_local(args)
    if not args.node_name:
        raise InputError("--node-name", [Finding((), "required (or the NODE_NAME environment variable)")])
    _root_dir(args.root_mount)
    settings = AgentSettings(
        node_name=args.node_name,
        root_mount=args.root_mount,
        kubeconfig=kubeconfig_path(args.kubeconfig, os.environ),
        metrics_url=args.metrics_url,
        kubelet_healthz_enabled=args.kubelet_healthz_enabled,
        kubelet_healthz_endpoint=args.kubelet_healthz_endpoint,
        builtin_drainer=args.builtin_drainer,
        adopt=args.adopt,
        resync_seconds=args.resync_interval,
        drain_timeout_seconds=args.drain_timeout,
        drift_policy=args.drift_policy,
        ssh_login_monitor=args.ssh_login_monitor,
        config_dir=args.config_dir or "",
        config_grace_seconds=args.config_grace,
        api_unreachable_seconds=args.api_unreachable_limit,
    )
    root = HostRoot(Path(settings.root_mount))
    client = KubeClient.connect(
        settings.kubeconfig,
        root,
        kubelet_kubeconfig=args.kubelet_kubeconfig,
        api_endpoint_kubeconfig=args.api_endpoint_kubeconfig,
    )
    applier = NodeApplier(root, SubprocessRunner(), lock_timeout=args.lock_timeout)
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
    from mcd.agent.local import run_local

    return run_local(
        args.root_mount, args.config_dir, args.config_grace, args.drift_policy, args.lock_timeout
    )


def cmd_firstboot(args: argparse.Namespace) -> int:
    from mcd.cli.firstboot import firstboot
    from mcd.cli.logsetup import setup_logging
    from mcd.cli.oncefrom import describe
    from mcd.host.bootfiles import ENCAPSULATED_CONFIG

    setup_logging(args.verbose)
    if args.persist_nics:
        sys.stderr.write("mcd firstboot-complete-machineconfig: --persist-nics is not supported; ignored\n")
        return EXIT_OK
    outcome = firstboot(
        _host(args.root_mount, args.lock_timeout),
        args.machineconfig_file,
        default_path=args.machineconfig_file == ENCAPSULATED_CONFIG,
        skip_reboot=args.skip_reboot,
    )
    summary = describe(outcome) if outcome is not None else {"applied": False}
    _dump(summary, args.output, sys.stdout)
    return EXIT_OK


def cmd_check_disk(args: argparse.Namespace) -> int:
    from mcd.cli.checkdisk import check_disk
    from mcd.cli.logsetup import setup_logging

    setup_logging(args.verbose)
    result = check_disk(_host(args.root_mount, args.lock_timeout), args.config, args.max_file_size)
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
    from mcd.cli.status import show

    show(args.root_mount, args.output, sys.stdout, _dump)
    return EXIT_OK


SIMULATOR_HINT = (
    "the simulator (mcd-sim: sandbox roots, a stand-in API server and controller) is not installed; "
    "a node install does not carry it: pip install ./sim from the mcd repository"
)


class SimulatorMissing(RuntimeError):
    """`mcd sandbox`, `sim-cluster` or `simulate` on an install without the mcd-sim distribution."""


def _simulator_missing(command: str, exc: ImportError) -> SimulatorMissing:
    # only the absence of mcd_sim itself gets the hint; a broken install keeps its own message
    if exc.name is not None and exc.name.split(".")[0] == "mcd_sim":
        return SimulatorMissing(f"{command}: {SIMULATOR_HINT}")
    return SimulatorMissing(f"{command}: {exc}")


def cmd_sandbox(args: argparse.Namespace) -> int:
    from mcd.config.findings import Finding, InputError

    try:
        from mcd_sim.sandbox import SandboxError, make_sandbox_root
    except ImportError as exc:
        raise _simulator_missing("sandbox", exc) from None
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
        from mcd_sim.cluster import SimClusterOptions, parse_listen, parse_user, serve
    except ImportError as exc:
        raise _simulator_missing("sim-cluster", exc) from None
    listen = parse_listen(args.listen)  # ValueError: main prints "mcd: <why>", exit 1
    audit = Path(args.audit_log_path) if args.audit_log_path else None
    users = tuple(parse_user(u) for u in args.user)
    rbac = tuple(Path(p) for p in args.rbac)
    return serve(SimClusterOptions(Path(args.kubeconfig), listen, tuple(args.node), audit, users, rbac))


def cmd_simulate(args: argparse.Namespace) -> int:
    try:
        from mcd_sim.command import simulate_command
    except ImportError as exc:
        raise _simulator_missing("simulate", exc) from None
    return simulate_command(args)


def cmd_pool_controller(args: argparse.Namespace) -> int:
    from mcd.cli.logsetup import setup_logging
    from mcd.controller.run import start

    setup_logging(args.verbose)
    namespace = args.namespace or os.environ.get("POD_NAMESPACE") or "openshift-machine-config-operator"
    return start(kubeconfig_path(args.kubeconfig, os.environ), namespace, args.lease_name,
                 identity=args.identity, lease_duration=args.lease_duration, interval=args.interval,
                 once=args.once, eviction_retry=args.eviction_retry)  # fmt: skip


def _describe_error(exc: BaseException) -> str:
    """One line for a failure: control characters escaped, a path in an OS error clipped (a
    name too long for the kernel is not worth printing whole)."""
    from mcd.config.text import escape_controls
    from mcd.host.errors import os_error_text

    if isinstance(exc, OSError):
        return os_error_text(exc)
    return escape_controls(str(exc))


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "validate": cmd_validate,
    "plan": cmd_plan,
    "render": cmd_render,
    "start": cmd_start,
    "firstboot-complete-machineconfig": cmd_firstboot,
    "check-disk": cmd_check_disk,
    "status": cmd_status,
    "sandbox": cmd_sandbox,
    "sim-cluster": cmd_sim_cluster,
    "simulate": cmd_simulate,
    "pool-controller": cmd_pool_controller,
}


def main(argv: Sequence[str] | None = None) -> int:
    from mcd.cli.envdefaults import EnvValueError
    from mcd.cli.parser import build_parser, parse

    try:
        args = parse(argv)
    except EnvValueError as exc:
        sys.stderr.write(f"mcd: {exc}\n")
        return EXIT_INPUT
    command = COMMANDS.get(args.command or "")
    if command is None:
        build_parser().print_help(sys.stderr)
        return EXIT_INPUT
    from mcd.config.findings import InputError

    try:
        code: int = command(args)
        return code
    except InputError as exc:
        for line in exc.lines():
            sys.stderr.write(line + "\n")
        return EXIT_INPUT
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:  # host-side failures: a clear message, never a traceback
        from mcd.update.transaction import Unreconcilable, UpdateError

        if isinstance(exc, Unreconcilable):
            sys.stderr.write(f"mcd: unreconcilable: {exc}\n")
            return EXIT_UNRECONCILABLE
        if isinstance(exc, UpdateError | OSError | RuntimeError | ValueError | LookupError):
            sys.stderr.write(f"mcd: {_describe_error(exc)}\n")
            return EXIT_INPUT
        raise
    except KeyboardInterrupt:
        return 130
