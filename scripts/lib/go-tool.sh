# Sourced by the scripts that build a Go tool from the Go module proxy into a cache outside
# the repository (setup-helm.sh, setup-prometheus.sh). The caller defines:
#   name          what is built (for the log lines)
#   cache         its cache directory (the binaries go to $cache/bin)
#   result        the path printed on stdout at the end (the main binary)
#   works()       true when the cached binaries exist and run
#   build_into()  builds into the directory given as $1 and moves the binaries into place
# then calls go_tool_main. Idempotent: cached binaries that work are used as they are;
# one builder at a time (a concurrent caller waits, then finds them); an interrupted
# build never leaves a half-written binary at the cached path. Progress goes to stderr;
# the last line of stdout is "$result", so callers can do  tool="$(scripts/setup-x.sh)".

log() { printf '[%s %s] %s\n' "$name" "$(date +%H:%M:%S)" "$*" >&2; }

_go_tool_cached() {
  if works; then
    log "cached${1:-}: $result"
    echo "$result"
    exit 0
  fi
}

go_tool_main() {
  _go_tool_cached
  command -v go >/dev/null || { log "Go is required to build $name"; exit 1; }
  mkdir -p "$cache/bin"
  export GOFLAGS="${GOFLAGS:--buildvcs=false}" CGO_ENABLED=0
  # A module's go.mod names the minimum Go it needs; let go fetch that toolchain if the
  # installed one is older (GOTOOLCHAIN=go1.27.3 may also be exported by the caller).
  export GOTOOLCHAIN="${GOTOOLCHAIN:-auto}"
  exec 9>"$cache/.build.lock"
  flock 9
  _go_tool_cached " (built by a concurrent run)"
  local start=$SECONDS tmp
  tmp="$(mktemp -d "$cache/.install.XXXXXX")"
  # shellcheck disable=SC2064  # expand now: $tmp is local
  trap "rm -rf '$tmp'" EXIT
  build_into "$tmp"
  if ! works; then
    log "built $result, but it does not run"
    exit 1
  fi
  log "built in $((SECONDS - start)) s"
  echo "$result"
}
