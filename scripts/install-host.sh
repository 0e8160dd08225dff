#!/usr/bin/env bash
# Install mcd on a host as its node agent under systemd (instead of the DaemonSet's pod), from
# this checkout, in one command:
#
#   sudo scripts/install-host.sh
#
# 1. mcd and its pinned dependencies go into an environment of their own, /opt/mcd (a virtualenv:
#    no `pip install` into the system's Python, which Debian 12 and Fedora refuse, PEP 668);
#    /usr/local/bin/mcd points at it. dbus-python and systemd-python are built from source: on
#    Debian/Ubuntu the build packages are installed when missing, elsewhere they are named.
# 2. The units go to /etc/systemd/system: machine-config-daemon.service (ExecStart the
#    environment's mcd) and, as upstream ships it, machine-config-daemon-firstboot.service with
#    firstboot-osupdate.target (the first boot's OS update on an ostree host).
# 3. The RBAC the host's identity needs goes to /opt/mcd/share/mcd/host-rbac.yaml: the agent
#    reads and writes with the kubelet's kubeconfig (system:node:<node>), to which Kubernetes
#    gives no MachineConfig reads; an admin applies it once per cluster (printed at the end).
# 4. systemctl daemon-reload, enable both units, start the agent (not with --no-start).
#
# Options:
#   --venv DIR      the environment (default /opt/mcd); the unit's ExecStart follows it
#   --prefix DIR    install under DIR as if it were / (a staging tree, a test): the environment's
#                   scripts name DIR's paths, so it runs from there only; implies --no-start
#   --no-start      do not run systemctl
#   --units-only    mcd is already in --venv (a package, an earlier run): only the units, the
#                   link and the RBAC file
#   --python PY     the interpreter for the environment (default: the first Python >= 3.11)
# pip's own variables apply (PIP_INDEX_URL, PIP_FIND_LINKS with PIP_NO_INDEX=1 for an offline
# wheelhouse, PIP_CERT behind a TLS-intercepting proxy).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=/opt/mcd
PREFIX=
START=1
UNITS_ONLY=0
PYTHON_CMD=${PYTHON:-}

say() { printf 'install-host: %s\n' "$*"; }
die() { printf 'install-host: error: %s\n' "$*" >&2; exit 1; }

while [ $# -gt 0 ]; do
    case "$1" in
        --venv) VENV=${2:?--venv needs a directory}; shift 2 ;;
        --prefix) PREFIX=${2:?--prefix needs a directory}; START=0; shift 2 ;;
        --no-start) START=0; shift ;;
        --units-only) UNITS_ONLY=1; shift ;;
        --python) PYTHON_CMD=${2:?--python needs an interpreter}; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument: $1 (see --help)" ;;
    esac
