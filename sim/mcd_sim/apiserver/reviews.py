"""TokenReview and SubjectAccessReview, as kube-apiserver answers them for a component that
checks its own callers (the agent's metrics endpoint, as the kubelet's).

A TokenReview says whether a bearer token is one this server accepts and whose it is; a
SubjectAccessReview whether a user (with its groups) may do what the resource attributes say,
decided by the same authorizer as every request (`ApiServer.enforce_rbac`; without one, any
authenticated user may do anything, as the server itself then allows). Both are only created,
never stored. Who may create them is the ordinary RBAC check of `create` on `tokenreviews` /
`subjectaccessreviews` (upstream's `system:auth-delegator` role grants both).
"""

from __future__ import annotations

import json
from typing import Any

from mcd_sim.apiserver import errors
from mcd_sim.apiserver.authn import User
from mcd_sim.apiserver.rbac import Access, Ask
from mcd_sim.apiserver.resources import ResourceType

Obj = dict[str, Any]
TOKEN_REVIEWS = ("authentication.k8s.io", "tokenreviews")
# not in the resource table: nothing is stored, listed or discovered; routing and RBAC only
REVIEW_TYPES = (
    ResourceType("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", False, verbs=("create",)),
    ResourceType(
        "authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", False, verbs=("create",)
    ),
)


def review_type(group: str, version: str, plural: str) -> ResourceType | None:
    found = [rt for rt in REVIEW_TYPES if (rt.group, rt.version, rt.plural) == (group, version, plural)]
    return found[0] if found else None


def is_review(rt: ResourceType) -> bool:
    return rt in REVIEW_TYPES


def _body(raw: bytes, kind: str) -> Obj:
    try:
        body = json.loads(raw or b"null")
    except ValueError as exc:
        raise errors.bad_request(f"the request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict) or not isinstance(body.get("spec"), dict):
        raise errors.bad_request(f"a {kind} needs a spec")
    return body


def answer(access: Access | None, rt: ResourceType, raw: bytes) -> tuple[int, Obj]:
    """The created review, with its status."""
    if access is None:
        raise errors.path_not_found()
    if (rt.group, rt.plural) == TOKEN_REVIEWS:
        body = _body(raw, "TokenReview")
        token = str(body["spec"].get("token") or "")
        user = access.authn.by_header(f"Bearer {token}") if token else None
        status: Obj = {"authenticated": False}
        if user is not None:
            status = {"authenticated": True, "user": {"username": user.name, "groups": list(user.groups)}}
        else:
            status["error"] = "invalid bearer token"
        spec = {"token": token}  # echoed as kube-apiserver does
        return 201, {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "metadata": {},
            "spec": spec,
            "status": status,
        }
    body = _body(raw, "SubjectAccessReview")
    spec = body["spec"]
    attrs = spec.get("resourceAttributes")
    if not isinstance(attrs, dict) or not spec.get("user"):
        raise errors.bad_request("only resourceAttributes reviews of a user are served here")
    subject = User(str(spec["user"]), tuple(str(g) for g in spec.get("groups") or ()))
    sub = f"/{attrs['subresource']}" if attrs.get("subresource") else ""
    resource = str(attrs.get("resource", "")) + sub
    ask = Ask(
        str(attrs.get("verb", "")),
        str(attrs.get("group", "")),
        resource,
        str(attrs.get("namespace", "")),
        str(attrs.get("name", "")),
    )
    authorizer = access.authorizer
    allowed = authorizer is None or authorizer.allows(subject, ask)
    return 201, {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "metadata": {},
        "spec": spec,
        "status": {"allowed": allowed},
    }
