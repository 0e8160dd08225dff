"""`mcd start --once-from` and its plan (`mcd plan --root-mount`): a config applied without a cluster.

The config comes from a file or an http(s) URL and is applied to a root without any
Kubernetes API: the legacy action table decides the post-update action (upstream uses it for
once-from and firstboot), there is no drain and no node annotation.

Decision beyond upstream: once-from diffs against the config recorded on disk
(`/etc/machine-config-daemon/currentconfig`) when there is one, instead of always against the
empty config. Applying B after A then removes what A wrote and B dropped, and re-applying the
same config is a no-op.
"""

from __future__ import annotations

import logging
import urllib.request
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from mcd.config.contents import DEFAULT_MAX_FILE_SIZE
from mcd.config.findings import Finding, InputError
from mcd.config.ignition import DEFAULT_PARSE, ParseOptions
from mcd.config.load import load_machineconfig
from mcd.config.machineconfig import MachineConfig
from mcd.host import atomicfs, bootfiles, rootlock, state
from mcd.host.root import HostRoot
from mcd.planner.plan import Plan
from mcd.update.transaction import Host, Outcome, load_mc, plan_on_host, recover, update

LOG = logging.getLogger(__name__)
# the phases of a run, shown as it goes at every verbosity (mcd.cli.logsetup): a large config
# or a slow lock is otherwise silent until the final summary
PROGRESS = logging.getLogger("mcd.progress")

FETCH_TIMEOUT = 30.0
MAX_FETCH_BYTES = 64 << 20


def read_source(src: str) -> tuple[bytes, str]:
    """Bytes of a once-from source: a local file or an http(s) URL."""
    if src.startswith(("http://", "https://")):
        try:
            with urllib.request.urlopen(src, timeout=FETCH_TIMEOUT) as resp:  # the scheme is checked above
                data: bytes = resp.read(MAX_FETCH_BYTES + 1)
        except OSError as exc:
            raise InputError(src, [Finding((), f"cannot fetch: {exc}")]) from None
        if len(data) > MAX_FETCH_BYTES:
            raise InputError(src, [Finding((), f"larger than {MAX_FETCH_BYTES} bytes")])
        return data, src
    path = Path(src).absolute()
    try:
        return path.read_bytes(), src
    except OSError as exc:
        raise InputError(src, [Finding((), f"cannot read: {exc.strerror or exc}")]) from None


def current_config(root: HostRoot, options: ParseOptions = DEFAULT_PARSE) -> MachineConfig:
    """The config recorded on disk, or upstream's empty config on a node that has none."""
    return load_mc(state.read_current_config(root), state.CURRENT_CONFIG, options)


def run_once_from(
    host: Host, src: str, *, skip_reboot: bool, max_file_size: int = DEFAULT_MAX_FILE_SIZE
) -> Outcome:
    """Apply a MachineConfig or Ignition config once (upstream `start --once-from`); no decoded
    file may exceed `max_file_size` (large ones are written as streams, never held whole)."""
    options = ParseOptions(max_file_size=max_file_size)
    PROGRESS.info("once-from: reading %s", src)
    data, source = read_source(src)
    new = load_machineconfig(data, source, options=options)
    errors = [f for f in new.located_findings() if f.severity == "error"]  # what `validate` refuses
    if errors:
        raise InputError(source, errors)
    PROGRESS.info("once-from: %s is valid; taking the lock on %s", new.name or source, host.root.prefix)
    # one lock from the first read of the records to the end: another run cannot slip in
    # between recovery, reading the current config and the update
    with rootlock.hold(host.root, timeout=host.lock_timeout):
        recover(host)
        old = current_config(host.root, options)
        bare_ignition = new.raw.get("kind") != "MachineConfig"
        if bare_ignition:
            new = _files_and_units_only(new, old)
        PROGRESS.info("once-from: updating %s -> %s", old.name or "(none)", new.name or source)
        outcome = update(host, old, new, legacy=True, skip_reboot=skip_reboot)
        reboot = "rebooted" if outcome.rebooted else "reboot owed" if outcome.reboot else "no reboot"
        PROGRESS.info("once-from: applied %s (%d steps; %s)", new.name or source, len(outcome.ran), reboot)
        if bare_ignition:
            # upstream drops the encapsulated config after an Ignition once-from only: a
            # MachineConfig applied once leaves it for firstboot
            atomicfs.remove(host.root.join(bootfiles.ENCAPSULATED_CONFIG))
    return outcome


def _files_and_units_only(new: MachineConfig, old: MachineConfig) -> MachineConfig:
    """A bare Ignition config as upstream applies it once: files and units; SSH keys and passwords
    are left as they are (the users are taken as the node has them)."""
    ign, before = new.config, old.config
    if ign is None:
        return new
    users = before.users if before is not None else ()
    # the record says what the node has: the users as recorded before, not the file's
    raw = {key: value for key, value in new.raw.items() if key != "passwd"}
    passwd = _recorded_passwd(old, new)
    if passwd is not None:
        raw["passwd"] = passwd
    return replace(new, ignition=replace(new.ignition, config=replace(ign, users=users)), raw=raw)


def _recorded_passwd(old: MachineConfig, new: MachineConfig) -> object:
    """The `passwd` section of the recorded config `old`, when it can stand in `new`'s Ignition
    config: same spec major version (a 2.x section is not valid 3.x, and back)."""
    spec = old.raw.get("spec")
    config = spec.get("config") if isinstance(spec, Mapping) else None
    if not isinstance(config, Mapping):
        return None
    return config.get("passwd") if _spec_major(config) == _spec_major(new.raw) else None


def _spec_major(ign: Mapping[str, Any]) -> str:
    meta = ign.get("ignition")
    version = meta.get("version") if isinstance(meta, Mapping) else None
    return str(version).split(".", 1)[0]


def plan_once_from(host: Host, src: str) -> Plan:
    """What `run_once_from(host, src)` would do now: the same facts, config pair and action table."""
    data, source = read_source(src)
    new = load_machineconfig(data, source)
    errors = [f.located(new.ignition_path) for f in new.ignition.errors]
    if errors:
        raise InputError(source, errors)
    with rootlock.hold(host.root, shared=True, timeout=host.lock_timeout):
        return plan_on_host(host, current_config(host.root), new, legacy=True)


def describe(outcome: Outcome) -> dict[str, object]:
    """A JSON-able summary of what an update did."""
    p = outcome.plan
    return {
        "config": p.new_name,
        "from": p.old_name,
        "actions": [a.to_json() for a in p.actions],
        "reboot": {"required": outcome.reboot, "done": outcome.rebooted},
        "actionsRun": list(outcome.actions_run),
        "steps": [r.to_json() for r in outcome.ran],
        # what the config changes and what of the applied config the node had lost
        "changes": len(p.changes) + len(p.repairs),
        "repaired": list(p.repairs),
        # the plan's notes too: what the update left alone says as much as what it did
        "notes": [*p.notes, *outcome.notes],
    }
