#!/usr/bin/env bash
# Builds etcd, kube-apiserver, kube-controller-manager, kube-scheduler and the kwok
# controller from the Go module proxy into a cache outside the repository.
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
cache="${SITS_CACHE_DIR:-$HOME/.cache/sits}/$key"
bin="${1:-$cache/bin}"
src="$cache/src"
mkdir -p "$bin" "$src"
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
  [[ -f "$dir/go.sum" && -f "$dir/.resolved" ]] && return 0
  mkdir -p "$dir"
  log "resolving k8s.io/kubernetes ${KUBERNETES_VERSION} (staging modules at ${staging_version})"
  local gomod
  gomod="$(curl -fsSL "https://proxy.golang.org/k8s.io/kubernetes/@v/${KUBERNETES_VERSION}.mod" 2>/dev/null || true)"
  local staging
  if [[ -n "$gomod" ]]; then
    staging="$(printf '%s\n' "$gomod" | sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\1#p')"
  else
    # The proxy is reachable through `go` even where curl is not: ask go for the file.
    staging="$(cd "$dir" && go mod download -json "k8s.io/kubernetes@${KUBERNETES_VERSION}" \
      | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p' | xargs sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\1#p')"
  fi
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
)
GO
  (cd "$dir" && go mod tidy -e >/dev/null 2>"$dir/tidy.log" || { cat "$dir/tidy.log"; exit 1; })
  touch "$dir/.resolved"
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

total=$SECONDS
build_etcd
build_kwok
build_kube kube-apiserver
build_kube kube-controller-manager
build_kube kube-scheduler
log "control plane ready in $bin ($((SECONDS - total)) s)"
echo "$bin"
