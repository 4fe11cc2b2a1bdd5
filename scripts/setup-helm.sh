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

cache="${SITS_CACHE_DIR:-$HOME/.cache/sits}/helm-${HELM_VERSION}"
bin="$cache/bin"
helm="$bin/helm"

log() { printf '[helm %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

works() { [[ -x "$helm" ]] && "$helm" version --short >/dev/null 2>&1; }

if works; then
  log "cached: $helm"
  echo "$helm"
  exit 0
fi

command -v go >/dev/null || { log "Go is required to build helm"; exit 1; }
mkdir -p "$bin"
export GOFLAGS="${GOFLAGS:--buildvcs=false}" CGO_ENABLED=0
# helm's go.mod names the minimum Go it needs; let go fetch that toolchain if the
# installed one is older (GOTOOLCHAIN=go1.27.3 may also be exported by the caller).
export GOTOOLCHAIN="${GOTOOLCHAIN:-auto}"

# One builder at a time: a concurrent caller waits, then finds the binary cached.
exec 9>"$cache/.build.lock"
flock 9
if works; then
  log "cached (built by a concurrent run): $helm"
  echo "$helm"
  exit 0
fi

ldflags="-s -w -X helm.sh/helm/v4/internal/version.version=${HELM_VERSION}"
ldflags+=" -X helm.sh/helm/v4/internal/version.gitTreeState=clean"

log "building helm ${HELM_VERSION} from the Go module proxy (a few minutes, once)"
start=$SECONDS
# Install into a scratch dir and move into place, so that an interrupted build never
# leaves a half-written binary at the cached path.
tmp="$(mktemp -d "$cache/.install.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
GOBIN="$tmp" go install -trimpath -ldflags "$ldflags" "helm.sh/helm/v4/cmd/helm@${HELM_VERSION}"
mv -f "$tmp/helm" "$helm"

if ! works; then
  log "built $helm, but \`helm version\` fails:"
  "$helm" version >&2 || true
  exit 1
fi
log "built in $((SECONDS - start)) s: $("$helm" version --short)"
echo "$helm"
