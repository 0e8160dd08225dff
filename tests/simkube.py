"""Talking to the stand-in API server as its users do: the real kubectl with a private home and
discovery cache, and one raw HTTPS request (no client, no retries). A module of its own, not
`conftest`: a test importing from `conftest` gets whichever conftest was loaded first."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from mcd_sim.apiserver import ApiServer


@dataclass
class Kubectl:
    """Runs the real kubectl against the stand-in with a private HOME and discovery cache."""

    kubeconfig: Path
    home: Path

    def run(self, *args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.home),
            "KUBECONFIG": str(self.kubeconfig),
            "KUBECACHEDIR": str(self.home / "cache"),
        }
        proc = subprocess.run(
            ["kubectl", "--cache-dir", str(self.home / "cache"), *args],
            env=env, capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
        return proc

    def __call__(self, *args: str) -> str:
        return self.run(*args).stdout

    def popen(self, *args: str) -> subprocess.Popen[str]:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.home),
               "KUBECONFIG": str(self.kubeconfig)}  # fmt: skip
        return subprocess.Popen(
            ["kubectl", "--cache-dir", str(self.home / "cache"), *args],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip


def raw_request(
    sim: ApiServer, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    """One HTTPS request with the server's token and CA, no client-side retries."""
    import ssl
    import urllib.error
    import urllib.request

    assert sim.cert is not None
    ctx = ssl.create_default_context(cadata=sim.cert.cert_pem.decode())
    req = urllib.request.Request(
        sim.url + path,
        data=body,
        method=method,
        headers={"Authorization": f"Bearer {sim.token}", **(headers or {})},
    )
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
            return int(resp.status), dict(resp.headers.items()), resp.read()
    except urllib.error.HTTPError as err:
        with err:
            return err.code, dict(err.headers.items()), err.read()
