#!/usr/bin/env python3
"""Peak memory of `validate`, `start --once-from` and `check-disk` for one large file; prints JSON.

The config holds one file of SIZE zero bytes (default 2 GiB), gzip-compressed and inlined as a
base64 data URL (a few MB of config). It is built in a temp directory, never kept. Each command
runs as its own child process; its max RSS comes from wait4, so the figures are per command:
  validate_max_rss_mb    mcd validate --max-file-size CAP CONFIG
  start_max_rss_mb       mcd start --once-from CONFIG --root-mount SANDBOX --skip-reboot
  check_disk_max_rss_mb  mcd check-disk --root-mount SANDBOX
  *_s                    wall time of each
All three take the file size cap CAP (`--max-file-size`, default 3G here).
Usage: bench/bigfile.py [--size 2G] [--cap 3G]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

MCD = [sys.executable, "-m", "mcd"]
CHUNK = 1 << 20


def _size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1].upper()] if text[-1].upper() in units else int(text)


def gzip_zeros(size: int) -> bytes:
    """gzip of `size` zero bytes, made in pieces (the input never exists in memory)."""
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)  # wbits 31: a gzip header and trailer
    zeros = bytes(CHUNK)
    out = []
    left = size
    while left:
        n = min(left, CHUNK)
        out.append(comp.compress(zeros if n == CHUNK else bytes(n)))
        left -= n
    out.append(comp.flush())
    return b"".join(out)


def write_config(path: Path, size: int) -> None:
    data = base64.b64encode(gzip_zeros(size)).decode()
    obj = {
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": "bigfile"},
        "spec": {
            "config": {
                "ignition": {"version": "3.2.0"},
                "storage": {
                    "files": [
                        {
                            "path": "/etc/big.img",
                            "mode": 0o644,
                            "contents": {"source": f"data:;base64,{data}", "compression": "gzip"},
                        }
                    ]
                },
            }
        },
    }
    path.write_text(json.dumps(obj))


def measure(argv: list[str]) -> tuple[int, float, float]:
    """Exit code, max RSS (MB) and wall time (s) of one child."""
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_maxrss / 1024, time.monotonic() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="2G")
    ap.add_argument("--cap", default="3G")
    args = ap.parse_args()
    size = _size(args.size)
    figures: dict[str, object] = {"size_bytes": size, "cap": args.cap}
    with tempfile.TemporaryDirectory() as tmp:
        config, root = Path(tmp) / "big.json", Path(tmp) / "root"
        write_config(config, size)
        figures["config_bytes"] = config.stat().st_size
        sandbox = [sys.executable, "-m", "mcd_sim", "sandbox", str(root)]
        subprocess.run(sandbox, check=True, stdout=subprocess.DEVNULL)
        cap = ["--max-file-size", args.cap]
        runs = {
            "validate": [*MCD, "validate", "--max-file-size", args.cap, str(config)],
            "start": [
                *MCD,
                "start",
                "--once-from",
                str(config),
                "--root-mount",
                str(root),
                "--skip-reboot",
                *cap,
            ],
            "check_disk": [*MCD, "check-disk", "--root-mount", str(root), *cap],
        }
        for name, argv in runs.items():
            code, rss, secs = measure(argv)
            figures[f"{name}_exit"] = code
            figures[f"{name}_max_rss_mb"] = round(rss, 1)
            figures[f"{name}_s"] = round(secs, 2)
        big = root / "etc" / "big.img"
        figures["written_bytes"] = big.stat().st_size if big.exists() else 0
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
