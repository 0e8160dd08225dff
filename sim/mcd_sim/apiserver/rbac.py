"""Authorization, as kube-apiserver's Node and RBAC authorizers decide it (when switched on).

RBAC: the ClusterRoles, Roles and their bindings given (the shipped manifests): a binding's
subjects (ServiceAccount, User, Group) get its role's rules, cluster-wide for a
ClusterRoleBinding, in its namespace for a RoleBinding. `system:masters` may do anything.

Nodes: a user `system:node:NAME` in group `system:nodes` gets what Kubernetes' bootstrap
`system:node` role grants a kubelet, for the resources mcd touches, narrowed as the Node
authorizer and the NodeRestriction admission plugin narrow it: a kubelet writes only its own
Node. Non-resource paths (discovery, /version) are open to every authenticated user, as the
`system:discovery` role makes them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from mcd_sim.apiserver.authn import AUTHENTICATED, Authenticator, User

Obj = dict[str, Any]


@dataclass(frozen=True)
class Ask:
    """What a request asks: `resource` is "plural" or "plural/subresource"."""

    verb: str
    group: str
    resource: str
    namespace: str
    name: str


@dataclass(frozen=True)
class Rule:
    groups: tuple[str, ...]
    resources: tuple[str, ...]  # "pods/eviction" for a subresource
    verbs: tuple[str, ...]
    names: tuple[str, ...] = ()  # resourceNames; empty: any

    def matches(self, ask: Ask) -> bool:
        return (
            _has(self.groups, ask.group)
            and _has(self.resources, ask.resource)
            and _has(self.verbs, ask.verb)
            and (not self.names or ask.name in self.names)
        )


def _has(allowed: tuple[str, ...], value: str) -> bool:
    return "*" in allowed or value in allowed


READ = ("get", "list", "watch")
# bootstrap policy's system:node, the part for the resources mcd's agent touches
NODE_RULES = (
    Rule(("",), ("nodes",), (*READ, "create", "update", "patch")),
    Rule(("",), ("nodes/status",), ("update", "patch")),
    Rule(("",), ("events",), ("create", "update", "patch")),
    Rule(("",), ("pods",), (*READ, "create", "delete")),
    Rule(("",), ("pods/eviction",), ("create",)),
)
NODE_PREFIX = "system:node:"


@dataclass(frozen=True)
class _Binding:
    scope: str  # a namespace, or "" for a ClusterRoleBinding
    subjects: tuple[tuple[str, str], ...]  # (kind, name): "User", "Group"; a ServiceAccount as its user
    rules: tuple[Rule, ...]


def _rules(role: Obj) -> tuple[Rule, ...]:
    return tuple(
        Rule(
            tuple(r.get("apiGroups") or ()),
            tuple(r.get("resources") or ()),
            tuple(r.get("verbs") or ()),
            tuple(r.get("resourceNames") or ()),
        )
        for r in role.get("rules") or ()
    )


def _role_key(role: Obj) -> tuple[str, str, str]:
    namespace = role["metadata"].get("namespace", "") if role["kind"] == "Role" else ""
    return role["kind"], namespace, role["metadata"]["name"]


def _subject(s: Obj) -> tuple[str, str]:
    if s.get("kind") == "ServiceAccount":
        return "User", f"system:serviceaccount:{s.get('namespace', '')}:{s.get('name', '')}"
    return str(s.get("kind", "")), str(s.get("name", ""))


class Authorizer:
    """Decides each request from the roles and bindings in `objects` (other kinds are ignored)."""

    def __init__(self, objects: Iterable[Obj]) -> None:
        objs = list(objects)
        roles = {_role_key(o): o for o in objs if o.get("kind") in ("ClusterRole", "Role")}
        self._bindings: list[_Binding] = []
        for b in objs:
            if b.get("kind") not in ("ClusterRoleBinding", "RoleBinding"):
                continue
            scope = b["metadata"].get("namespace", "") if b["kind"] == "RoleBinding" else ""
            ref = b["roleRef"]
            role = roles.get((ref["kind"], scope if ref["kind"] == "Role" else "", ref["name"]))
            if role is None:
                continue  # a binding to a role that does not exist grants nothing
            subjects = tuple(_subject(s) for s in b.get("subjects") or ())
            self._bindings.append(_Binding(scope, subjects, _rules(role)))

    def allows(self, user: User, ask: Ask) -> bool:
        """May `user` do what it asks?"""
        if "system:masters" in user.groups:
            return True
        if self._node_allows(user, ask):
            return True
        for b in self._bindings:
            if b.scope and b.scope != ask.namespace:
                continue
            if not any(
                (kind == "User" and who == user.name) or (kind == "Group" and who in user.groups)
                for kind, who in b.subjects
            ):
                continue
            if any(r.matches(ask) for r in b.rules):
                return True
        return False

    @staticmethod
    def allows_path(user: User) -> bool:
        """A non-resource path (discovery, /version, /openapi)."""
        return AUTHENTICATED in user.groups

    @staticmethod
    def _node_allows(user: User, ask: Ask) -> bool:
        if "system:nodes" not in user.groups or not user.name.startswith(NODE_PREFIX):
            return False
        if not any(r.matches(ask) for r in NODE_RULES):
            return False
        own = user.name[len(NODE_PREFIX) :]
        if ask.resource in ("nodes", "nodes/status") and ask.verb not in READ:
            return ask.name == own  # NodeRestriction: its own Node only
        return True


def forbidden_message(user: User, ask: Ask) -> str:
    """kube-apiserver's wording of an RBAC refusal."""
    plural = ask.resource.partition("/")[0]
    what = f'{plural} "{ask.name}"' if ask.name else plural
    where = f'in the namespace "{ask.namespace}"' if ask.namespace else "at the cluster scope"
    return (
        f'{what} is forbidden: User "{user.name}" cannot {ask.verb} resource "{ask.resource}" '
        f'in API group "{ask.group}" {where}'
    )


class Access:
    """The server's authenticator and its authorizer (None: every authenticated user may do
    anything, the default; `ApiServer.enforce_rbac` sets one)."""

    def __init__(self, authn: Authenticator) -> None:
        self.authn = authn
        self.authorizer: Authorizer | None = None
