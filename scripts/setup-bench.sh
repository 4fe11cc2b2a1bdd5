#!/usr/bin/env bash
# Idempotent set-up of what `python -m benchmarks.gateway_proxy` needs besides the venv:
#   - Debian's nginx (the reference proxy the gateway is compared with) and wrk (the
#     closed-loop load generator), installed only when missing;
#   - no nginx service left running: the benchmark starts its own nginx, with its own
#     config and pid file on 127.0.0.1 ports, so the package's default site on port 80
#     is kept from starting (policy-rc.d during the install) and stopped if it runs anyway.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
step() { printf '\n==> %s\n' "$*"; }

step "benchmark packages (nginx, wrk)"
missing=()
[[ -x /usr/sbin/nginx ]] || command -v nginx >/dev/null || missing+=(nginx)
command -v wrk >/dev/null || missing+=(wrk)
sudo_cmd=""; [[ $(id -u) -ne 0 ]] && sudo_cmd="sudo"
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  # Debian's maintainer scripts start services through invoke-rc.d, which asks
  # /usr/sbin/policy-rc.d first: exit code 101 means "do not start". Only a file this
  # script created is removed again.
  policy=/usr/sbin/policy-rc.d
  made_policy=0
  if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' | $sudo_cmd tee "$policy" >/dev/null
    $sudo_cmd chmod 755 "$policy"
    made_policy=1
  fi
  cleanup() { if ((made_policy)); then $sudo_cmd rm -f "$policy"; fi; }
  trap cleanup EXIT
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends \
    -o DPkg::Lock::Timeout=300 "${missing[@]}"
  cleanup
  trap - EXIT
else
  echo "nginx and wrk present"
fi

step "no system nginx running (the benchmark runs its own)"
# The Debian default site listens on port 80 with /run/nginx.pid; stop it if it came up
# (a systemd host may have started it despite policy-rc.d) and keep it from coming back.
if command -v systemctl >/dev/null && [[ -d /run/systemd/system ]]; then
  $sudo_cmd systemctl disable --now nginx >/dev/null 2>&1 || true
fi
if [[ -s /run/nginx.pid ]] && kill -0 "$(cat /run/nginx.pid)" 2>/dev/null; then
  echo "stopping the system nginx (pid $(cat /run/nginx.pid))"
  $sudo_cmd /usr/sbin/nginx -s quit 2>/dev/null || $sudo_cmd kill -QUIT "$(cat /run/nginx.pid)"
  for _ in $(seq 1 50); do
    [[ -s /run/nginx.pid ]] && kill -0 "$(cat /run/nginx.pid)" 2>/dev/null || break
    sleep 0.1
  done
else
  echo "no system nginx running"
fi

step "python packages for the baselines (GPTCache)"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if "$repo/.venv/bin/python" -c 'import gptcache, sqlalchemy' 2>/dev/null; then
  echo "present"
else
  "$repo/.venv/bin/pip" install -q --progress-bar off -c "$repo/.venv/.sits-constraints.txt" \
    -e "$repo[bench]"
fi

step "versions"
/usr/sbin/nginx -v 2>&1
wrk --version 2>&1 | head -n 1 || true
command -v taskset >/dev/null || { echo "taskset (util-linux) is required" >&2; exit 1; }
echo "taskset present"
