"""Where the agent's two API identities come from, as upstream's daemon has them.

Upstream's daemon reads with its ServiceAccount but writes its Node (annotations, labels, the
cordon) and posts Events with the kubelet's own credentials, `/var/lib/kubelet/kubeconfig` on
the node: a kubelet may write only its own Node (Node authorizer, NodeRestriction), so the
ServiceAccount, shared by every node's agent, needs no write access to Nodes. And its in-cluster
client talks to the server named by the node's `/etc/kubernetes/kubeconfig` (`api-int` on
OpenShift) instead of the `kubernetes` Service's address, so an agent that is changing the
node's network is not cut off by the very change (kube-proxy, the SDN) it applies.

Both files are host files, read under `--root-mount`; so are the certificates and keys the
kubelet's kubeconfig names (absolute host paths, or relative to the kubeconfig's directory),
and a symlink among them (the kubelet's `kubelet-client-current.pem`) is followed as if the root
were `/`. Nothing resolves outside the root.

This module reads files and returns values; `mcd.kube.client` turns them into connections.
A missing file is a documented fallback (None; the caller logs it once); a file that exists but
cannot be used is an InputError naming the file and the JSON path of the bad value.
"""

from __future__ import annotations

import base64
import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mcd.config.findings import Finding, InputError, JsonPath
from mcd.config.yamllib import yaml
from mcd.host.root import HostRoot, PathEscapeError

# upstream's fixed paths (pkg/daemon/writer.go, cmd/machine-config-daemon/start.go)
KUBELET_KUBECONFIG = "/var/lib/kubelet/kubeconfig"
API_ENDPOINT_KUBECONFIG = "/etc/kubernetes/kubeconfig"

# the kubeconfig keys that name files, in a cluster entry and in a user entry
_CLUSTER_FILES = ("certificate-authority",)
_USER_FILES = ("client-certificate", "client-key", "tokenFile")
# credentials obtained by running a program or a plugin: the agent runs commands only through
# its one runner, never from a library, and a kubelet's kubeconfig has neither
_USER_PLUGINS = ("exec", "auth-provider")

Obj = dict[str, Any]


@dataclass(frozen=True)
class Endpoint:
    """The API server address the in-cluster client uses instead of the Service's."""

    host: str
    port: str
    server: str  # the URL as the file has it, for the log
    source: str  # the file on this machine it came from


def host_file(root: HostRoot, path: str) -> Path | None:
    """The file at node path `path` under `root`, symlinks followed inside it; None when absent.

    InputError when the path would leave the root or names something that is not a file.
    """
    try:
        found = root.join(path, follow_final=True)
    except PathEscapeError as exc:
        raise InputError(str(root.prefix / path.lstrip("/")), [Finding((), str(exc))]) from None
    if not found.exists():
        return None
    if not found.is_file():
        raise InputError(str(found), [Finding((), "not a regular file")])
    return found


def _load(file: Path) -> Obj:
    try:
        doc = yaml.safe_load(file.read_bytes())
    except OSError as exc:
        raise InputError(str(file), [Finding((), f"cannot read: {exc.strerror or exc}")]) from None
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" (line {where.line + 1})" if where is not None else ""
        raise InputError(str(file), [Finding((), f"not YAML{at}")]) from None
    if not isinstance(doc, dict):
        raise InputError(str(file), [Finding((), "not a kubeconfig (expected a mapping)")])
    return doc


def _named(doc: Obj, file: Path, section: str, name: Any) -> tuple[int, Obj]:
    """The index and body (`cluster`, `user` or `context`) of entry `name` of `section`."""
    entries = doc.get(section)
    if not isinstance(entries, list):
        raise InputError(str(file), [Finding((section,), "missing or not a list")])
    key = section[:-1]
    for i, entry in enumerate(entries):
        if isinstance(entry, dict) and entry.get("name") == name:
            body = entry.get(key)
            if not isinstance(body, dict):
                raise InputError(str(file), [Finding((section, i, key), "missing or not a mapping")])
            return i, body
    raise InputError(str(file), [Finding((section,), f"no entry named {name!r}")])


def _current(doc: Obj, file: Path) -> tuple[tuple[int, Obj], tuple[int, Obj] | None]:
    """The current context's cluster entry and user entry (None: the context names no user)."""
    name = doc.get("current-context")
    if not isinstance(name, str) or not name:
        raise InputError(str(file), [Finding(("current-context",), "missing or empty")])
    i, context = _named(doc, file, "contexts", name)
    cluster = context.get("cluster")
    if not isinstance(cluster, str) or not cluster:
        raise InputError(str(file), [Finding(("contexts", i, "context", "cluster"), "missing or empty")])
    user = context.get("user")
    return _named(doc, file, "clusters", cluster), (_named(doc, file, "users", user) if user else None)


def _server(cluster: Obj, where: JsonPath, file: Path) -> tuple[str, str, str]:
    """(server URL, host, port) of a cluster entry; InputError unless an https URL with a host."""
    server = cluster.get("server")
    text = server if isinstance(server, str) else ""
    try:
        url = urlsplit(text)
        port = url.port
    except ValueError:
        url, port = urlsplit(""), None
    if url.scheme != "https" or not url.hostname:
        shown = repr(server) if server is not None else "missing"
        raise InputError(str(file), [Finding((*where, "server"), f"{shown}: not an https://HOST[:PORT] URL")])
    return text, url.hostname, str(port or 443)


