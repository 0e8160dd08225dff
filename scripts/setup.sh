#!/usr/bin/env bash
# Newcomer setup: system build prerequisites, then .venv with mcd and its dev tools.
# Idempotent and fast on a re-run: apt runs only when a package is missing, pip only when
# pyproject.toml or sim/pyproject.toml is newer than the stamp .venv/.installed. The simulator
# (sim/, not part of the node's wheel) is installed beside mcd for the tests and `make demo`.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
VENV=.venv
STAMP=$VENV/.installed

say() { printf 'setup: %s\n' "$*"; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }

# First interpreter >= 3.11; $PYTHON overrides the search.
find_python() {
    local cand
    for cand in ${PYTHON:-} python3.11 python3.12 python3.13 python3 python; do
        # pyenv shims exist for versions that are not selected and fail when run: test by running.
        if command -v "$cand" >/dev/null 2>&1 \
            && "$cand" -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1; then
            command -v "$cand"
            return 0
        fi
    done
    return 1
}

# --- system packages -------------------------------------------------------------------------
# dbus-python and systemd-python build from source against these; dbus and
# systemd-journal-remote are used by the host-level tests.
APT_PACKAGES=(libdbus-1-dev libglib2.0-dev libsystemd-dev pkg-config gcc dbus systemd-journal-remote)
FEDORA_HINT="sudo dnf install dbus-devel glib2-devel systemd-devel pkgconf-pkg-config gcc python3-devel systemd-journal-remote"

install_system_packages() {
    local missing=() pkg py
    for pkg in "${APT_PACKAGES[@]}"; do
        dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
    done
    py=$(find_python || true)
    if [ -z "$py" ]; then
        missing+=(python3 python3-venv python3-dev)
    else
        # Debian's own python3 ships venv/ensurepip and the C headers in separate packages.
        "$py" -c 'import ensurepip, venv' >/dev/null 2>&1 || missing+=(python3-venv)
        "$py" -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
            >/dev/null 2>&1 || missing+=(python3-dev)
    fi
    [ ${#missing[@]} -eq 0 ] && return 0

    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 || die "need root or sudo to install: ${missing[*]}"
        sudo=(sudo)
    fi
    say "installing system packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get update -qq
    "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

if command -v dpkg >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
    install_system_packages
elif command -v dnf >/dev/null 2>&1; then
    say "not Debian/Ubuntu: make sure these are installed (continuing anyway):"
    say "  $FEDORA_HINT"
else
    say "unknown distribution: install the development headers of dbus-1, glib-2.0 and libsystemd,"
    say "pkg-config, a C compiler, Python >= 3.11 headers and systemd-journal-remote (continuing anyway)"
fi

# --- virtualenv ------------------------------------------------------------------------------
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c '' >/dev/null 2>&1; then
    # Missing, or its interpreter is gone (moved checkout, removed pyenv version): start over.
    PY=$(find_python) || die "no Python >= 3.11 found (tried \$PYTHON, python3.11, python3.12, python3.13, python3, python)"
    say "creating $VENV with $PY ($("$PY" --version 2>&1))"
    rm -rf "$VENV"
    "$PY" -m venv "$VENV"
fi

if [ -f "$STAMP" ] && [ "$STAMP" -nt pyproject.toml ] && [ "$STAMP" -nt sim/pyproject.toml ]; then
    say "$VENV is up to date (delete $STAMP to force a reinstall)"
    exit 0
fi

export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
say "installing mcd and dev tools into $VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q -e '.[dev]' -e ./sim
touch "$STAMP"
say "done ($("$VENV/bin/python" --version 2>&1))"
