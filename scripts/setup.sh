#!/usr/bin/env bash
# One-time (and idempotent) set-up of everything the demo and the tests need:
#   - Debian packages: kubectl, prometheus, prometheus-alertmanager, tmux, only when missing
#     (Debian's prometheus package does not start a service; tests run their own), and the
#     real node's runtime: containerd, runc, the CNI plugins, iptables, conntrack, plus
#     mmdebstrap and a static C toolchain to build its images (none of them is started here);
#   - the Python venv in .venv with the project and its dev tools, re-installed only when
#     pyproject.toml changes;
#   - the local control plane binaries, built from the Go module proxy into
#     ~/.cache/sits (outside the repository), rebuilt only when e2e/cluster/versions.env changes.
#   - the helm CLI (helm.sh/helm/v4, HELM_VERSION in versions.env), built the same way into
#     ~/.cache/sits/helm-<version> by scripts/setup-helm.sh;
#   - Prometheus and promtool with kubernetes_sd_configs (Debian's build lacks it), built the
#     same way into ~/.cache/sits/prometheus-<version> by scripts/setup-prometheus.sh.
# `setup.sh --python` stops after the venv: enough for lint and unit tests, which CI runs
# before the long builds so that a broken change fails within minutes.
set -euo pipefail
python_only=0
[[ "${1:-}" == "--python" ]] && python_only=1
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
step() { printf '\n==> %s\n' "$*"; }

step "system packages"
missing=()
command -v kubectl >/dev/null || missing+=(kubectl)
# Real Prometheus and Alertmanager for the analysis tests and the demo (not started here).
command -v prometheus >/dev/null || missing+=(prometheus)
command -v prometheus-alertmanager >/dev/null || missing+=(prometheus-alertmanager)
# A real terminal for `kubectl sits get --watch` (tests/integration/test_kubectl_sits.py).
command -v tmux >/dev/null || missing+=(tmux)
# The real node (sits-node-0): Debian's containerd 1.6 (CRI) and runc, the CNI bridge and
# host-local plugins, iptables for kube-proxy; mmdebstrap and gcc + libc6-dev (static libc)
# build the node's images without Docker.
command -v containerd >/dev/null || missing+=(containerd)
command -v runc >/dev/null || missing+=(runc)
[[ -x /usr/lib/cni/bridge ]] || missing+=(containernetworking-plugins)
command -v iptables >/dev/null || missing+=(iptables)
command -v conntrack >/dev/null || missing+=(conntrack)
command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
command -v gcc >/dev/null || missing+=(gcc)
[[ -f /usr/lib/x86_64-linux-gnu/libc.a ]] || missing+=(libc6-dev)
# A real Lua runs the Argo CD health check in the unit tests (charts/sits-operator/argocd).
command -v lua5.4 >/dev/null || missing+=(lua5.4)
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  sudo_cmd=""; [[ $(id -u) -ne 0 ]] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "kubectl, prometheus, alertmanager and the real node's runtime present"
fi
command -v go >/dev/null || { echo "Go is required to build the control plane" >&2; exit 1; }

step "python environment (.venv)"
python="${PYTHON:-python3}"
"$python" -c 'import sys; assert sys.version_info >= (3, 11), "Python >= 3.11 required"'
[[ -x .venv/bin/python ]] || "$python" -m venv .venv
stamp=".venv/.sits-installed-$(sha256sum pyproject.toml | cut -c1-16)"
if [[ ! -f "$stamp" ]]; then
  .venv/bin/pip install -q --upgrade pip
  # torch is held to the version the vLLM venv uses (scripts/setup-vllm.sh), so the
  # several-GB wheel is downloaded once and shared through pip's cache.
  echo "torch==2.13.0" > .venv/.sits-constraints.txt
  echo "installing the project, its dev tools and the data plane (torch: several GB, once)"
  .venv/bin/pip install -q --progress-bar off -c .venv/.sits-constraints.txt -e '.[dev,dataplane]'
  rm -f .venv/.sits-installed-* && touch "$stamp"
  echo "installed the project and its dev tools"
else
  echo "up to date"
fi

((python_only)) && exit 0

# The vLLM venv and the node's three big images spend most of their cold time downloading
# (torch, a Debian root file system) and unpacking, the Go builds below compiling: run them
# side by side. Their progress lines come prefixed; a failure stops set-up after the Go builds.
# --into-node then imports the images into the real node's containerd root, shared by every
# cluster of the machine (~/.cache/sits/node-containerd; about 3 minutes the first time, then
# nothing), here rather than in the first cluster start; skipped while a node is running.
background_log="${XDG_CACHE_HOME:-$HOME/.cache}/sits/setup-background.log"
mkdir -p "$(dirname "$background_log")"
step "in the background: the vLLM venv, the images vllm-cpu, sits-inference, sits-operator, then their import into the node's containerd"
(
  set -o pipefail
  { scripts/setup-vllm.sh \
      && .venv/bin/python -m sits_localcluster.images build \
           --only vllm-cpu sits-inference sits-operator --into-node >/dev/null; } 2>&1 \
    | tee "$background_log" | sed -u 's/^/    [vllm+images] /'
) &
background=$!
trap 'kill "$background" 2>/dev/null || true' EXIT

step "local control plane binaries (cached in ~/.cache/sits)"
e2e/cluster/build-control-plane.sh >/dev/null

step "helm (cached in ~/.cache/sits)"
scripts/setup-helm.sh >/dev/null

step "Prometheus with the Kubernetes service discovery (cached in ~/.cache/sits)"
scripts/setup-prometheus.sh >/dev/null

step "waiting for the background set-up (the vLLM venv and the big images)"
if ! wait "$background"; then
  echo "the background set-up failed; its whole log: $background_log" >&2
  exit 1
fi
trap - EXIT

step "images of the real node sits-node-0 (OCI tarballs, no Docker; cached in ~/.cache/sits/images)"
# pause, CoreDNS (needs the CoreDNS binary built above), and the three big ones found in the
# cache: the first build of vllm-cpu downloads torch into a Debian root file system (several
# GB, ~10 minutes on 2 cores); later runs find every image by the digest of its inputs.
.venv/bin/python -m sits_localcluster.images build