def api_endpoint(root: HostRoot, path: str) -> Endpoint | None:
    """The server of the current context of the node's kubeconfig at `path` (upstream: the kubelet's
    `/etc/kubernetes/kubeconfig`, whose server is `api-int`); None when `path` is empty or absent."""
    if not path:
        return None
    file = host_file(root, path)
    if file is None:
        return None
    doc = _load(file)
    (i, cluster), _ = _current(doc, file)
    server, host, port = _server(cluster, ("clusters", i, "cluster"), file)
    return Endpoint(host, port, server, str(file))


def node_writer_kubeconfig(root: HostRoot, path: str) -> tuple[Obj, Path] | None:
    """The kubelet's kubeconfig at node path `path`, every file it names replaced by that file's
    path on this machine, with the file it was read from; None when `path` is empty or absent."""
    if not path:
        return None
    file = host_file(root, path)
    if file is None:
        return None
    doc = copy.deepcopy(_load(file))
    (ci, cluster), user = _current(doc, file)
    _server(cluster, ("clusters", ci, "cluster"), file)
    base = path.rsplit("/", 1)[0] or "/"
    _localise(root, file, base, cluster, where=("clusters", ci, "cluster"), keys=_CLUSTER_FILES)
    if user is not None:
        ui, body = user
        for key in _USER_PLUGINS:
            if key in body:
                raise InputError(
                    str(file), [Finding(("users", ui, "user", key), "credential plugins are not supported")]
                )
        _localise(root, file, base, body, where=("users", ui, "user"), keys=_USER_FILES)
    return doc, file


def _localise(
    root: HostRoot, file: Path, base: str, entry: Obj, *, where: JsonPath, keys: tuple[str, ...]
) -> None:
    """Rewrite each file key of `entry` in place to the file's path under `root`."""
    for key in keys:
        value = entry.get(key)
        if value is None or (key != "tokenFile" and f"{key}-data" in entry):
            continue  # inline data wins over a file in client-go too
        if not isinstance(value, str) or not value:
            raise InputError(str(file), [Finding((*where, key), "not a file path")])
        node_path = value if value.startswith("/") else f"{base.rstrip('/')}/{value}"
        try:
            found = root.join(node_path, follow_final=True)
        except PathEscapeError as exc:
            raise InputError(str(file), [Finding((*where, key), str(exc))]) from None
        if not found.is_file():
            raise InputError(
                str(file), [Finding((*where, key), f"{value}: no such file under the root {root.prefix}")]
            )
        entry[key] = str(found)


# what `direct_settings` maps; any other key (inline client certificates, a proxy, a user name
# and password) is left to the official kubeconfig loader
_DIRECT_CLUSTER = {
    "server",
    "certificate-authority",
    "certificate-authority-data",
    "insecure-skip-tls-verify",
    "tls-server-name",
    "extensions",
}
_DIRECT_USER = {"client-certificate", "client-key", "token", "tokenFile", "extensions"}


def direct_settings(doc: Obj) -> dict[str, Any] | None:
    """The client configuration's attributes for a localised kubelet kubeconfig (from
    `node_writer_kubeconfig`) that uses only server, CA, client certificate files and a token;
    None for anything else.

    Why not always the official loader: importing it brings requests, oauthlib and pydantic
    (about 13 MB of the agent's resident memory), for a file that on every OpenShift node names
    a CA, a server and one certificate file.
    """
    cluster = _entry(doc, "clusters", "cluster")
    user = _entry(doc, "users", "user") if _context(doc).get("user") else {}
    if cluster is None or user is None or set(cluster) - _DIRECT_CLUSTER or set(user) - _DIRECT_USER:
        return None
    settings: dict[str, Any] = {"host": str(cluster["server"]).rstrip("/")}
    if "certificate-authority-data" in cluster:
        try:
            settings["ca_cert_data"] = base64.b64decode(str(cluster["certificate-authority-data"])).decode()
        except (ValueError, UnicodeDecodeError):
            return None  # the loader's own error message names it
    elif "certificate-authority" in cluster:
        settings["ssl_ca_cert"] = cluster["certificate-authority"]
    if cluster.get("insecure-skip-tls-verify"):
        settings["verify_ssl"] = False
    if "tls-server-name" in cluster:
        settings["tls_server_name"] = cluster["tls-server-name"]
    if "client-certificate" in user:
        settings["cert_file"] = user["client-certificate"]
    if "client-key" in user:
        settings["key_file"] = user["client-key"]
    token = user.get("token")
    if token is None and "tokenFile" in user:
        token = Path(user["tokenFile"]).read_text().strip()
    if token:
        settings["api_key"] = {"BearerToken": f"Bearer {token}"}
    return settings


def _context(doc: Obj) -> Obj:
    contexts = [c for c in doc.get("contexts") or [] if c.get("name") == doc.get("current-context")]
    return dict(contexts[0].get("context") or {}) if contexts else {}


def _entry(doc: Obj, section: str, key: str) -> Obj | None:
    """The current context's entry of `section` (already checked by `_current`)."""
    name = _context(doc).get(key)
    found = [e for e in doc.get(section) or [] if isinstance(e, dict) and e.get("name") == name]
    body = found[0].get(key) if found else None
    return dict(body) if isinstance(body, dict) else None
