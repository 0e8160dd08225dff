#!/bin/sh
# Remove from mcd's environment (a virtualenv: the image's /opt/mcd, the host's /opt/mcd) what
# mcd never imports at run time, after `pip install`: Containerfile and scripts/install-host.sh
# run it. mcd talks to the API server in plain JSON through the kubernetes package's
# configuration, kubeconfig loader and REST layer only (mcd/kube/client.py); the generated API
# classes and models, the asyncio client and what only it needs are dead weight (105 MB of the
# image's /opt/mcd were 35 MB after this). tests/packaging/test_prune.py runs the agent, the pool
# controller and the command line with these modules made unimportable.
#
#   scripts/prune-env.sh VENV
set -eu
venv=${1:?usage: prune-env.sh VENV}
site=$(echo "$venv"/lib/python3*/site-packages)
[ -d "$site/kubernetes" ] || { echo "prune-env: no kubernetes package in $site" >&2; exit 1; }

# distributions only the asyncio client (kubernetes.aio) and kubernetes.stream import
UNUSED_DISTRIBUTIONS="aiohttp aiohttp-retry aiohappyeyeballs aiosignal frozenlist multidict propcache yarl websocket-client"
# parts of the kubernetes package: the generated API classes (34 MB) and models (23 MB; the
# package's lazy __init__ stays, the loader imports it), the asyncio twin (68 MB), the tests
UNUSED_KUBERNETES="client/api aio test e2e_test"

"$venv/bin/python" -m pip uninstall -q -y $UNUSED_DISTRIBUTIONS 2>/dev/null \
    || echo "prune-env: pip uninstall failed; removing the directories" >&2
for part in $UNUSED_KUBERNETES; do
    rm -rf "$site/kubernetes/$part"
done
find "$site/kubernetes/client/models" -mindepth 1 -maxdepth 1 ! -name __init__.py ! -name __pycache__ -exec rm -rf {} +
find "$site/kubernetes/client/models/__pycache__" -type f ! -name '__init__.*' -delete 2>/dev/null || true
# the packages pip would have removed, in case it could not
for dist in $UNUSED_DISTRIBUTIONS; do
    module=$(echo "$dist" | tr - _)
    rm -rf "$site/$module"-[0-9]*.dist-info
    case "$module" in websocket_client) module=websocket ;; esac
    rm -rf "$site/$module"
done
