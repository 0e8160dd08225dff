"""Command line: `mcd` and its commands (the read commands in `mcd.cli.readcmds`; kubectl-like:
--help, -o json|yaml|text).

Heavy modules are imported inside the commands so that each command pays only for what it
uses: `mcd plan` must start fast.
Exit codes: 0 success, 1 bad input or usage, 2 a valid answer that is "no" (unreconcilable).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping, Sequence

from mcd.cli.readcmds import (
    EXIT_INPUT,
    EXIT_OK,
    EXIT_UNRECONCILABLE,
    cmd_plan,
    cmd_render,
    cmd_status,
    cmd_validate,
    cmd_version,
    dump,
    host_at,
    root_dir,
)


def kubeconfig_path(flag: str, environ: Mapping[str, str]) -> str:
    """As kubectl: the flag (or MCD_KUBECONFIG), then $KUBECONFIG (a list of files, merged by the
    client as kubectl merges them); empty: the in-cluster service account."""
    return flag or environ.get("KUBECONFIG", "")


def _check_kubeconfig(flag: str) -> None:
    """A malformed or unreadable kubeconfig: one line (FILE: what is wrong), before the client."""
    from mcd.cli.kubeconfig import check_kubeconfig

    check_kubeconfig(kubeconfig_path(flag, os.environ))


def _klog_verbosity(v: int) -> int:
    """Upstream's `--v=LEVEL` (klog) in mcd's -v counts: 2 (what OpenShift passes) is -v, 4+ is -vv."""
    return 2 if v >= 4 else 1 if v >= 2 else 0


def cmd_start(args: argparse.Namespace) -> int:
    from mcd.cli.logsetup import log_unused_flags, setup_logging

    setup_logging(max(args.verbose, _klog_verbosity(args.v)), args.log_format)
    log_unused_flags(args)
    if not args.once_from:
        return _start_agent(args)
    from mcd.cli.oncefrom import describe, run_once_from

    outcome = run_once_from(
        host_at(args.root_mount, args.lock_timeout),
        args.once_from,
        skip_reboot=args.skip_reboot,
        max_file_size=args.max_file_size,
    )
    dump(describe(outcome), args.output, sys.stdout)
    return EXIT_OK


def _start_agent(args: argparse.Namespace) -> int:
    """The cluster agent: sync the node until stopped; a simulated reboot restarts this process."""
    from pathlib import Path

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
    for flag, value in (("--retry-start", args.retry_start), ("--eviction-retry", args.eviction_retry)):
        if not value > 0:  # zero would retry in a tight loop
            raise InputError(flag, [Finding((), f"must be a number of seconds above 0, not {value}")])
    root_dir(args.root_mount)
    _check_kubeconfig(args.kubeconfig)
    settings = AgentSettings(
        node_name=args.node_name,
        root_mount=args.root_mount,
        kubeconfig=kubeconfig_path(args.kubeconfig, os.environ),
        metrics_url=args.metrics_url,
        secure_metrics_url=args.secure_metrics_url,
        tls_cert_file=args.tls_cert_file,
        tls_key_file=args.tls_private_key_file,
        kubelet_healthz_enabled=args.kubelet_healthz_enabled,
        kubelet_healthz_endpoint=args.kubelet_healthz_endpoint,
        builtin_drainer=args.builtin_drainer,
        adopt=args.adopt,
        resync_seconds=args.resync_interval,
        drain_timeout_seconds=args.drain_timeout,
        eviction_retry_seconds=args.eviction_retry,
        retry_start_seconds=args.retry_start,
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
    daemon = Daemon(settings, client, applier)
    result = daemon.run()
    client.close()
    if result is Result.SIMULATED_REBOOT and daemon.signals.received is None:
        # the post-boot path of a real node: a new process of this very mcd, which starts with
        # the boot checks (a SIGTERM meanwhile ends the process instead)
        from mcd.host.reboot import restart_process

        restart_process(sys.argv[1:])
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

    setup_logging(args.verbose, args.log_format)
    if args.persist_nics:
        # only the NIC names are pinned, before the OS update the run without the flag makes
        from mcd.host import nicnames

        nicnames.for_host(host_at(args.root_mount, args.lock_timeout))
        return EXIT_OK
    outcome = firstboot(
        host_at(args.root_mount, args.lock_timeout),
        args.machineconfig_file,
        default_path=args.machineconfig_file == ENCAPSULATED_CONFIG,
        skip_reboot=args.skip_reboot,
    )
    summary = describe(outcome) if outcome is not None else {"applied": False}
    dump(summary, args.output, sys.stdout)
    return EXIT_OK


def cmd_check_disk(args: argparse.Namespace) -> int:
    from mcd.cli.checkdisk import check_disk
    from mcd.cli.logsetup import setup_logging

    setup_logging(args.verbose, args.log_format)
    result = check_disk(host_at(args.root_mount, args.lock_timeout), args.config, args.max_file_size)
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
        dump(obj, args.output, sys.stdout)
    return EXIT_OK if result.clean else EXIT_UNRECONCILABLE


def cmd_pool_controller(args: argparse.Namespace) -> int:
    from mcd.cli.logsetup import setup_logging
    from mcd.controller.run import start

    setup_logging(args.verbose, args.log_format)
    namespace = args.namespace or os.environ.get("POD_NAMESPACE") or "openshift-machine-config-operator"
    try:
        return start(
            kubeconfig_path(args.kubeconfig, os.environ),
            namespace,
            args.lease_name,
            identity=args.identity,
            lease_duration=args.lease_duration,
            interval=args.interval,
            once=args.once,
            eviction_retry=args.eviction_retry,
            metrics_url=args.metrics_url,
        )
    except ValueError:
        raise  # a flag's value, checked first by start: its own sentence
    except Exception:
        # a malformed kubeconfig fails inside the client (a YAML traceback, a type error): said
        # as one line naming the file instead; a sound one lets the failure through as it was
        _check_kubeconfig(args.kubeconfig)
        raise


def _describe_error(exc: BaseException) -> str:
    """One line for a failure: control characters escaped, a path in an OS error clipped (a
    name too long for the kernel is not worth printing whole)."""
    from mcd.config.text import escape_controls
    from mcd.host.errors import os_error_text

    if isinstance(exc, OSError):
        return os_error_text(exc)
    return escape_controls(str(exc))


def cmd_completion(args: argparse.Namespace) -> int:
    from mcd.cli.completion import script
    from mcd.cli.parser import build_parser

    sys.stdout.write(script(build_parser(), args.shell))
    return EXIT_OK


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "validate": cmd_validate,
    "plan": cmd_plan,
    "render": cmd_render,
    "start": cmd_start,
    "firstboot-complete-machineconfig": cmd_firstboot,
    "check-disk": cmd_check_disk,
    "status": cmd_status,
    "version": cmd_version,
    "completion": cmd_completion,
    "pool-controller": cmd_pool_controller,
}


# The simulator's commands left mcd for the mcd-sim distribution's own command (issue 26). A
# stub that says where they went, without loading the simulator: mcd must not depend on it, and a
# shim that ran them would keep that dependency in another form.
MOVED_TO_SIMULATOR = ("sandbox", "sim-cluster", "simulate")
EXIT_MOVED = 2


def _moved(command: str) -> int:
    sys.stderr.write(
        f"mcd: `mcd {command}` moved to the simulator's own command: `mcd-sim {command}` "
        "(pip install ./sim from the mcd repository)\n"
    )
    return EXIT_MOVED


def main(argv: Sequence[str] | None = None) -> int:
    from mcd.cli.envdefaults import EnvValueError
    from mcd.cli.parser import build_parser, parse

    words = list(sys.argv[1:] if argv is None else argv)
    if words and words[0] in MOVED_TO_SIMULATOR:
        return _moved(words[0])
    try:
        args = parse(words)
    except EnvValueError as exc:
        sys.stderr.write(f"mcd: {exc}\n")
        return EXIT_INPUT
    command = COMMANDS.get(args.command or "")
    if command is None:
        build_parser().print_help(sys.stderr)
        return EXIT_INPUT
    return run_command(command, args, "mcd")


def run_command(command: Callable[[argparse.Namespace], int], args: argparse.Namespace, prog: str) -> int:
    """Run a command; bad input and host-side failures are one line on stderr, never a traceback
    (also `mcd-sim`'s commands, with their own prefix)."""
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
        # an update's errors can come only from a command that loaded the update layer: a pure
        # command's failure does not load it (and the host layer under it) just to rule them out
        transaction = sys.modules.get("mcd.update.transaction")
        if transaction is not None and isinstance(exc, transaction.Unreconcilable):
            sys.stderr.write(f"{prog}: unreconcilable: {exc}\n")
            return EXIT_UNRECONCILABLE
        update_error = (transaction.UpdateError,) if transaction is not None else ()
        if isinstance(exc, (*update_error, OSError, RuntimeError, ValueError, LookupError)):
            sys.stderr.write(f"{prog}: {_describe_error(exc)}\n")
            return EXIT_INPUT
        raise
    except KeyboardInterrupt:
        return 130
