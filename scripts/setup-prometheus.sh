#!/usr/bin/env bash
# Builds Prometheus and promtool (github.com/prometheus/prometheus/cmd/..., module version pinned
# as PROMETHEUS_MODULE_VERSION in e2e/cluster/versions.env) from the Go module proxy into a
# cache outside the repository:
#   ${SITS_CACHE_DIR:-~/.cache/sits}/prometheus-<version>/bin/prometheus
#
# Why built from source: Debian's prometheus (2.42.0+ds) is built without
# kubernetes_sd_configs (Debian strips the service discoveries whose SDKs it does not
# package), and the live system finds its pods the way a Prometheus in a cluster does,
# through the apiserver. The machines this project runs on reach the Go module proxy but
# not GitHub releases.
# Why these build tags: `remove_all_sd,enable_kubernetes_sd` keep the Kubernetes discovery
# (and static and file discovery, always built) and leave out the cloud SDKs (AWS, Azure,
# GCE...), which would triple the build time for discoveries nothing here uses.
# Why no web UI: Prometheus embeds its React UI only with the `builtinassets` tag and
# assets built by npm; the HTTP API (queries, targets, rules, alerts) is all the tests,
# the demo and the operator use. The UI pages answer with an error.
# `go install pkg@version` works (Prometheus' go.mod has no replace directives), so the
# dependencies are exactly the ones that release pins.
#
# Idempotent: when the cached binary exists and `prometheus --version` runs, nothing is
# built. Progress goes to stderr; the last line of stdout is the binary's path.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=../e2e/cluster/versions.env
source "$repo/e2e/cluster/versions.env"
: "${PROMETHEUS_MODULE_VERSION:?PROMETHEUS_MODULE_VERSION missing from e2e/cluster/versions.env}"

cache="${SITS_CACHE_DIR:-$HOME/.cache/sits}/prometheus-${PROMETHEUS_MODULE_VERSION}"
bin="$cache/bin"
prometheus="$bin/prometheus"
promtool="$bin/promtool"
tags="remove_all_sd,enable_kubernetes_sd"

log() { printf '[prometheus %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

works() {
  [[ -x "$prometheus" && -x "$promtool" ]] && "$prometheus" --version >/dev/null 2>&1 \
    && "$promtool" --version >/dev/null 2>&1
}

if works; then
  log "cached: $prometheus"
  echo "$prometheus"
  exit 0
fi

command -v go >/dev/null || { log "Go is required to build Prometheus"; exit 1; }
mkdir -p "$bin"
export GOFLAGS="${GOFLAGS:--buildvcs=false}" CGO_ENABLED=0
export GOTOOLCHAIN="${GOTOOLCHAIN:-auto}"

# One builder at a time: a concurrent caller waits, then finds the binary cached.
exec 9>"$cache/.build.lock"
flock 9
if works; then
  log "cached (built by a concurrent run): $prometheus"
  echo "$prometheus"
  exit 0
fi

log "building Prometheus ${PROMETHEUS_MODULE_VERSION} (tags ${tags}) from the Go module proxy (minutes, once)"
start=$SECONDS
tmp="$(mktemp -d "$cache/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
ver="github.com/prometheus/common/version"
# Module v0.MMM.P is Prometheus M.MM.P (v0.316.0 is 3.16.0): what --version should say.
n="${PROMETHEUS_MODULE_VERSION#v0.}"
mm="${n%%.*}"
release="$((mm / 100)).$((mm % 100)).${n#*.}"
GOBIN="$tmp" go install -trimpath -tags "$tags" \
  -ldflags "-s -w -X ${ver}.Version=${release} -X ${ver}.Branch=module" \
  "github.com/prometheus/prometheus/cmd/prometheus@${PROMETHEUS_MODULE_VERSION}" \
  "github.com/prometheus/prometheus/cmd/promtool@${PROMETHEUS_MODULE_VERSION}"
mv -f "$tmp/promtool" "$promtool"
mv -f "$tmp/prometheus" "$prometheus"

if ! works; then
  log "built $prometheus, but \`prometheus --version\` fails:"
  "$prometheus" --version >&2 || true
  exit 1
fi
log "built in $((SECONDS - start)) s: $("$prometheus" --version 2>&1 | head -1)"
echo "$prometheus"
