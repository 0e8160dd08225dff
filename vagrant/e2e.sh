#!/bin/bash
# The end-to-end steps, run as root inside the Fedora CoreOS VM by the Vagrantfile's
# provisioners. mcd runs as the DaemonSet's pod would: the image from the checkout's
# Containerfile, privileged, host PID and network, the VM's `/` at /rootfs (rslave, as the
# pod's HostToContainer). Every command it runs on the host goes through `chroot /rootfs`: the
# VM's own rpm-ostree and systemctl.
#
#   e2e.sh build            build localhost/mcd:0.1.0 with podman
#   e2e.sh apply STEP       plan and apply scenarios/STEP-*.yaml (--skip-reboot: Vagrant reboots)
#   e2e.sh verify STEP      after the reboot: mcd check-disk, and what the step must have done
set -euo pipefail

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
IMAGE=localhost/mcd:0.1.0
WORK=/var/lib/mcd-e2e

say() { printf 'e2e: %s\n' "$*"; }
fail() { printf 'e2e: FAILED: %s\n' "$*" >&2; exit 1; }

mcd() {
    podman run --rm --privileged --pid=host --net=host --ipc=host \
        -v /:/rootfs:rslave -v "$WORK:/scenarios:ro" -e NODE_NAME="$(hostname)" \
        "$IMAGE" "$@"
}

# The image the VM booted, as mcd compares it with osImageURL: the reference of the booted
# container deployment without its ostree transport (empty for a deployment from a plain commit).
booted_image() {
    rpm-ostree status --json \
        | jq -r '.deployments[] | select(.booted) | ."container-image-reference" // ""' \
        | sed -E 's#^ostree-remote-(registry|image):[^:]+:##; s#^ostree-(unverified-registry|unverified-image|image-signed):##; s#^docker://##'
}

# scenarios/STEP-*.yaml with osImageURL set to the booted image: the steps change no OS image
scenario() {
    local src
    src=$(ls "$SRC"/vagrant/scenarios/"$1"-*.yaml 2>/dev/null | head -1)
    [ -n "$src" ] || fail "no scenario $1"
    mkdir -p "$WORK"
    sed -E "s#^  osImageURL: .*#  osImageURL: \"$(booted_image)\"#" "$src" >"$WORK/$(basename "$src")"
    basename "$src"
}

case "${1:-}" in
build)
    say "building $IMAGE from $SRC/Containerfile"
    podman build -t "$IMAGE" -f "$SRC/Containerfile" "$SRC"
    mcd --help >/dev/null
    ;;
apply)
    name=$(scenario "$2")
    say "plan of $name on this node"
    mcd plan --root-mount /rootfs "/scenarios/$name" -o text
    say "applying $name"
    mcd start --once-from "/scenarios/$name" --root-mount /rootfs --skip-reboot
    rpm-ostree status
    ;;
verify)
    say "step $2: mcd check-disk"
    mcd check-disk --root-mount /rootfs
    case "$2" in
    10)
        [ "$(cat /etc/mcd-e2e/hello.conf)" = "hello from mcd" ] || fail "hello.conf content"
        [ "$(stat -c %a /etc/mcd-e2e/hello.conf)" = 644 ] || fail "hello.conf mode"
        systemctl is-enabled mcd-e2e.service
        systemctl is-active mcd-e2e.service
        grep -qw 'mcd.e2e=1' /proc/cmdline || fail "mcd.e2e=1 is not on the kernel command line"
        ;;
    20)
        [ "$(cat /etc/mcd-e2e/hello.conf)" = "changed" ] || fail "hello.conf content"
        [ "$(stat -c %a /etc/mcd-e2e/hello.conf)" = 600 ] || fail "hello.conf mode"
        [ ! -e /etc/systemd/system/mcd-e2e.service ] || fail "mcd-e2e.service is still there"
        grep -qw 'mcd.e2e=2' /proc/cmdline || fail "mcd.e2e=2 is not on the kernel command line"
        if grep -qw 'mcd.e2e=1' /proc/cmdline; then fail "mcd.e2e=1 is still on the kernel command line"; fi
        ;;
    *) fail "no checks for step $2" ;;
    esac
    say "step $2 verified"
    ;;
*)
    echo "usage: e2e.sh build | apply STEP | verify STEP" >&2
    exit 2
    ;;
esac