done
case "$VENV" in /*) ;; *) die "--venv must be an absolute path: $VENV" ;; esac
if [ -n "$PREFIX" ]; then
    mkdir -p "$PREFIX"
    PREFIX=$(cd "$PREFIX" && pwd)
elif [ "$(id -u)" -ne 0 ]; then
    die "run as root (it writes $VENV and /etc/systemd/system), or give --prefix DIR"
fi
DEST=$PREFIX$VENV

find_python() {
    local cand
    for cand in $PYTHON_CMD python3.11 python3.12 python3.13 python3; do
        if command -v "$cand" >/dev/null 2>&1 \
            && "$cand" -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1; then
            command -v "$cand"
            return 0
        fi
    done
    return 1
}

# --- build prerequisites (dbus-python, systemd-python compile against these) -----------------
build_prerequisites() {
    local py=$1 missing=() pkg
    "$py" -c 'import ensurepip, venv' >/dev/null 2>&1 || missing+=(python3-venv)
    "$py" -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
        >/dev/null 2>&1 || missing+=(python3-dev)
    if command -v dpkg >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
        for pkg in gcc pkg-config libdbus-1-dev libglib2.0-dev libsystemd-dev; do
            dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
        done
        [ ${#missing[@]} -eq 0 ] && return 0
        if [ -n "$PREFIX" ] || [ "$(id -u)" -ne 0 ]; then
            say "missing build packages (not installed with --prefix): ${missing[*]}"
            return 0
        fi
        say "installing build packages: ${missing[*]}"
        DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
            --no-install-recommends "${missing[@]}" \
            || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
                 --no-install-recommends "${missing[@]}"; }
    elif command -v dnf >/dev/null 2>&1; then
        say "Fedora/RHEL: the build needs gcc pkgconf-pkg-config dbus-devel glib2-devel systemd-devel python3-devel"
        say "  (sudo dnf install them if the build below fails)"
    fi
}

# --- 1. the environment -----------------------------------------------------------------------
if [ "$UNITS_ONLY" -eq 0 ]; then
    PY=$(find_python) || die "no Python >= 3.11 found (give --python)"
    build_prerequisites "$PY"
    if [ ! -x "$DEST/bin/python" ] || ! "$DEST/bin/python" -c '' >/dev/null 2>&1; then
        say "creating the environment $DEST with $PY ($("$PY" --version 2>&1))"
        rm -rf "$DEST"
        mkdir -p "$(dirname "$DEST")"
        "$PY" -m venv "$DEST"
    fi
    export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PIP_ROOT_USER_ACTION=ignore
    # a distribution's older pip (Debian 12: 23.0) cannot build the setup.py-only sdists
    # (pyinotify, systemd-python) without `wheel`; 23.1 and later build them in isolation
    "$DEST/bin/python" -m pip install -q "pip>=23.1"
    say "installing mcd from $REPO into $DEST"
    # the checkout's package alone, with its pinned dependencies; no simulator, no dev tools
    "$DEST/bin/python" -m pip install -q "$REPO"
    # what mcd never imports (the kubernetes package's generated classes, its asyncio client
    # and what only that needs), as the image leaves it out
    sh "$REPO/scripts/prune-env.sh" "$DEST"
fi
[ -x "$DEST/bin/mcd" ] || die "$DEST/bin/mcd is missing (run without --units-only)"
"$DEST/bin/mcd" --help >/dev/null || die "$DEST/bin/mcd does not run"

# --- 2. the units -----------------------------------------------------------------------------
UNITDIR=$PREFIX/etc/systemd/system
mkdir -p "$UNITDIR"
install_unit() {  # name: the repository's unit with ExecStart's /opt/mcd replaced by $VENV
    local tmp
    tmp=$(mktemp "$UNITDIR/.$1.XXXXXX")
    sed "s#/opt/mcd/bin/mcd#$VENV/bin/mcd#g" "$REPO/systemd/$1" >"$tmp"
    chmod 0644 "$tmp"
    mv -f "$tmp" "$UNITDIR/$1"
}
for unit in machine-config-daemon.service machine-config-daemon-firstboot.service firstboot-osupdate.target; do
    install_unit "$unit"
done
say "units in $UNITDIR: machine-config-daemon.service, machine-config-daemon-firstboot.service, firstboot-osupdate.target"

# mcd on PATH for the commands an admin runs on the host (mcd status, mcd plan)
mkdir -p "$PREFIX/usr/local/bin"
link=$PREFIX/usr/local/bin/mcd
if [ -e "$link" ] && [ ! -L "$link" ]; then
    say "left $link alone (not a link): the agent runs $VENV/bin/mcd"
else
    ln -sfn "$VENV/bin/mcd" "$link"
fi

# --- 3. the RBAC for the host's identity ------------------------------------------------------
mkdir -p "$DEST/share/mcd"
install -m 0644 "$REPO/manifests/host/node-identity-rbac.yaml" "$DEST/share/mcd/host-rbac.yaml"

# --- 4. systemd -------------------------------------------------------------------------------
if [ "$START" -eq 1 ]; then
    systemctl daemon-reload
    systemctl enable machine-config-daemon-firstboot.service firstboot-osupdate.target >/dev/null
    if [ -e /var/lib/kubelet/kubeconfig ]; then
        systemctl enable --now machine-config-daemon.service
        say "started machine-config-daemon.service (journalctl -u machine-config-daemon -f)"
    else
        systemctl enable machine-config-daemon.service
        say "enabled machine-config-daemon.service; it starts once /var/lib/kubelet/kubeconfig exists"
    fi
fi
say "done: mcd in $DEST"
say "once per cluster, as an admin: kubectl apply -f $VENV/share/mcd/host-rbac.yaml"
say "  (lets the nodes' kubelet identity read MachineConfigs and write their MachineConfigNodes)"
