"""`--drift-policy heal`: put one drifted path back and run only the action its policy asks for.

Beyond upstream, which only reports drift. A heal writes what the config declares for the
path (atomically, with its mode and owner; a mask link; the unit's enablement) and then runs
the node disruption policy's actions for that path alone (reload or restart of a service,
daemon-reload, nothing). It refuses (the caller then degrades the node, as upstream) when the
path's policy asks for a drain or a reboot, when the same path was healed less than `window`
seconds ago (someone or something keeps changing it: a fight is worse than a report), and
beyond `max_per_window` heals in all per window.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from mcd import policy
from mcd.host import atomicfs
from mcd.host.streamdata import contents
from mcd.planner.managed_paths import UNIT_DIR, Managed
from mcd.policy import ActionKind, PostConfigAction

LOG = logging.getLogger(__name__)

DEFAULT_WINDOW = 600.0
DEFAULT_MAX_PER_WINDOW = 20
_NO_HEAL = (ActionKind.REBOOT, ActionKind.DRAIN)


def actions_for(m: Managed, policies: policy.ClusterPolicies) -> tuple[PostConfigAction, ...]:
    """The node disruption policy's actions for a change of the one managed path `m`."""
    if m.file is not None:
        decision = policy.file_decision(m.path, policies)
    elif m.unit is not None:
        decision = policy.unit_decision(m.unit.name, policies)
    else:  # a dropin: its unit's policy
        decision = policy.unit_decision(m.path[len(UNIT_DIR) + 1 :].split("/", 1)[0][: -len(".d")], policies)
    return tuple(map(PostConfigAction.from_api, policy.combine_actions(decision.actions)))


class Healer:
    """Rewrites drifted paths through a host (`mcd.update.transaction.Host`); see the module docstring."""

    def __init__(
        self,
        host: Callable[[], Any],
        policies: Callable[[], policy.ClusterPolicies] = lambda: policy.DEFAULT_POLICIES,
        *,
        window: float = DEFAULT_WINDOW,
        max_per_window: int = DEFAULT_MAX_PER_WINDOW,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._host = host
        self._policies = policies
        self.window = window
        self.max_per_window = max_per_window
        self._clock = clock
        self._healed: dict[str, float] = {}

    def reset(self) -> None:
        """Forget past heals (a new config is watched)."""
        self._healed.clear()

    def heal(self, m: Managed, reason: str) -> bool:
        """Put `m` back and run its actions; False when refused or failed (the node degrades)."""
        now = self._clock()
        self._healed = {p: t for p, t in self._healed.items() if now - t < self.window}
        if m.path in self._healed:
            LOG.warning("%s drifted again within %.0fs of its last heal: not healing it", m.path, self.window)
            return False
        if len(self._healed) >= self.max_per_window:
            LOG.warning("%d heals within %.0fs: not healing %s", len(self._healed), self.window, m.path)
            return False
        try:
            actions = actions_for(m, self._policies())
        except Exception as exc:  # the policies come from the API: any failure means no heal
            LOG.warning("cannot read the node disruption policies to heal %s: %s", m.path, exc)
            return False
        if any(a.kind in _NO_HEAL for a in actions):
            shown = ", ".join(map(str, actions))
            LOG.warning("not healing %s: its policy asks for %s", m.path, shown)
            return False
        try:
            host = self._host()
            self._rewrite(host, m)
            self._run(host, actions)
        except Exception as exc:  # a failed heal is reported as the drift it was
            LOG.error("healing %s failed: %s", m.path, exc)
            return False
        self._healed[m.path] = now
        done = ", ".join(map(str, actions)) or "none"
        LOG.warning("healed config drift of %s (%s); actions: %s", m.path, reason, done)
        return True

    @staticmethod
    def _rewrite(host: Any, m: Managed) -> None:
        root = host.root
        if m.file is not None:
            uid, gid = host.files.owner_of(m.file)
            # a large file is written as it is decoded, never held whole (as the update writes it)
            data, mode = contents(m.file), m.file.effective_mode
            atomicfs.atomic_write(root.join(m.path), data, mode, uid=uid, gid=gid)
        elif m.unit is not None:
            if m.unit.mask:
                atomicfs.atomic_symlink(root.join(m.path), "/dev/null")
                return
            if m.unit.contents:
                atomicfs.atomic_write(root.join(m.path), m.unit.contents.encode(), 0o644, uid=0, gid=0)
            if m.unit.enabled is True:
                host.systemd.enable([m.unit.name])
            elif m.unit.enabled is False:
                host.systemd.disable([m.unit.name])
        elif m.dropin:
            atomicfs.atomic_write(root.join(m.path), m.dropin.encode(), 0o644, uid=0, gid=0)
        else:
            atomicfs.remove(root.join(m.path))  # an empty dropin is one that must not exist

    @staticmethod
    def _run(host: Any, actions: tuple[PostConfigAction, ...]) -> None:
        for a in actions:
            match a.kind, a.service:
                case ActionKind.DAEMON_RELOAD, _:
                    host.systemd.daemon_reload()
                case ActionKind.RELOAD, str(service):
                    host.systemd.reload(service)
                case ActionKind.RESTART, str(service):
                    host.systemd.restart(service)
                case ActionKind.RELOAD_CRIO, _:
                    # Special is registries.conf: putting the declared file back is applied by a crio reload
                    host.systemd.reload("crio.service")
