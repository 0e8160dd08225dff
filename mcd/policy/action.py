"""The post-config action as one typed value, whichever table chose it. Pure: no I/O.

The two tables spell their actions differently: NodeDisruptionPolicy uses the API's objects
(`Action`: ``{"type": "Reload", "reload": {"serviceName": …}}``), the legacy table plain words
(``"reload crio"``). The planner turns either into `PostConfigAction` once, at the decision;
the drain rule, the steps, the plan text and the reports then look at `kind` only.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Sequence

from mcd.config.record import record
from mcd.policy import model  # the submodule itself: its names are the API's spelling


class ActionKind(enum.Enum):
    """What the node does after writing a config; both tables map onto these."""

    NONE = "none"
    REBOOT = "reboot"
    DRAIN = "drain"
    RELOAD = "reload"  # reload `service`
    RESTART = "restart"  # restart `service`
    DAEMON_RELOAD = "daemon-reload"
    # NDP Special and the legacy "reload crio": reload crio; drain only for an unsafe registries.conf
    RELOAD_CRIO = "reload-crio"
    # legacy "restart crio": rebuild the CA trust store, then restart crio (the user CA bundle changed)
    RESTART_CRIO_WITH_CA_TRUST = "restart-crio-with-ca-trust"


_FROM_API = {
    model.NONE: ActionKind.NONE,
    model.REBOOT: ActionKind.REBOOT,
    model.DRAIN: ActionKind.DRAIN,
    model.RELOAD: ActionKind.RELOAD,
    model.RESTART: ActionKind.RESTART,
    model.DAEMON_RELOAD: ActionKind.DAEMON_RELOAD,
    model.SPECIAL: ActionKind.RELOAD_CRIO,
}
_TO_API = {kind: api for api, kind in _FROM_API.items()}

LEGACY_NONE = "none"
LEGACY_RELOAD_CRIO = "reload crio"
LEGACY_RESTART_CRIO = "restart crio"
LEGACY_REBOOT = "reboot"
_FROM_LEGACY = {
    LEGACY_NONE: ActionKind.NONE,
    LEGACY_RELOAD_CRIO: ActionKind.RELOAD_CRIO,
    LEGACY_RESTART_CRIO: ActionKind.RESTART_CRIO_WITH_CA_TRUST,
    LEGACY_REBOOT: ActionKind.REBOOT,
}
_TO_LEGACY = {kind: word for word, kind in _FROM_LEGACY.items()}

# The kinds whose drain depends on the registries.conf change (spec §3.5).
_CRIO_KINDS = frozenset({ActionKind.RELOAD_CRIO, ActionKind.RESTART_CRIO_WITH_CA_TRUST})


@record
class PostConfigAction:
    """One post-config action. `service` is set exactly for RELOAD and RESTART.

    `legacy` records which table chose it, so the value prints in that table's spelling (the
    `mcd plan -o json` contract): ``"reload crio"`` for a legacy one, ``Action("Special")`` for
    a policy one (`spelling`).
    """

    kind: ActionKind
    service: str | None = None
    legacy: bool = False

    def __post_init__(self) -> None:
        # Guards against values neither table can produce (a bug in code, not user input).
        if (self.kind in (ActionKind.RELOAD, ActionKind.RESTART)) != (self.service is not None):
            raise ValueError(f"{self.kind.name} action: service {self.service!r}")
        if self.legacy and self.kind not in _TO_LEGACY:
            raise ValueError(f"the legacy table has no {self.kind.name} action")
        if not self.legacy and self.kind not in _TO_API:
            raise ValueError(f"node disruption policy has no {self.kind.name} action")

    @classmethod
    def from_api(cls, action: model.Action) -> PostConfigAction:
        """A NodeDisruptionPolicy action."""
        return cls(_FROM_API[action.type], action.service)

    @classmethod
    def from_legacy(cls, word: str) -> PostConfigAction:
        """A legacy table action (``none``, ``reload crio``, ``restart crio``, ``reboot``)."""
        try:
            return cls(_FROM_LEGACY[word], legacy=True)
        except KeyError:
            raise ValueError(f"unknown legacy action {word!r}") from None

    def to_api(self) -> dict[str, object]:
        """The API form of a NodeDisruptionPolicy action."""
        return self._spelling_api().to_api()

    def to_json(self) -> str | dict[str, object]:
        """As `mcd plan -o json` prints it: the legacy word, or the API form."""
        return _TO_LEGACY[self.kind] if self.legacy else self.to_api()

    def _spelling_api(self) -> model.Action:
        if self.legacy:
            raise ValueError(f"legacy action {_TO_LEGACY[self.kind]!r} has no API form")
        return model.Action(_TO_API[self.kind], self.service)

    def spelling(self) -> str | model.Action:
        """The action in its table's own terms: the legacy word, or the API's `Action`."""
        return _TO_LEGACY[self.kind] if self.legacy else self._spelling_api()

    def __str__(self) -> str:
        """``reload crio`` (legacy), ``Reboot``, ``Reload crio.service`` (policy)."""
        return str(self.spelling())


def from_api(actions: Iterable[model.Action]) -> tuple[PostConfigAction, ...]:
    """NodeDisruptionPolicy actions as typed values, in order."""
    return tuple(map(PostConfigAction.from_api, actions))


def from_legacy(words: Iterable[str]) -> tuple[PostConfigAction, ...]:
    """Legacy table actions as typed values, in order."""
    return tuple(map(PostConfigAction.from_legacy, words))


def drain_required(
    actions: Sequence[PostConfigAction],
    *,
    legacy: bool,
    registries_changed: bool,
    registries_change_safe: Callable[[], bool],
) -> bool:
    """Whether the node must be drained before the post-config `actions` (spec §3.5).

    Reboot or Drain ⇒ yes. A crio reload or restart ⇒ only when the registries.conf change is not
    safe: the legacy table asks only when registries.conf changed, while NodeDisruptionPolicy's
    Special is registries.conf's own policy and always asks. Otherwise no — except that the legacy
    rule drains whenever its list is not ``none`` (an empty list included): upstream's safe default.
    `registries_change_safe` is called only when the answer depends on it (it may parse TOML).
    """
    kinds = {a.kind for a in actions}
    if kinds & {ActionKind.REBOOT, ActionKind.DRAIN}:
        return True
    if kinds & _CRIO_KINDS:
        return (registries_changed or not legacy) and not registries_change_safe()
    return legacy and ActionKind.NONE not in kinds
