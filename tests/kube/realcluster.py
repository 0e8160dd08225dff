"""A throwaway real control plane: Debian's etcd and a kube-apiserver v1.20.2 built by
scripts/kube/build-apiserver.sh, on loopback, free ports and a temporary directory.

`RealCluster(apiserver_binary).start()` makes the certificates (openssl: a CA, a serving
certificate for 127.0.0.1/localhost, the `admin` client of system:masters, a service-account key
pair), an audit policy, starts etcd and the API server with Node,RBAC authorization and
NodeRestriction, waits until /readyz answers 200 and RBAC answers as it should, and writes an
admin kubeconfig. Then: node_kubeconfig(name) mints a system:node:NAME client certificate,
token(sa, namespace) asks TokenRequest for a service-account token, restart_apiserver() and
restart_etcd() restart one process on the same data, audit_records() parses the audit log, and
stop() ends both and removes the directory (unless keep=True).

Used by tests/kube (the `make kube-test` tier) and by scripts/kube/cluster.py (a thin command line).
Nothing here belongs to the product.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "scripts" / "kube" / "build-apiserver.sh"
VERSION = "v1.20.2"

START_TIMEOUT = 120.0  # /readyz 200 came after 3-4 s alone, 20 s on a machine loaded 4x over
RBAC_TIMEOUT = 30.0  # RBAC answered 403 for about a second after /readyz
STOP_TIMEOUT = 15.0

AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
# one record per request, when its response is complete: user, verb, resource, namespace, name
# and response code (Metadata carries no bodies)
omitStages: ["RequestReceived"]
rules:
- level: Metadata
"""


class ClusterError(RuntimeError):
    """The control plane could not be built, started or reached."""


def build_apiserver() -> Path:
    """Runs the build script (a cached binary makes it return at once) and returns the binary."""
    override = os.environ.get("MCD_KUBE_APISERVER")
    if override:
        return Path(override)
    done = subprocess.run(["bash", str(BUILD_SCRIPT)], stdout=subprocess.PIPE, text=True, check=False)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise ClusterError(f"{BUILD_SCRIPT} exited {done.returncode}")
    return Path(lines[-1])


def free_ports(count: int) -> list[int]:
    """Distinct ports the kernel hands out for 127.0.0.1 (all bound to port 0 at once, then
    released)."""
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(count):
            s = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            s.bind(("127.0.0.1", 0))
            ports.append(int(s.getsockname()[1]))
        return ports


