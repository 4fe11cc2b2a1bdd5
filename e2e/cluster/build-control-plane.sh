#!/usr/bin/env bash
# Builds etcd, kube-apiserver, kube-controller-manager, kube-scheduler, the kwok
# controller and the pieces of the real worker node (kubelet, kube-proxy, CoreDNS) from
# the Go module proxy into a cache outside the repository.
#
# Why a script and not `go install`: k8s.io/kubernetes carries replace directives
# for its staging modules, so it can only be built from a wrapper module that repeats
# them with real versions. The result is cached by version; a second run is a no-op.
#
# Usage: build-control-plane.sh [BIN_DIR]   (default: ~/.cache/sits/<versions>/bin)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"
key="k8s-${KUBERNETES_VERSION}-etcd-${ETCD_VERSION}-kwok-${KWOK_VERSION}"
# The node's pieces sit beside the control plane's in the same bin dir; each binary is its
# own cache entry (CoreDNS by version in its name), so adding one never rebuilds the rest.
cache="${SITS_CACHE_DIR:-$HOME/.cache/sits}/$key"
bin="${1:-$cache/bin}"
src="$cache/src"
mkdir -p "$bin" "$src"
# One build at a time per cache (set-up and a test session may both get here): two go
# builds writing the same .tmp file would break each other. Not the lock file that
# sits_localcluster/build.py holds while it runs this script (that would deadlock).
exec 9>"$cache/.build-script.lock"
flock 9
export GOFLAGS="${GOFLAGS:--buildvcs=false}" CGO_ENABLED=0
export GOTOOLCHAIN="${GOTOOLCHAIN:-auto}"

log() { printf '[build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

staging_version="v0.${KUBERNETES_VERSION#v1.}"
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=${KUBERNETES_VERSION} \
 -X k8s.io/component-base/version.gitMajor=1 \
 -X k8s.io/component-base/version.gitMinor=$(echo "$KUBERNETES_VERSION" | cut -d. -f2) \
 -X k8s.io/component-base/version.gitTreeState=clean"

kube_module() {
  local dir="$src/kubernetes"
  # .resolved-node: resolved with the node's commands too (kubelet, kube-proxy).
  [[ -f "$dir/go.sum" && -f "$dir/.resolved-node" ]] && return 0
  mkdir -p "$dir"
  log "resolving k8s.io/kubernetes ${KUBERNETES_VERSION} (staging modules at ${staging_version})"
  # The staging modules are read from k8s.io/kubernetes' own go.mod, fetched by `go`
  # through the module proxy (no registry URL is spelled here).
  local gomod_file staging
  gomod_file="$(cd "$dir" && go mod download -json "k8s.io/kubernetes@${KUBERNETES_VERSION}" \
    | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
  staging="$(sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\1#p' "$gomod_file")"
  [[ -n "$staging" ]] || { log "no staging modules found in $gomod_file"; exit 1; }
  {
    echo "module sits.dev/controlplane"
    echo
    echo "go 1.26.0"
    echo
    echo "require k8s.io/kubernetes ${KUBERNETES_VERSION}"
    echo
    echo "replace ("
    for m in $staging; do echo "	$m => $m ${staging_version}"; done
    echo ")"
  } >"$dir/go.mod"
  cat >"$dir/tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
)
GO
  (cd "$dir" && go mod tidy -e >/dev/null 2>"$dir/tidy.log" || { cat "$dir/tidy.log"; exit 1; })
  touch "$dir/.resolved-node"
}

build_kube() {
  local name="$1"
  if [[ -x "$bin/$name" ]]; then log "$name: cached"; return 0; fi
  kube_module
  log "$name: building (several minutes on 2 cores)"
  local start=$SECONDS
  (cd "$src/kubernetes" && go build -trimpath -ldflags "$ldflags" -o "$bin/$name.tmp" "k8s.io/kubernetes/cmd/$name")
  mv "$bin/$name.tmp" "$bin/$name"
  log "$name: built in $((SECONDS - start)) s"
}

build_etcd() {
  if [[ -x "$bin/etcd" ]]; then log "etcd: cached"; return 0; fi
  local dir="$src/etcd"
  mkdir -p "$dir"
  log "etcd ${ETCD_VERSION}: building"
  local start=$SECONDS
  cat >"$dir/main.go" <<'GO'
// Command etcd is the etcd server, built from go.etcd.io/etcd/server/v3.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  if [[ ! -f "$dir/go.mod" ]]; then
    (cd "$dir" && go mod init sits.dev/etcd >/dev/null 2>&1 && go get "go.etcd.io/etcd/server/v3@${ETCD_VERSION}" >/dev/null 2>&1 && go mod tidy >/dev/null 2>&1)
  fi
  (cd "$dir" && go build -trimpath -ldflags "-s -w" -o "$bin/etcd.tmp" .)
  mv "$bin/etcd.tmp" "$bin/etcd"
  log "etcd: built in $((SECONDS - start)) s"
}

build_kwok() {
  if [[ -x "$bin/kwok" ]]; then log "kwok: cached"; return 0; fi
  log "kwok ${KWOK_VERSION}: building"
  local start=$SECONDS
  GOBIN="$bin" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}"
  log "kwok: built in $((SECONDS - start)) s"
}

# CoreDNS with only the plugins a local cluster uses (kubernetes, cache, errors, health,
# ready, loop, reload, log, loadbalance): its stock main imports every plugin (cloud DNS
# providers included), several times the build for nothing this cluster needs. No
# `forward`: the local cluster resolves cluster names only, nothing leaves the machine.
build_coredns() {
  local name="coredns-${COREDNS_VERSION}"
  if [[ -x "$bin/$name" ]]; then log "coredns: cached"; return 0; fi
  local dir="$src/coredns-${COREDNS_VERSION}"
  mkdir -p "$dir"
  log "coredns ${COREDNS_VERSION}: building"
  local start=$SECONDS
  cat >"$dir/main.go" <<'GO'
// Command coredns is CoreDNS with the plugins of a local Kubernetes cluster only.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

// The order in which plugins see a query (CoreDNS' plugin.cfg order for these).
var directives = []string{
	"reload", "health", "ready", "errors", "log", "cache",
	"loadbalance", "loop", "kubernetes",
}

func main() {
	dnsserver.Directives = directives
	coremain.Run()
}
GO
  if [[ ! -f "$dir/go.sum" ]]; then
    (cd "$dir" && { [[ -f go.mod ]] || go mod init sits.dev/coredns >/dev/null 2>&1; } \
      && go get "github.com/coredns/coredns@${COREDNS_VERSION}" >/dev/null 2>&1 && go mod tidy >/dev/null 2>&1)
  fi
  (cd "$dir" && go build -trimpath -ldflags "-s -w" -o "$bin/$name.tmp" .)
  mv "$bin/$name.tmp" "$bin/$name"
  log "coredns: built in $((SECONDS - start)) s"
}

total=$SECONDS
build_etcd
build_kwok
build_kube kube-apiserver
build_kube kube-controller-manager
build_kube kube-scheduler
if [[ "${SITS_SKIP_NODE:-0}" != 1 ]]; then
  build_kube kubelet
  build_kube kube-proxy
  build_coredns
fi
log "control plane ready in $bin ($((SECONDS - total)) s)"
echo "$bin"
