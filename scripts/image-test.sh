#!/usr/bin/env bash
# `make image`: builds Containerfile with buildah from a local Debian bookworm base (no container
# registry needed: the base is made with mmdebstrap from the Debian mirror), then runs the image's
# filesystem as the DaemonSet's pod would: the entrypoint `mcd`, the node's root bind-mounted at
# /rootfs, the host's /proc (hostPID), and checks the result from outside with the checkout's mcd.
# Not part of `make test` (a few minutes, Debian mirror and PyPI access, root). Prints the image size.
#
#   MCD_IMAGE       tag of the built image (default localhost/mcd:0.1.0, as manifests/04-daemonset.yaml)
#   MCD_BASE_IMAGE  base image; made here when it does not exist (default localhost/mcd-base:bookworm)
#   MCD_IMAGE_WORK  scratch directory (default /var/tmp/mcd-image)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

IMAGE=${MCD_IMAGE:-localhost/mcd:0.1.0}
BASE=${MCD_BASE_IMAGE:-localhost/mcd-base:bookworm}
WORK=${MCD_IMAGE_WORK:-/var/tmp/mcd-image}
HOST_MCD=.venv/bin/mcd
HOST_SIM=.venv/bin/mcd-sim

say() { printf 'image: %s\n' "$*"; }
die() { printf 'image: FAILED: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "needs root (buildah mount, chroot)"
[ -x "$HOST_MCD" ] || die "$HOST_MCD missing: run make setup"
missing=()
command -v buildah >/dev/null || missing+=(buildah)
command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
if [ ${#missing[@]} -gt 0 ]; then
    say "installing ${missing[*]}"
    # another apt client may hold the lock for a while on a fresh machine: wait for it
    apt=(apt-get -o DPkg::Lock::Timeout=600)
    DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y -qq --no-install-recommends "${missing[@]}" \
        || { "${apt[@]}" update -qq && DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y -qq --no-install-recommends "${missing[@]}"; }
fi
mkdir -p "$WORK"

# --- the base: Debian bookworm with its python3 (3.11), as a public python:3.11-slim would be ---
if ! buildah inspect --type image "$BASE" >/dev/null 2>&1; then
    say "making the base image $BASE with mmdebstrap"
    rm -f "$WORK/base.tar"
    mmdebstrap --quiet --variant=apt --include=python3,ca-certificates bookworm "$WORK/base.tar"
    ctr=$(buildah from scratch)
    buildah add --quiet "$ctr" "$WORK/base.tar" /
    buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --cmd /bin/bash "$ctr"
    buildah commit --quiet --rm "$ctr" "$BASE" >/dev/null
    rm -f "$WORK/base.tar"
fi

# --- the build ---
start=$(date +%s)
say "building $IMAGE from $BASE"
# This machine's TLS egress goes through a proxy whose CA only the host's bundle has: pip in the
# builder gets that bundle (a build-time volume, not part of any layer).
ca_args=()
host_ca=/etc/ssl/certs/ca-certificates.crt
if [ -s "$host_ca" ]; then
    ca_args=(--volume "$host_ca:/run/pip-ca.crt:ro" --build-arg PIP_CERT=/run/pip-ca.crt)
fi
buildah bud --quiet --isolation chroot --layers --build-arg "BASE_IMAGE=$BASE" "${ca_args[@]}" \
    -t "$IMAGE" -f Containerfile . >/dev/null
say "built in $(( $(date +%s) - start )) s"

entrypoint=$(buildah inspect --type image --format '{{.OCIv1.Config.Entrypoint}}' "$IMAGE")
[ "$entrypoint" = '[mcd]' ] || die "entrypoint is $entrypoint, not [mcd]"
path_env=$(buildah inspect --type image --format '{{range .OCIv1.Config.Env}}{{println .}}{{end}}' "$IMAGE" \
    | sed -n 's/^PATH=//p')

# --- run it as the pod would ---
ctr=$(buildah from --quiet "$IMAGE")
mnt=$(buildah mount "$ctr")
node="$WORK/node"
cleanup() { buildah umount "$ctr" >/dev/null 2>&1 || true; buildah rm "$ctr" >/dev/null 2>&1 || true; }
trap cleanup EXIT

# The container: its own mount namespace with the host's /proc (hostPID) and /dev (privileged),
# the node's root at /rootfs (the DaemonSet's hostPath volume), the examples at /examples and,
# with MOUNT_KUBE, that directory (a kubeconfig) at /kube.
IN_POD_SH='
    mnt=$1; node=$2; examples=$3; shift 3
    mkdir -p "$mnt/rootfs" "$mnt/examples" "$mnt/kube"
    mount --rbind /proc "$mnt/proc"; mount --rbind /dev "$mnt/dev"
    mount --bind "$node" "$mnt/rootfs"; mount --bind -o ro "$examples" "$mnt/examples"
    [ -z "${MOUNT_KUBE:-}" ] || mount --bind -o ro "$MOUNT_KUBE" "$mnt/kube"
    exec chroot "$mnt" /usr/bin/env -i PATH="$PATH_ENV" NODE_NAME=worker-0 HOME=/root "$@"
'
in_pod() {
    unshare --mount --propagation private -- sh -ec "$IN_POD_SH" in_pod "$mnt" "$node" "$PWD/examples" "$@"
}
# The same, replacing the calling (sub)shell: unshare, sh, chroot and env all exec, so the pid a
# background `( in_pod_exec … ) &` leaves in $! is the agent's own, and a signal to it reaches mcd.
in_pod_exec() {
    exec unshare --mount --propagation private -- sh -ec "$IN_POD_SH" in_pod "$mnt" "$node" "$PWD/examples" "$@"
}
export PATH_ENV="$path_env"

rm -rf "$node"
"$HOST_SIM" sandbox "$node" >/dev/null

say "mcd --help (the entrypoint)"
in_pod mcd --help | head -3
for cfg in old new; do
    say "mcd start --once-from /examples/$cfg.yaml --root-mount /rootfs --skip-reboot"
    in_pod mcd start --once-from "/examples/$cfg.yaml" --root-mount /rootfs --skip-reboot >"$WORK/$cfg.json"
    python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print("   config", d["config"], "steps", [s["kind"] for s in d["steps"]])' "$WORK/$cfg.json"
done
say "mcd check-disk in the image, then the checkout's mcd on the same root"
in_pod mcd check-disk --root-mount /rootfs
"$HOST_MCD" check-disk --root-mount "$node"

# The agent from the image against the checkout's stand-in API server (`mcd-sim sim-cluster`, on
# loopback: the "pod" shares the host's network as hostNetwork does). kubectl plays the
# controller's part and names the node's config (`desiredConfig`): without node-annotations.json
# the agent, as upstream's, writes only `currentConfig` from the root, checks the disk against
# the desired config and reports Done.
say "the agent (mcd start --node-name worker-0) against mcd-sim sim-cluster"
kube="$WORK/kube"
rm -rf "$kube"; mkdir -p "$kube"
"$HOST_SIM" sim-cluster --kubeconfig "$kube/kubeconfig" --node worker-0 >"$kube/sim.log" 2>&1 &
sim_pid=$!
agent_pid=
stop_all() {
    [ -z "$agent_pid" ] || kill "$agent_pid" 2>/dev/null || true
    kill "$sim_pid" 2>/dev/null || true
    wait 2>/dev/null || true
    cleanup
}
trap stop_all EXIT
for _ in $(seq 100); do [ -s "$kube/kubeconfig" ] && break; sleep 0.1; done
[ -s "$kube/kubeconfig" ] || die "mcd-sim sim-cluster wrote no kubeconfig: $(cat "$kube/sim.log")"
kubectl --kubeconfig "$kube/kubeconfig" create -f examples/new.yaml >/dev/null
want=$(sed -n 's/^  name: //p' examples/new.yaml | head -1)
kubectl --kubeconfig "$kube/kubeconfig" annotate node worker-0 \
    "machineconfiguration.openshift.io/desiredConfig=$want" >/dev/null
# the DaemonSet's flags (no controller answers a drain handshake here either: --builtin-drainer)
(
    export MOUNT_KUBE="$kube"
    in_pod_exec mcd start --node-name worker-0 --kubeconfig /kube/kubeconfig --root-mount /rootfs \
        --builtin-drainer --metrics-url 127.0.0.1:0 --kubelet-healthz-enabled=false -v
) >"$kube/agent.log" 2>&1 &
agent_pid=$!
state=
for _ in $(seq 120); do
    state=$(kubectl --kubeconfig "$kube/kubeconfig" get node worker-0 -o \
        jsonpath='{.metadata.annotations.machineconfiguration\.openshift\.io/state} {.metadata.annotations.machineconfiguration\.openshift\.io/currentConfig}' 2>/dev/null || true)
    [ "$state" = "Done $want" ] && break
    kill -0 "$agent_pid" 2>/dev/null || die "the agent exited: $(tail -20 "$kube/agent.log")"
    sleep 0.5
done
[ "$state" = "Done $want" ] || die "node worker-0 is not Done on $want ($state): $(tail -20 "$kube/agent.log")"
echo "   node worker-0: state=Done currentConfig=$want"
kill -TERM "$agent_pid"; wait "$agent_pid" || true
# the agent is gone with its process: nothing of it outlives the test
if pgrep -f "mcd start --node-name worker-0 --kubeconfig /kube/kubeconfig" >/dev/null; then
    die "the agent outlived SIGTERM"
fi
agent_pid=

say "the image carries no simulator, compiler or pip, and loads the D-Bus and journal bindings"
in_pod python3 -c 'import dbus, dbus.mainloop.glib, systemd.journal, systemd.daemon, mcd'
for mod in mcd.sim mcd_sim; do
    if in_pod python3 -c "import $mod" 2>/dev/null; then die "$mod is importable in the image"; fi
done
for path in usr/bin/gcc opt/mcd/bin/pip usr/include/dbus-1.0; do
    [ ! -e "$mnt/$path" ] || die "/$path is in the image"
done

size=$(buildah images --format '{{.Size}}' "$IMAGE" | head -1)
base_size=$(buildah images --format '{{.Size}}' "$BASE" | head -1)
venv_size=$(du -sh "$mnt/opt/mcd" | cut -f1)
say "OK: $IMAGE is $size (base $base_size; /opt/mcd $venv_size)"
