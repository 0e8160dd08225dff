"""Whether a change to /etc/containers/registries.conf can be applied without draining. Pure: no I/O.

Upstream (`isSafeContainerRegistryConfChanges`, pkg/daemon/drain.go) decodes both versions of
the file into containers/image's `sysregistriesv2.V2RegistriesConf` and accepts only changes
that cannot make a running pod pull a different image: appending to the unqualified search list,
and adding mirrors that serve digest pulls only. Everything else needs a drain.

Decoding follows that struct, as BurntSushi/toml fills it:

* only the version 2 keys are read (`unqualified-search-registries`, `[[registry]]` with
  `prefix`, `location`, `insecure`, `blocked`, `mirror-by-digest-only`, `pull-from-mirror` and
  `[[registry.mirror]]`); the version 1 tables (`[registries.search]` …) fill no field and are
  ignored, as is any other unknown key;
* a key names a field exactly or, failing that, case-insensitively;
* a value of the wrong TOML type for a known field is a decode error, as in Go.

A file that does not decode makes upstream return an error, which fails the update. Here
`parse_registries_conf` raises `RegistriesError` with upstream's wording, and
`is_safe_registries_change` answers False (drain): the caller that wants upstream's hard
failure parses first.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from mcd.config.record import record
from mcd.policy.model import REGISTRIES_CONF

TYPE_CHECKING = False  # not typing's: its import is a few ms of every short command
if TYPE_CHECKING:
    from typing import Any

DIGEST_ONLY = "digest-only"  # sysregistriesv2.MirrorByDigestOnly, the pull-from-mirror value


class RegistriesError(ValueError):
    """registries.conf content that upstream's TOML decoder rejects."""


@record
class Mirror:
    """One `[[registry.mirror]]` entry (a sysregistriesv2.Endpoint)."""

    location: str = ""
    insecure: bool = False
    pull_from_mirror: str = ""


@record
class Registry:
    """One `[[registry]]` entry."""

    prefix: str = ""
    location: str = ""
    insecure: bool = False
    blocked: bool = False
    mirror_by_digest_only: bool = False
    pull_from_mirror: str = ""
    mirrors: tuple[Mirror, ...] = ()

    @property
    def scope(self) -> str:
        """The key upstream matches old and new entries by: the prefix, or the location if unset."""
        return self.prefix or self.location


@record
class RegistriesConf:
    """The parts of a registries.conf that the safety check reads."""

    unqualified_search_registries: tuple[str, ...] = ()
    registries: tuple[Registry, ...] = ()


# --- decoding ------------------------------------------------------------------------------------


def _fields(table: Mapping[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    """Map TOML keys onto field names: exact match first, else case-insensitive (BurntSushi/toml)."""
    found: dict[str, Any] = {}
    for key, value in table.items():
        if key in names:
            found[key] = value
            continue
        for name in names:
            if name.lower() == key.lower():
                found[name] = value
                break
    return found


def _check(value: Any, ok: Callable[[Any], bool], what: str, key: str) -> Any:
    if not ok(value):
        raise RegistriesError(f"{key}: expected {what}, got {type(value).__name__}")
    return value


def _is_str(v: Any) -> bool:
    return isinstance(v, str)


def _is_bool(v: Any) -> bool:
    return isinstance(v, bool)


def _is_str_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _is_str_table(v: Any) -> bool:
    return isinstance(v, dict) and all(isinstance(x, str) for x in v.values())


def _is_table_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, dict) for x in v)


_MIRROR_KEYS = ("location", "insecure", "pull-from-mirror")
_REGISTRY_KEYS = ("prefix", "mirror", "blocked", "mirror-by-digest-only", *_MIRROR_KEYS)
# credential-helpers, short-name-mode and aliases are not compared but still must have the right type
_TOP_KEYS = ("registry", "unqualified-search-registries", "credential-helpers", "short-name-mode", "aliases")


def _mirror(table: Mapping[str, Any]) -> Mirror:
    f = _fields(table, _MIRROR_KEYS)
    return Mirror(
        location=_check(f.get("location", ""), _is_str, "a string", "location"),
        insecure=_check(f.get("insecure", False), _is_bool, "a boolean", "insecure"),
        pull_from_mirror=_check(f.get("pull-from-mirror", ""), _is_str, "a string", "pull-from-mirror"),
    )


