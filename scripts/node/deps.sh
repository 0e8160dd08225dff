#!/usr/bin/env bash
# What `make node-test` needs beyond `make setup`: root, mmdebstrap (builds the node's Debian
# root), systemd-container (systemd-nspawn boots it), util-linux's nsenter and kubectl (plays the
# controller against `mcd-sim sim-cluster`). apt-get runs only when a package is missing.
set -euo pipefail

say() { printf 'node-test: %s\n' "$*"; }
die() { printf 'node-test: error: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "the node tier boots containers with systemd-nspawn: run it as root"
command -v apt-get >/dev/null 2>&1 || die "the node tier builds its Debian root with mmdebstrap: needs apt-get (Debian/Ubuntu)"

missing=()
for pkg in mmdebstrap systemd-container util-linux; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
    say "installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # another apt client may hold the lock for a while on a fresh machine: wait for it
    apt-get -o DPkg::Lock::Timeout=600 update -qq
    apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}"
fi
command -v kubectl >/dev/null 2>&1 \
    || die "kubectl is not installed (not in Debian 12's archive): install kubectl >= 1.29 first"
