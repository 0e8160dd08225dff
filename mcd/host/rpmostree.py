"""rpm-ostree client: OS changes run through the Runner, `status --json` parsed into typed values.

Command lines come from the pure builders in `mcd.planner.rpmostree_args` and
`mcd.planner.kargs`; this module only runs them (as client `machine-config-operator`, so
rpm-ostreed's journal names the caller), wraps failures into RpmOstreeError and retries the
rebase, which pulls over the network (spec §5.2).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mcd.config.ostables import SUPPORTED_EXTENSIONS
from mcd.config.yamllib import yaml
from mcd.host.pullsecret import link_pull_secret
from mcd.host.root import HostRoot
from mcd.host.runner import CommandError, CommandResult, Runner
from mcd.planner.rpmostree_args import (
    NO_STAGED_DEPLOYMENT,
    cleanup_pending_command,
    cleanup_rollback_command,
    missing_extension_packages,
    missing_extensions_error,
    rebase_command,
)

log = logging.getLogger(__name__)

CLIENT_ID = "machine-config-operator"
# Upstream's rebase backoff (10s doubling, capped at 60s, 7 attempts): the waits between attempts.
REBASE_RETRY_DELAYS: tuple[float, ...] = (10, 20, 40, 60, 60, 60)
PIVOT_PREFIX = "pivot://"
# the text of the error Kubernetes' wait.ExponentialBackoff returns when its steps run out
WAIT_TIMEOUT = "timed out waiting for the condition"


class RpmOstreeError(RuntimeError):
    """An rpm-ostree command failed or answered something unreadable; `.result` when a command failed."""

    def __init__(self, message: str, result: CommandResult | None = None) -> None:
        super().__init__(message)
        self.result = result


# --- status --json ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Deployment:
    """One deployment of `rpm-ostree status --json`: the fields the daemon reads (spec §5.2)."""

    id: str = ""
    osname: str = ""
    checksum: str = ""
    booted: bool = False
    staged: bool = False
    pinned: bool = False
    serial: int = 0
    timestamp: int | None = None
    version: str | None = None
    base_checksum: str | None = None
    origin: str | None = None
    custom_origin: tuple[str, ...] = ()
    container_image_reference: str | None = None
    container_image_reference_digest: str | None = None
    requested_packages: tuple[str, ...] = ()
    requested_base_removals: tuple[str, ...] = ()
    requested_local_packages: tuple[str, ...] = ()
    requested_local_fileoverride_packages: tuple[str, ...] = ()
    requested_base_local_replacements: tuple[str, ...] = ()
    # the layered packages the deployment holds (of those requested, the ones not already in the base)
    packages: tuple[str, ...] = ()

    @property
    def base_commit(self) -> str:
        """The OS base commit: `base-checksum` when packages are layered on top, else `checksum`."""
        return self.base_checksum or self.checksum


@dataclass(frozen=True)
class Status:
    """The deployments rpm-ostree knows about, newest (staged) first, and its active transaction."""

    deployments: tuple[Deployment, ...]
    transaction: tuple[str, ...] | None = None

    @property
    def booted(self) -> Deployment:
        """The deployment the node runs now (parse_status guarantees there is one)."""
        for d in self.deployments:
            if d.booted:
                return d
        raise RpmOstreeError("not currently booted in a deployment")

    @property
    def staged(self) -> Deployment | None:
        """The deployment the next boot finalizes, if any."""
        return next((d for d in self.deployments if d.staged), None)


def unsupported_packages(deployment: Deployment) -> list[str]:
    """The local package changes of `deployment` that no supported extension installs
    (upstream's mcd_local_unsupported_packages counts them): packages layered, local and
    fileoverride packages, base packages removed or replaced. Pure."""
    supported = {p for packages in SUPPORTED_EXTENSIONS.values() for p in packages}
    changes = (
        *deployment.requested_packages,
        *deployment.requested_local_packages,
        *deployment.requested_local_fileoverride_packages,
        *deployment.requested_base_removals,
        *deployment.requested_base_local_replacements,
    )
    return [p for p in changes if p not in supported]


def _truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]} [{len(text) - limit} more chars]"


_KIND_NAMES = {str: "a string", bool: "a boolean", int: "an integer", list: "a list"}


def _field(index: int, doc: Mapping[str, Any], key: str, kind: type, default: Any) -> Any:
    value = doc.get(key)
    if value is None:
        return default
    # bool is an int in Python; a JSON true must not pass as a serial
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise RpmOstreeError(f"rpm-ostree status: deployment {index}: {key!r} is not {_KIND_NAMES[kind]}")
    return value


def _strings(index: int, doc: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = _field(index, doc, key, list, [])
    if not all(isinstance(v, str) for v in value):
        raise RpmOstreeError(f"rpm-ostree status: deployment {index}: {key!r} is not a list of strings")
    return tuple(value)


def _deployment(index: int, doc: Any) -> Deployment:
    if not isinstance(doc, dict):
        raise RpmOstreeError(f"rpm-ostree status: deployment {index} is not an object")
    return Deployment(
        id=_field(index, doc, "id", str, ""),
        osname=_field(index, doc, "osname", str, ""),
        checksum=_field(index, doc, "checksum", str, ""),
        booted=_field(index, doc, "booted", bool, False),
        staged=_field(index, doc, "staged", bool, False),
        pinned=_field(index, doc, "pinned", bool, False),
        serial=_field(index, doc, "serial", int, 0),
        timestamp=_field(index, doc, "timestamp", int, None),
        version=_field(index, doc, "version", str, None),
        base_checksum=_field(index, doc, "base-checksum", str, None),
        origin=_field(index, doc, "origin", str, None),
        custom_origin=_strings(index, doc, "custom-origin"),
        container_image_reference=_field(index, doc, "container-image-reference", str, None),
        container_image_reference_digest=_field(index, doc, "container-image-reference-digest", str, None),
        requested_packages=_strings(index, doc, "requested-packages"),
        requested_base_removals=_strings(index, doc, "requested-base-removals"),
        requested_local_packages=_strings(index, doc, "requested-local-packages"),
        requested_local_fileoverride_packages=_strings(index, doc, "requested-local-fileoverride-packages"),
        requested_base_local_replacements=_strings(index, doc, "requested-base-local-replacements"),
        packages=_strings(index, doc, "packages"),
    )


def parse_status(json_text: str) -> Status:
    """Parse `rpm-ostree status --json`; RpmOstreeError when unreadable or nothing is booted."""
    try:
        doc = json.loads(json_text)
    except json.JSONDecodeError as e:
        raise RpmOstreeError(
            f"failed to parse `rpm-ostree status --json` output ({_truncate(json_text, 30)}): {e}"
        ) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("deployments"), list):
        raise RpmOstreeError(
            f"failed to parse `rpm-ostree status --json` output ({_truncate(json_text, 30)}): "
            "no list of deployments"
        )
    transaction = doc.get("transaction")
    status = Status(
        deployments=tuple(_deployment(i, d) for i, d in enumerate(doc["deployments"])),
        transaction=tuple(str(t) for t in transaction) if isinstance(transaction, list) else None,
    )
    if not any(d.booted for d in status.deployments):
        raise RpmOstreeError("not currently booted in a deployment")
    return status


FINALIZE_UNIT = "ostree-finalize-staged.service"


def first_error_line(journal_text: str) -> str | None:
    """The first line of a journal excerpt that starts with `error:` (None when there is none)."""
    return next((line for line in journal_text.splitlines() if line.startswith("error:")), None)


# --- ostree container image references --------------------------------------------------------


@dataclass(frozen=True)
class OstreeImageReference:
    """A parsed `ostree-…:` image reference: how it is verified, and which image it names."""

    sigverify: str  # "insecure", "container-policy" or "remote"
    remote: str | None
    transport: str  # "registry", "oci", "oci-archive", "docker-archive", "containers-storage", "dir"
    image: str


_TRANSPORTS = {
    "registry": "registry",
    "docker": "registry",
    "oci": "oci",
    "oci-archive": "oci-archive",
    "docker-archive": "docker-archive",
    "containers-storage": "containers-storage",
    "dir": "dir",
}


def _image_ref(text: str) -> tuple[str, str]:
    transport_name, sep, name = text.partition(":")
    if not sep:
        raise ValueError(f"missing transport in {text!r}")
    if transport_name not in _TRANSPORTS:
        raise ValueError(f"unknown transport {transport_name!r} in {text!r}")
    if transport_name == "docker":
        # the containers/image spelling is docker://NAME
        if not name.startswith("//"):
            raise ValueError(f"missing // in docker:// in {text!r}")
        name = name[2:]
    if not name:
        raise ValueError(f"empty image name in {text!r}")
    return _TRANSPORTS[transport_name], name


def parse_ostree_image_ref(ref: str) -> OstreeImageReference:
    """Parse an ostree container image reference as rpm-ostree writes it; ValueError if malformed.

    `ostree-unverified-registry:X`, `ostree-unverified-image:<transport>:X`,
    `ostree-image-signed:<transport>:X`, `ostree-remote-registry:R:X` and
    `ostree-remote-image:R:<transport>:X`, where the transport is `registry:`, `docker://`,
    `oci:`, `oci-archive:`, `docker-archive:`, `containers-storage:` or `dir:`.
    """
    scheme, sep, rest = ref.partition(":")
    if not sep:
        raise ValueError(f"not an ostree image reference: {ref!r}")
    remote: str | None = None
    if scheme in ("ostree-remote-registry", "ostree-remote-image"):
        remote, sep, rest = rest.partition(":")
        if not sep or not remote:
            raise ValueError(f"missing ostree remote in {ref!r}")
    if scheme in ("ostree-unverified-registry", "ostree-remote-registry"):
        if not rest:
            raise ValueError(f"empty image name in {ref!r}")
        transport, image = "registry", rest
    elif scheme in ("ostree-unverified-image", "ostree-image-signed", "ostree-remote-image"):
        transport, image = _image_ref(rest)
    else:
        raise ValueError(f"not an ostree image reference: {ref!r}")
    sigverify = "remote" if remote else "container-policy" if scheme == "ostree-image-signed" else "insecure"
    return OstreeImageReference(sigverify, remote, transport, image)


def booted_image(status: Status) -> str:
    """The OS image the node booted, compared with a MachineConfig's osImageURL (spec §5.2).

    A container deployment names it in `container-image-reference`; older nodes kept it in
    `custom-origin[0]` as `pivot://<image>`. Empty when neither is there.
    """
    booted = status.booted
    url = ""
    if booted.custom_origin and booted.custom_origin[0].startswith(PIVOT_PREFIX):
        url = booted.custom_origin[0][len(PIVOT_PREFIX) :]
    if booted.container_image_reference:
        try:
            url = parse_ostree_image_ref(booted.container_image_reference).image
        except ValueError as e:
            raise RpmOstreeError(f"failed to parse booted container image reference: {e}") from None
    return url


# --- the client -------------------------------------------------------------------------------


@dataclass(frozen=True)
class RpmOstreeVersion:
    """`rpm-ostree --version`: the version and the compiled-in features (`container` matters)."""

    version: str
    features: tuple[str, ...]


def parse_version(text: str) -> RpmOstreeVersion:
    """Parse the YAML `rpm-ostree --version` prints; RpmOstreeError when unreadable."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise RpmOstreeError(f"failed to parse `rpm-ostree --version` output: {e}") from None
    root = doc.get("rpm-ostree") if isinstance(doc, dict) else None
    if not isinstance(root, dict):
        raise RpmOstreeError("failed to parse `rpm-ostree --version` output: no rpm-ostree section")
    features = root.get("Features") or []
    if not isinstance(features, list):
        raise RpmOstreeError("failed to parse `rpm-ostree --version` output: Features is not a list")
    return RpmOstreeVersion(str(root.get("Version", "")), tuple(str(f) for f in features))


class RpmOstree:
    """Runs rpm-ostree for the daemon. Every change lands in the staged deployment until a reboot.

    `binary` replaces the `rpm-ostree` the command builders name (tests pass a stand-in's path);
    `sleep` is injected so retry tests never wait.
    """

    def __init__(
        self,
        runner: Runner,
        retry_delays: Sequence[float] = REBASE_RETRY_DELAYS,
        sleep: Callable[[float], None] = time.sleep,
        binary: str = "rpm-ostree",
        root: HostRoot | None = None,
    ) -> None:
        self._runner = runner
        # the node root the pull secret link is made in (None: a client that rebases nothing)
        self._root = root
        self._retry_delays = tuple(retry_delays)
        self._sleep = sleep
        self._binary = binary

    def _run(self, argv: Sequence[str], what: str | None = None) -> CommandResult:
        if not argv or argv[0] != "rpm-ostree":
            raise ValueError(f"not an rpm-ostree command line: {list(argv)}")
        try:
            return self._runner.run([self._binary, *argv[1:]], env={"RPMOSTREE_CLIENT_ID": CLIENT_ID})
        except CommandError as e:
            raise RpmOstreeError(f"{what}: {e}" if what else str(e), e.result) from e

    def status(self) -> Status:
        """The current deployments (`rpm-ostree status --json`)."""
        return parse_status(self._run(["rpm-ostree", "status", "--json"]).stdout)

    def booted_image(self) -> str:
        """The booted OS image (see `booted_image`)."""
        return booted_image(self.status())

    def version(self) -> RpmOstreeVersion:
        """`rpm-ostree --version`."""
        return parse_version(self._run(["rpm-ostree", "--version"]).stdout)

    def require_feature(self, feature: str) -> None:
        """Fail unless `rpm-ostree --version` lists `feature` (`container`: rebasing onto images)."""
        version = self.version()
        if feature not in version.features:
            raise RpmOstreeError(
                f"rpm-ostree {version.version} lacks the {feature} feature: "
                "updating the OS through a container is not supported by mcd"
            )

    def link_pull_secret(self) -> str:
        """Link `/run/ostree/auth.json` to the pull secret (`mcd.host.pullsecret`); the target."""
        if self._root is None:
            raise ValueError("this rpm-ostree client has no node root to link the pull secret in")
        return link_pull_secret(self._root)

    def rebase(self, url: str, before_attempt: Callable[[], None] | None = None) -> None:
        """Stage `url` pulled from its registry, retrying with backoff: registries do fail transiently.

        `before_attempt` runs before every attempt (upstream refreshes the pull secret link there).
        """
        cmd = rebase_command(url)
        attempts = len(self._retry_delays) + 1
        last: RpmOstreeError | None = None
        for attempt in range(attempts):
            if before_attempt is not None:
                before_attempt()
            log.info("Executing rebase to %s (attempt %d of %d)", url, attempt + 1, attempts)
            try:
                self._run(cmd)
                return
            except RpmOstreeError as e:
                last = e
                if attempt + 1 < attempts:
                    delay = self._retry_delays[attempt]
                    log.warning("rebase to %s failed, retrying in %gs: %s", url, delay, e)
                    self._sleep(delay)
        # upstream wraps the last failure and then its backoff's own give-up error
        message = f"failed to update OS to {url} after retries: {last}: {WAIT_TIMEOUT}"
        raise RpmOstreeError(message, last.result if last else None) from last

    def run_planned(self, argv: Sequence[str]) -> None:
        """Run an rpm-ostree command line the planner built (a rebase goes through `rebase`)."""
        self._run(argv)

    def kargs_output(self) -> str:
        """The pending deployment's kernel arguments as `rpm-ostree kargs` prints them."""
        return self._run(["rpm-ostree", "kargs"], "failed to read kernel arguments").stdout

    def verify_extensions(self, expected: Sequence[str]) -> None:
        """Check that the staged deployment requests every `expected` extension package (spec §5.6).

        Run right after the `rpm-ostree update` installing them, as upstream: no staged
        deployment then is an error too. RpmOstreeError with upstream's messages.
        """
        if not expected:
            return
        try:
            status = self.status()
        except RpmOstreeError as e:
            raise RpmOstreeError(f"failed to get staged deployment: {e}", e.result) from e
        if status.staged is None:
            raise RpmOstreeError(NO_STAGED_DEPLOYMENT)
        missing = missing_extension_packages(status.staged.requested_packages, expected)
        if missing:
            raise RpmOstreeError(missing_extensions_error(missing))

    def previous_deployment_error(self) -> str | None:
        """The error ostree-finalize-staged.service logged in the previous boot, or None.

        Upstream's rpm-ostree client reads the unit's journal of the previous boot and takes its
        first line starting with `error:` (ostree's messages say nothing more structured). A root
        that is not a running system has its journal read from its own directory.
        RpmOstreeError when journalctl fails (no previous boot in the journal, no journal).
        """
        argv = ["journalctl", "-b", "-1", "-o", "cat", "_UID=0", "-u", FINALIZE_UNIT]
        if self._root is not None and not self._root.runs_systemd:
            argv[1:1] = ["--directory", str(self._root.join("/var/log/journal"))]
        try:
            out = self._runner.run(argv).stdout
        except CommandError as e:
            raise RpmOstreeError(
                f"error querying for previous finalization via journalctl: {e}", e.result
            ) from e
        return first_error_line(out)

    def cleanup_rollback(self) -> None:
        """Remove the rollback deployment (`cleanup -r`), as upstream at the agent's first sync."""
        self._run(cleanup_rollback_command(), "failed to remove rollback deployment")

    def cleanup_pending(self) -> None:
        """Discard the staged deployment (`cleanup -p`); fine when there is none."""
        self._run(cleanup_pending_command(), "failed to remove staged deployment")
