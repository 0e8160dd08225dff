"""Asking the booted deployment's RPM database which packages it has (`rpm -q`).

On an image-mode node (on-cluster layering) the built image carries the extensions' packages
itself, so rpm-ostree lists none of them as layered; upstream then asks rpm, as the daemon does
before Done (OCPBUGS-65645). rpm reads the database of the root it runs in: the booted
deployment's. A root that is a plain directory (not a running system) is named with `--root`.
"""

from __future__ import annotations

from collections.abc import Sequence

from mcd.config.ostables import extension_package_sets
from mcd.host.root import HostRoot
from mcd.host.runner import CommandError, Runner
from mcd.planner.rpmostree_args import extensions_not_installed

# rpm's exit status when a package asked for is not installed (anything else is a failed query)
NOT_INSTALLED = 1


class RpmQueryError(RuntimeError):
    """rpm could not answer (no binary, a broken database); the message is upstream's."""


class RpmDb:
    """`rpm -q` against one root, through the runner that runs commands in it."""

    def __init__(self, runner: Runner, root: HostRoot, *, chrooted: bool, binary: str = "rpm") -> None:
        self._runner = runner
        # a runner already inside the root (the live `/`, or chroot into a mounted node) needs no --root
        self._root_args: tuple[str, ...] = () if chrooted or root.is_live else ("--root", str(root.prefix))
        self._binary = binary

    def installed(self, package: str) -> bool:
        """Whether `package` is installed; RpmQueryError when rpm cannot tell."""
        argv = [self._binary, *self._root_args, "-q", package]
        try:
            result = self._runner.run(argv, check=False)
        except (CommandError, OSError) as exc:
            raise RpmQueryError(f'failed to query RPM database for package "{package}": {exc}') from exc
        if result.returncode == 0:
            return True
        if result.returncode == NOT_INSTALLED:
            return False
        output = (result.stdout + result.stderr).strip()
        raise RpmQueryError(
            f'failed to query RPM database for package "{package}": exit status {result.returncode}: {output}'
        )

    def extensions_verdict(self, extensions: Sequence[str]) -> str | None:
        """Upstream's verdict on `extensions` (see `extensions_not_installed`), asking rpm package by
        package as upstream does: an extension's package sets in order, stopping at the first set
        wholly installed."""
        installed: set[str] = set()
        for ext in extensions:
            for package_set in extension_package_sets(ext):
                found = {p for p in package_set if p in installed or self.installed(p)}
                installed |= found
                if len(found) == len(package_set):
                    break
        return extensions_not_installed(extensions, sorted(installed))
