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

name=prometheus
cache="${SITS_CACHE_DIR:-$HOME/.cache/sits}/prometheus-${PROMETHEUS_MODULE_VERSION}"
result="$cache/bin/prometheus"
promtool="$cache/bin/promtool"
tags="remove_all_sd,enable_kubernetes_sd"

works() {
  [[ -x "$result" && -x "$promtool" ]] && "$result" --version >/dev/null 2>&1 \
    && "$promtool" --version >/dev/null 2>&1
}

build_into() {
  local ver="github.com/prometheus/common/version" n mm release
  # Module v0.MMM.P is Prometheus M.MM.P (v0.316.0 is 3.16.0): what --version should say.
  n="${PROMETHEUS_MODULE_VERSION#v0.}"
  mm="${n%%.*}"
  release="$((mm / 100)).$((mm % 100)).${n#*.}"
  log "building Prometheus ${release} (tags ${tags}) from the Go module proxy (minutes, once)"
  GOBIN="$1" go install -trimpath -tags "$tags" \
    -ldflags "-s -w -X ${ver}.Version=${release} -X ${ver}.Branch=module" \
    "github.com/prometheus/prometheus/cmd/prometheus@${PROMETHEUS_MODULE_VERSION}" \
    "github.com/prometheus/prometheus/cmd/promtool@${PROMETHEUS_MODULE_VERSION}"
  mv -f "$1/promtool" "$promtool"
  mv -f "$1/prometheus" "$result"
}

# shellcheck source=lib/go-tool.sh
source "$repo/scripts/lib/go-tool.sh"
go_tool_main