def wait_for(what: str, check: Callable[[], bool], timeout: float, interval: float = 0.1) -> None:
    """Polls `check` until it is true; ClusterError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return
        if time.monotonic() > deadline:
            raise ClusterError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def _openssl(*args: str, cwd: Path) -> None:
    done = subprocess.run(
        ["openssl", *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False
    )
    if done.returncode != 0:
        raise ClusterError(f"openssl {args[0]} failed: {done.stdout.strip()}")


@dataclass(frozen=True)
class Identity:
    """A client certificate (cert and key files) or a bearer token."""

    cert: Path | None = None
    key: Path | None = None
    token: str | None = None


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class RealCluster:
    """One etcd and one kube-apiserver on loopback, in a temporary directory."""

    def __init__(self, apiserver: Path, *, etcd: str = "etcd", keep: bool = False) -> None:
        self.apiserver_binary = apiserver
        found = shutil.which(etcd)
        if found is None:
            raise ClusterError(f"{etcd} not found: install Debian's etcd-server (build-apiserver.sh does)")
        self.etcd_binary = found
        self.keep = keep
        self.workdir = Path(tempfile.mkdtemp(prefix="mcd-kube-"))
        self.pki = self.workdir / "pki"
        self.etcd_data = self.workdir / "etcd-data"
        self.audit_log = self.workdir / "audit.log"
        self.admin_kubeconfig = self.workdir / "admin.kubeconfig"
        self.port = 0
        self.etcd_client_port = 0
        self.etcd_peer_port = 0
        self._etcd: subprocess.Popen[bytes] | None = None
        self._apiserver: subprocess.Popen[bytes] | None = None
        self._cert_lock = threading.Lock()
        self.admin = Identity()

    # -- addresses -------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def etcd_url(self) -> str:
        return f"http://127.0.0.1:{self.etcd_client_port}"

    @property
    def ca(self) -> Path:
        return self.pki / "ca.crt"

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> RealCluster:
        try:
            self.pki.mkdir(mode=0o700)
            self._make_pki()
            (self.workdir / "audit-policy.yaml").write_text(AUDIT_POLICY)
            self.port, self.etcd_client_port, self.etcd_peer_port = free_ports(3)
            self.admin_kubeconfig.write_text(self._kubeconfig("admin", self.admin))
            self._start_etcd()
            self._start_apiserver()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for proc in (self._apiserver, self._etcd):
            if proc is not None:
                _terminate(proc)
        self._apiserver = self._etcd = None
        if not self.keep:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def restart_apiserver(self) -> None:
        """Stops the API server (SIGTERM) and starts it again on the same port and etcd."""
        self.stop_apiserver()
        self._start_apiserver()

    def stop_apiserver(self) -> None:
        """Stops the API server (SIGTERM): an outage, until start_apiserver()."""
        if self._apiserver is not None:
            _terminate(self._apiserver)
        self._apiserver = None

    def start_apiserver(self) -> None:
        """Starts it again on the same port and etcd; returns once it is ready."""
        self._start_apiserver()

    def restart_etcd(self) -> None:
        """Stops etcd and starts it again on the same data dir; returns once the API server is
        ready on it again."""
        if self._etcd is not None:
            _terminate(self._etcd)
        self._start_etcd()
        self._wait_ready()

    def __enter__(self) -> RealCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- identities ------------------------------------------------------------------------------

    def node_identity(self, name: str) -> Identity:
        """A client certificate for system:node:NAME in group system:nodes (made once per name)."""
        return self._client_cert(f"node-{name}", f"system:node:{name}", "system:nodes")

    def node_kubeconfig(self, name: str) -> Path:
        path = self.workdir / f"node-{name}.kubeconfig"
        with self._cert_lock:
            exists = path.exists()
        if not exists:
            text = self._kubeconfig(f"system:node:{name}", self.node_identity(name))
            with self._cert_lock:
                path.write_text(text)
        return path

    def client_identity(self, user: str, *groups: str) -> Identity:
        """A client certificate for any user name and groups (CN and O)."""
        slug = "".join(c if c.isalnum() else "-" for c in user)
        return self._client_cert(f"user-{slug}", user, *groups)

    def token(self, sa: str, namespace: str, *, duration: str = "1h") -> str:
        """A bound service-account token from TokenRequest (`kubectl create token`); the
        ServiceAccount must exist (no controller-manager makes `default` ones here)."""
        out = self.kubectl("create", "token", sa, "-n", namespace, f"--duration={duration}").stdout
        return out.strip()

    def token_kubeconfig(self, name: str, token: str) -> Path:
        path = self.workdir / f"token-{name}.kubeconfig"
        path.write_text(self._kubeconfig(name, Identity(token=token)))
        return path

    # -- clients ---------------------------------------------------------------------------------

    def kubectl(
        self, *args: str, kubeconfig: Path | None = None, stdin: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        config = kubeconfig or self.admin_kubeconfig
        done = subprocess.run(
            ["kubectl", f"--kubeconfig={config}", *args],
            input=stdin,
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        if check and done.returncode != 0:
            raise ClusterError(f"kubectl {' '.join(args)} exited {done.returncode}: {done.stderr.strip()}")
        return done

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        identity: Identity | None = None,
        content_type: str = "application/json",
        timeout: float = 10.0,
    ) -> Response:
        """One HTTPS request as `identity` (admin by default); any status is returned, not raised."""
        who = identity or self.admin
        ctx = ssl.create_default_context(cafile=str(self.ca))
        if who.cert is not None and who.key is not None:
            ctx.load_cert_chain(str(who.cert), str(who.key))
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", content_type)
        req.add_header("Accept", "application/json")
        if who.token:
            req.add_header("Authorization", f"Bearer {who.token}")
        try:
            with urllib.request.urlopen(req, context=ctx, timeout=timeout) as resp:
                return Response(resp.status, resp.read())
        except urllib.error.HTTPError as err:
            return Response(err.code, err.read())

    def audit_records(self) -> list[dict[str, Any]]:
        """Every audit event written so far (one JSON object a line, audit.k8s.io/v1 Event)."""
        if not self.audit_log.exists():
            return []
        records = []
        for line in self.audit_log.read_text().splitlines():
            if line.strip():
                with contextlib.suppress(json.JSONDecodeError):  # a line being written
                    records.append(json.loads(line))
        return records

    # -- internals -------------------------------------------------------------------------------

    def _make_pki(self) -> None:
        p = self.pki
        _openssl(
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
            "-days", "2", "-subj", "/CN=mcd-kube-test-ca",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            cwd=p,
        )  # fmt: skip
        self._sign("apiserver", "/CN=kube-apiserver", "serverAuth", "IP:127.0.0.1,DNS:localhost")
        _openssl("genrsa", "-out", "sa.key", "2048", cwd=p)
        _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=p)
        self.admin = self._client_cert("admin", "admin", "system:masters")

    def _client_cert(self, stem: str, cn: str, *groups: str) -> Identity:
        with self._cert_lock:
            cert, key = self.pki / f"{stem}.crt", self.pki / f"{stem}.key"
            if not cert.exists():
                subject = "".join(f"/O={g}" for g in groups) + f"/CN={cn}"
                self._sign(stem, subject, "clientAuth", None)
            return Identity(cert=cert, key=key)

    def _sign(self, stem: str, subject: str, usage: str, san: str | None) -> None:
        ext = self.pki / f"{stem}.ext"
        lines = [
            "basicConstraints=critical,CA:FALSE",
            "keyUsage=critical,digitalSignature,keyEncipherment",
            f"extendedKeyUsage={usage}",
        ]
        if san:
            lines.append(f"subjectAltName={san}")
        ext.write_text("\n".join(lines) + "\n")
        _openssl(
            "req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{stem}.key", "-out", f"{stem}.csr",
            "-subj", subject,
            cwd=self.pki,
        )  # fmt: skip
        _openssl(
            "x509", "-req", "-in", f"{stem}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-set_serial", str(int.from_bytes(os.urandom(8), "big")),
            "-days", "2", "-extfile", ext.name, "-out", f"{stem}.crt",
            cwd=self.pki,
        )  # fmt: skip

    def _kubeconfig(self, user: str, who: Identity) -> str:
        creds: dict[str, str] = {}
        if who.cert is not None and who.key is not None:
            creds = {"client-certificate": str(who.cert), "client-key": str(who.key)}
        if who.token:
            creds = {"token": who.token}
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "real", "cluster": {"server": self.url, "certificate-authority": str(self.ca)}}
            ],
            "users": [{"name": user, "user": creds}],
            "contexts": [{"name": "real", "context": {"cluster": "real", "user": user}}],
            "current-context": "real",
        }
        return json.dumps(config, indent=2) + "\n"  # JSON is YAML

    def _start_etcd(self) -> None:
        peer = f"http://127.0.0.1:{self.etcd_peer_port}"
        self._etcd = _spawn(
            [
                self.etcd_binary,
                "--name=default",
                f"--data-dir={self.etcd_data}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=default={peer}",
                "--initial-cluster-state=new",
            ],
            self.workdir / "etcd.log",
        )

        def healthy() -> bool:
            _alive(self._etcd, "etcd", self.workdir / "etcd.log")
            try:
                with urllib.request.urlopen(self.etcd_url + "/health", timeout=2) as resp:
                    return bool(json.loads(resp.read()).get("health") == "true")
            except (OSError, ValueError):
                return False

        wait_for("etcd /health", healthy, START_TIMEOUT)

    def _start_apiserver(self) -> None:
        p = self.pki
        self._apiserver = _spawn(
            [
                str(self.apiserver_binary),
                f"--etcd-servers={self.etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={self.port}",
                "--insecure-port=0",
                f"--cert-dir={self.workdir / 'apiserver-certs'}",
                "--service-cluster-ip-range=10.0.0.0/24",
                f"--tls-cert-file={p / 'apiserver.crt'}",
                f"--tls-private-key-file={p / 'apiserver.key'}",
                f"--client-ca-file={p / 'ca.crt'}",
                f"--service-account-key-file={p / 'sa.pub'}",
                f"--service-account-signing-key-file={p / 'sa.key'}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                "--authorization-mode=Node,RBAC",
                "--enable-admission-plugins=NodeRestriction",
                "--allow-privileged=true",
                f"--audit-policy-file={self.workdir / 'audit-policy.yaml'}",
                f"--audit-log-path={self.audit_log}",
                "--endpoint-reconciler-type=none",
            ],
            self.workdir / "apiserver.log",
        )
        self._wait_ready()
        self._wait_rbac()

    def _wait_ready(self) -> None:
        def ready() -> bool:
            _alive(self._apiserver, "kube-apiserver", self.workdir / "apiserver.log")
            try:
                return self.request("GET", "/readyz", timeout=2).status == 200
            except OSError:
                return False

        wait_for("kube-apiserver /readyz", ready, START_TIMEOUT)

    def _wait_rbac(self) -> None:
        """/readyz is 200 before the RBAC authorizer has seen the bootstrap bindings; until then
        ordinary users are refused. Ask (as admin, whose system:masters bypasses RBAC) whether any
        authenticated user may create a SelfSubjectAccessReview, which system:basic-user grants,
        until the answer is yes."""
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": "mcd-rbac-probe",
                "groups": ["system:authenticated"],
                "resourceAttributes": {
                    "group": "authorization.k8s.io",
                    "resource": "selfsubjectaccessreviews",
                    "verb": "create",
                },
            },
        }

        def allowed() -> bool:
            resp = self.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
            return resp.status == 201 and bool(resp.json().get("status", {}).get("allowed"))

        wait_for("RBAC to allow system:basic-user", allowed, RBAC_TIMEOUT)

    def describe(self) -> dict[str, str]:
        """What a caller needs: the server, the admin kubeconfig, the directory, the logs."""
        return {
            "server": self.url,
            "kubeconfig": str(self.admin_kubeconfig),
            "workdir": str(self.workdir),
            "ca": str(self.ca),
            "etcd": self.etcd_url,
            "audit_log": str(self.audit_log),
            "apiserver_log": str(self.workdir / "apiserver.log"),
            "etcd_log": str(self.workdir / "etcd.log"),
        }


def _spawn(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def _alive(proc: subprocess.Popen[bytes] | None, name: str, log: Path) -> None:
    if proc is None or proc.poll() is not None:
        tail = log.read_text(errors="replace").splitlines()[-15:] if log.exists() else []
        code = None if proc is None else proc.returncode
        raise ClusterError(f"{name} exited ({code}); last lines of {log}:\n" + "\n".join(tail))


def _terminate(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def running(apiserver: Path | None = None, *, keep: bool = False) -> Iterator[RealCluster]:
    """A started cluster for the duration of a `with` block."""
    cluster = RealCluster(apiserver or build_apiserver(), keep=keep)
    with cluster:
        yield cluster


def cached_apiserver() -> Path | None:
    """The binary `build_apiserver()` would return, if it needs no build: MCD_KUBE_APISERVER, or
    the cache entry the build script's key names (its version and its own hash), else None. For
    tiers that use the real server when it is at hand and skip otherwise (tests/node)."""
    override = os.environ.get("MCD_KUBE_APISERVER")
    if override:
        return Path(override) if Path(override).is_file() else None
    import hashlib

    key = f"{VERSION}-{hashlib.sha256(BUILD_SCRIPT.read_bytes()).hexdigest()[:12]}"
    binary = Path(os.environ.get("MCD_KUBE_CACHE", "/var/tmp/mcd-kube-cache")) / key / "kube-apiserver"
    return binary if os.access(binary, os.X_OK) else None


def inline_kubeconfig(cluster: RealCluster, user: str, who: Identity) -> str:
    """A kubeconfig with the CA and the credentials inside it (no paths of this host), for a
    client in another root, such as a booted node."""
    import base64

    def data(path: Path) -> str:
        return base64.b64encode(path.read_bytes()).decode()

    ca = data(cluster.ca)
    creds: dict[str, str] = {"token": who.token} if who.token else {}
    if who.cert is not None and who.key is not None:
        creds = {"client-certificate-data": data(who.cert), "client-key-data": data(who.key)}
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "real", "cluster": {"server": cluster.url, "certificate-authority-data": ca}}],
        "users": [{"name": user, "user": creds}],
        "contexts": [{"name": "real", "context": {"cluster": "real", "user": user}}],
        "current-context": "real",
    }
    return json.dumps(config, indent=2) + "\n"