def _registry(table: Mapping[str, Any]) -> Registry:
    f = _fields(table, _REGISTRY_KEYS)
    endpoint = _mirror(table)
    mirrors = _check(f.get("mirror", []), _is_table_list, "an array of tables", "mirror")
    return Registry(
        prefix=_check(f.get("prefix", ""), _is_str, "a string", "prefix"),
        location=endpoint.location,
        insecure=endpoint.insecure,
        blocked=_check(f.get("blocked", False), _is_bool, "a boolean", "blocked"),
        mirror_by_digest_only=_check(
            f.get("mirror-by-digest-only", False), _is_bool, "a boolean", "mirror-by-digest-only"
        ),
        pull_from_mirror=endpoint.pull_from_mirror,
        mirrors=tuple(_mirror(m) for m in mirrors),
    )


def parse_registries_conf(text: str | None) -> RegistriesConf:
    """Decode registries.conf as upstream does; None (file absent) and "" give an empty config.

    Raises RegistriesError for invalid TOML or a known key holding a value of the wrong type.
    """
    import tomllib  # noqa: PLC0415 (only when registries.conf changes: ~3 ms of start-up)

    try:
        doc = tomllib.loads(text or "")
        f = _fields(doc, _TOP_KEYS)
        _check(f.get("credential-helpers", []), _is_str_list, "an array of strings", "credential-helpers")
        _check(f.get("short-name-mode", ""), _is_str, "a string", "short-name-mode")
        _check(f.get("aliases", {}), _is_str_table, "a table of strings", "aliases")
        search = _check(
            f.get("unqualified-search-registries", []),
            _is_str_list,
            "an array of strings",
            "unqualified-search-registries",
        )
        tables = _check(f.get("registry", []), _is_table_list, "an array of tables", "registry")
        return RegistriesConf(tuple(search), tuple(_registry(t) for t in tables))
    except (tomllib.TOMLDecodeError, RegistriesError) as err:
        raise RegistriesError(f"Failed decoding TOML content from file {REGISTRIES_CONF}: {err}") from err


# --- the safety rules ----------------------------------------------------------------------------


def _has_mirror(location: str, mirrors: tuple[Mirror, ...]) -> bool:
    return any(m.location == location for m in mirrors)


def _access(r: Registry) -> tuple[str, str, bool, bool]:
    """What decides where and whether a registry's images are pulled at all."""
    return (r.prefix, r.location, r.blocked, r.insecure)


def _existing_registry_change_is_safe(old: Registry, new: Registry) -> bool:
    if _access(old) != _access(new):
        return False
    # A removed mirror may have been serving tag pulls that now resolve elsewhere.
    if any(not _has_mirror(m.location, new.mirrors) for m in old.mirrors):
        return False
    for m in new.mirrors:
        kept = [o for o in old.mirrors if o.location == m.location]
        digest_only = m.pull_from_mirror == DIGEST_ONLY
        if not kept:
            # A new mirror is harmless only if it never serves tag pulls.
            if not digest_only and not new.mirror_by_digest_only:
                return False
        elif not digest_only and any(o.pull_from_mirror != m.pull_from_mirror for o in kept):
            # A kept mirror may only narrow itself to digest pulls.
            return False
    # mirror-by-digest-only itself is not compared: flipping only that flag counts as safe
    # (upstream quirk, spec §3.5/§18).
    return True


def _new_registry_is_safe(new: Registry) -> bool:
    if not new.mirrors:
        return new.mirror_by_digest_only
    return all(m.pull_from_mirror == DIGEST_ONLY for m in new.mirrors)


def registries_change_is_safe(old: RegistriesConf, new: RegistriesConf) -> bool:
    """Upstream's safe-change rules on decoded configs (spec §3.5)."""
    # Image lookup walks the search list in order: only appending keeps existing resolutions.
    old_search, new_search = old.unqualified_search_registries, new.unqualified_search_registries
    if new_search[: len(old_search)] != old_search:
        return False
    # Later entries with the same scope replace earlier ones, as upstream's map does.
    old_regs = {r.scope: r for r in old.registries}
    new_regs = {r.scope: r for r in new.registries}
    if any(scope not in new_regs for scope in old_regs):
        return False
    for scope, new_reg in new_regs.items():
        old_reg = old_regs.get(scope)
        if old_reg is None:
            if not _new_registry_is_safe(new_reg):
                return False
        elif old_reg != new_reg and not _existing_registry_change_is_safe(old_reg, new_reg):
            return False
    return True


def is_safe_registries_change(old_text: str | None, new_text: str | None) -> bool:
    """True when the registries.conf change needs no drain; None means the file is absent.

    Content that does not decode is not safe (see the module docstring).
    """
    try:
        old, new = parse_registries_conf(old_text), parse_registries_conf(new_text)
    except RegistriesError:
        return False
    return registries_change_is_safe(old, new)
