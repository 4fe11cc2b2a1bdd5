#!/usr/bin/env bash
# Builds the helm CLI (helm.sh/helm/v4/cmd/helm, version pinned as HELM_VERSION in
# e2e/cluster/versions.env) from the Go module proxy into a cache outside the repository:
#   ${SITS_CACHE_DIR:-~/.cache/sits}/helm-<version>/bin/helm
#
# Why built from source: the machines this project runs on reach the Go module proxy but
# not GitHub releases or get.helm.sh, and no Debian/PyPI package ships Helm v4.
# Why `go install pkg@version` works here (unlike k8s.io/kubernetes, see
# e2e/cluster/build-control-plane.sh): helm's go.mod has no replace directives.
# Why the -X flags: a module build leaves helm's version at "v4.3" (no patch); helm's own
# Makefile sets internal/version.version the same way for release builds.
#
# Idempotent: when the cached binary exists and `helm version` runs, nothing is built.
# Progress goes to stderr; the last line of stdout is the binary's path, so callers can do
#   helm="$(scripts/setup-helm.sh)"
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=../e2e/cluster/versions.env
source "$repo/e2e/cluster/versions.env"
: "${HELM_VERSION:?HELM_VERSION missing from e2e/cluster/versions.env}"

name=helm
cache="${SITS_CACHE_DIR:-$HOME/.cache/sits}/helm-${HELM_VERSION}"
result="$cache/bin/helm"

works() { [[ -x "$result" ]] && "$result" version --short >/dev/null 2>&1; }

build_into() {
  local ldflags="-s -w -X helm.sh/helm/v4/internal/version.version=${HELM_VERSION}"
  ldflags+=" -X helm.sh/helm/v4/internal/version.gitTreeState=clean"
  log "building helm ${HELM_VERSION} from the Go module proxy (a few minutes, once)"
  GOBIN="$1" go install -trimpath -ldflags "$ldflags" "helm.sh/helm/v4/cmd/helm@${HELM_VERSION}"
  mv -f "$1/helm" "$result"
}

# shellcheck source=lib/go-tool.sh
source "$repo/scripts/lib/go-tool.sh"
go_tool_main
