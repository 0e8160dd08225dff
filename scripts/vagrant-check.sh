#!/usr/bin/env bash
# `make vagrant-check`: the end-to-end VM's files without the VM. Installs vagrant and the
# vagrant-libvirt plugin from apt when they are missing (root, the Debian mirror), so that
# `vagrant validate` checks the libvirt provider's settings too, then runs the packaging tests
# of vagrant/ (tests/packaging/test_vagrant.py). Exits 0 with "SKIP: <reason>" when vagrant
# cannot be installed here. Booting the VM needs a Fedora CoreOS box: see vagrant/README.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

skip() { printf 'vagrant-check: SKIP: %s\n' "$*"; exit 0; }

if ! command -v vagrant >/dev/null || ! dpkg -s vagrant-libvirt >/dev/null 2>&1; then
    command -v apt-get >/dev/null || skip "vagrant is not installed and there is no apt-get to install it"
    [ "$(id -u)" -eq 0 ] || skip "vagrant is not installed and installing it needs root"
    echo "vagrant-check: installing vagrant and vagrant-libvirt from apt"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -qq --no-install-recommends vagrant vagrant-libvirt >/dev/null 2>&1; then
        apt-get update -qq >/dev/null 2>&1 || skip "apt-get update failed (no Debian mirror?)"
        apt-get install -y -qq --no-install-recommends vagrant vagrant-libvirt >/dev/null 2>&1 \
            || skip "apt-get could not install vagrant and vagrant-libvirt"
    fi
fi
echo "vagrant-check: $(vagrant --version), plugins: $(vagrant plugin list 2>/dev/null | tr '\n' ' ')"
exec .venv/bin/python -m pytest -q -p no:cacheprovider tests/packaging/test_vagrant.py
