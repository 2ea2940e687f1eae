#!/usr/bin/env bash
# Builds (or finds) a real Kubernetes control plane and node for the tests: kube-apiserver,
# kube-controller-manager, kube-scheduler and kubelet of each release named below, from the Go module
# k8s.io/kubernetes as any Go program is built from a module, and lays each release out the envtest way
# (KUBEBUILDER_ASSETS: etcd, kubectl and the four binaries in one folder).
#
# Usage: build/kubernetes.sh [RELEASE...]      (default: the releases the project supports, newest first,
#                                               and KWOK for the scale benches)
# Prints, per release, the folder and the time it took; the last line is the newest release's folder.
#
# Cached outside the clone, keyed by release: $NODEMEDIC_KUBE_CACHE (default ~/.cache/nodemedic/kubernetes)/vX.Y.Z.
# A warm machine pays nothing. Nothing is fetched but from the Go module proxy and Debian's packages.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# The supported range: the newest and oldest releases CI tests (README, "Supported Kubernetes"),
# from build/kubernetes-releases, which the test harness reads too.
releases=("$@")
[ ${#releases[@]} -gt 0 ] || mapfile -t releases < <(grep -v '^#' "$here/kubernetes-releases" | grep .)
# KWOK (sigs.k8s.io/kwok), which heartbeats the scale benches' fake nodes as kubelets would: the
# release in build/kwok-release, built from its Go module into $cache/kwok-<release>/kwok.
kwok_release=$(grep -v '^#' "$here/kwok-release" | grep . | head -n 1)

cache=${NODEMEDIC_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodemedic/kubernetes}
mkdir -p "$cache"
# kubectl too: the release's own, so a test's kubectl is never outside the version skew policy.
binaries=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)

# etcd: Debian's etcd-server.
need_apt=()
command -v etcd >/dev/null 2>&1 || need_apt+=(etcd-server)
if [ ${#need_apt[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}") >/dev/null 2>&1 \
      || echo "kubernetes: could not install ${need_apt[*]} with apt-get" >&2
  fi
fi

build_one() {
  local rel=$1 dir=$cache/$1 start=$SECONDS
  local minor=${rel#v1.}; minor=${minor%%.*}
  local missing=()
  for b in "${binaries[@]}"; do [ -x "$dir/$b" ] || missing+=("$b"); done
  if [ ${#missing[@]} -eq 0 ]; then
    echo "kubernetes $rel: cached in $dir (0 s)" >&2
  else
    if ! command -v go >/dev/null 2>&1; then
      echo "kubernetes $rel: no Go toolchain here; cannot build" >&2
      return 1
    fi
    local src=$dir/module
    rm -rf "$src"; mkdir -p "$src"
    # A small module of ours that requires k8s.io/kubernetes at the release and maps each staging
    # module it lists at v0.0.0 to the published v0.<minor>.<patch>, the usual way to depend on it.
    local staging=v0.${rel#v1.}
    (
      cd "$src"
      printf 'module nodemedic.test/kubernetes\n\ngo 1.24\n' >go.mod
      go mod edit -require="k8s.io/kubernetes@$rel"
      GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$rel" >/dev/null
      local upstream
      upstream=$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/$rel.mod
      # Our module takes the Go language version and godebug defaults kubernetes builds with.
      local gover
      gover=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$upstream")
      go mod edit -go="$gover"
      sed -n 's/^godebug default=\(.*\)$/\1/p' "$upstream" | while read -r d; do go mod edit -godebug="default=$d"; done
      sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#\1#p' "$upstream" | while read -r m; do
        go mod edit -replace="$m=$m@$staging"
      done
      printf 'package kubernetes\n\nimport (\n' >tools.go
      for b in "${binaries[@]}"; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$b" >>tools.go; done
      printf ')\n' >>tools.go
      sed -i '1i //go:build tools\n' tools.go
      GOFLAGS=-mod=mod go mod tidy -e >/dev/null 2>&1 || true
      local ld="-s -w"
      for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        ld="$ld -X $p.gitVersion=$rel -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
        ld="$ld -X $p.buildDate=1970-01-01T00:00:00Z"
      done
      for b in "${missing[@]}"; do
        # Into a temporary name first: an interrupted build never leaves a binary that looks whole.
        CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "$ld" -o "$dir/.$b.partial" "k8s.io/kubernetes/cmd/$b"
        mv "$dir/.$b.partial" "$dir/$b"
      done
    ) || { echo "kubernetes $rel: the build failed (see above)" >&2; return 1; }
    echo "kubernetes $rel: built in $((SECONDS - start)) s into $dir" >&2
  fi
  # The envtest layout: etcd beside them.
  ln -sf "$(command -v etcd || echo /usr/bin/etcd)" "$dir/etcd"
}

build_kwok() {
  local dir=$cache/kwok-$kwok_release start=$SECONDS
  if [ -x "$dir/kwok" ] && [ -d "$dir/stages" ]; then
    echo "kwok $kwok_release: cached in $dir (0 s)" >&2
    return 0
  fi
  command -v go >/dev/null 2>&1 || { echo "kwok $kwok_release: no Go toolchain here; cannot build" >&2; return 1; }
  mkdir -p "$dir"
  # kwok's go.mod has no replace directives, so `go install module@version` builds it as released.
  (CGO_ENABLED=0 GOBIN="$dir/.partial" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$kwok_release" \
    && mv "$dir/.partial/kwok" "$dir/kwok" && rmdir "$dir/.partial") \
    || { echo "kwok $kwok_release: the build failed (see above)" >&2; return 1; }
  # Its stages (what a fake node and its pods go through), as the release ships them in its module:
  # a node made Ready, its heartbeat (status every 20-45 s, or status every 10-20 min and a Lease),
  # and pods made Ready, completed and deleted.
  local stages
  stages=$(go env GOMODCACHE)/sigs.k8s.io/kwok@$kwok_release/kustomize/stage
  rm -rf "$dir/stages" "$dir/.stages"
  for s in node/fast node/heartbeat node/heartbeat-with-lease pod/fast; do
    mkdir -p "$dir/.stages/$s" && cp "$stages/$s"/*.yaml "$dir/.stages/$s/" && rm -f "$dir/.stages/$s/kustomization.yaml"
  done
  chmod -R u+w "$dir/.stages" && mv "$dir/.stages" "$dir/stages"
  echo "kwok $kwok_release: built in $((SECONDS - start)) s into $dir" >&2
}

total=$SECONDS
failed=0
for rel in "${releases[@]}"; do build_one "$rel" || failed=1; done
[ $# -gt 0 ] || build_kwok || failed=1
echo "kubernetes: ${releases[*]} ready in $((SECONDS - total)) s" >&2
for rel in "${releases[@]}"; do [ -x "$cache/$rel/kube-apiserver" ] && echo "$cache/$rel"; done | head -n 1
exit $failed
