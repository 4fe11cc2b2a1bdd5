#!/usr/bin/env bash
# Build the production images (`make images`) with Docker or buildah, from the repository
# root: the operator (operator/Dockerfile) and the data plane, the cache sidecar and the
# gateway (inference_image/Dockerfile). vLLM is not built here: variants run the upstream
# vllm/vllm-openai image at the release scripts/setup-vllm.sh pins (VLLM_VERSION).
#
# Why names come from the chart and the tag from pyproject.toml: what is built is then
# exactly what a default install pulls. The repositories are the chart's
# (charts/sits-operator/values.yaml: image.repository, inferenceImage), the tag is the
# project's version, and the script refuses to build when the chart's appVersion or the
# inferenceImage tag say otherwise (bump them together). tests/unit/test_make_images.py
# runs this script against stub builders.
#
#   make images                                      # docker if installed, else buildah
#   SITS_IMAGE_BUILDER=buildah make images
#   SITS_IMAGE_REGISTRY=<registry>/<team> make images   # your registry instead of the chart's
#   SITS_IMAGE_BUILD_ARGS="--build-arg PIP_EXTRA_INDEX_URL=<index>" make images
#
# Pushing is yours (docker push / buildah push); install with the same references:
#   helm install ... --set image.repository=<registry>/<team>/sits-operator \
#     --set inferenceImage=<registry>/<team>/sits-inference:<version>
#
# Only bash built-ins parse the files (no yq, no Python needed on a build machine); the
# values are simple `key: value` lines, and the unit tests compare what this reads with a
# YAML parser's reading.
set -euo pipefail
repo="$(cd "${BASH_SOURCE[0]%/*}/.." && pwd)"
values="$repo/charts/sits-operator/values.yaml"
chart="$repo/charts/sits-operator/Chart.yaml"

fail() {
  printf 'build-images: %s\n' "$*" >&2
  exit 1
}

# The first capture group of the first line of $1 that matches the regex $2.
first_match() {
  local line
  while IFS= read -r line || [[ -n $line ]]; do
    if [[ $line =~ $2 ]]; then
      printf '%s\n' "${BASH_REMATCH[1]}"
      return 0
    fi
  done <"$1"
  return 1
}

# image.repository of the chart's values: `repository:` inside the top-level `image:` block.
operator_repository() {
  local line in_image=0
  while IFS= read -r line || [[ -n $line ]]; do
    if [[ $line =~ ^image: ]]; then
      in_image=1
    elif [[ $line =~ ^[^[:space:]#] ]]; then
      in_image=0
    elif ((in_image)) && [[ $line =~ ^[[:space:]]+repository:[[:space:]]*\"?([^\"[:space:]]+) ]]; then
      printf '%s\n' "${BASH_REMATCH[1]}"
      return 0
    fi
  done <"$values"
  return 1
}

version="$(first_match "$repo/pyproject.toml" '^version[[:space:]]*=[[:space:]]*"([^"]+)"')" ||
  fail "no version in pyproject.toml"
app_version="$(first_match "$chart" '^appVersion:[[:space:]]*"?([^"[:space:]]+)')" ||
  fail "no appVersion in $chart"
operator_repo="$(operator_repository)" || fail "no image.repository in $values"
inference_ref="$(first_match "$values" '^inferenceImage:[[:space:]]*"?([^"[:space:]]+)')" ||
  fail "no inferenceImage in $values"
inference_repo="${inference_ref%:*}"
inference_tag="${inference_ref##*:}"

[[ $app_version == "$version" ]] ||
  fail "Chart.yaml appVersion $app_version is not the project's version $version (pyproject.toml): bump them together"
[[ $inference_tag == "$version" ]] ||
  fail "values.yaml inferenceImage $inference_ref is not tagged with the project's version $version: bump them together"

if [[ -n ${SITS_IMAGE_REGISTRY:-} ]]; then
  operator_repo="${SITS_IMAGE_REGISTRY%/}/${operator_repo##*/}"
  inference_repo="${SITS_IMAGE_REGISTRY%/}/${inference_repo##*/}"
fi

# Docker counts only with a daemon that answers (a docker CLI alone cannot build); buildah
# needs no daemon.
docker_works() { command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; }
builder="${SITS_IMAGE_BUILDER:-}"
if [[ -z $builder ]]; then
  if docker_works; then
    builder=docker
  elif command -v buildah >/dev/null 2>&1; then
    builder=buildah
  elif command -v docker >/dev/null 2>&1; then
    fail "docker is installed but its daemon does not answer (docker info), and buildah is not installed: start the Docker daemon or install buildah. The local cluster's images need neither: .venv/bin/python -m sits_localcluster.images build"
  else
    fail "neither docker nor buildah is installed on this machine: install one of them to build the images. The local cluster's images need neither: .venv/bin/python -m sits_localcluster.images build"
  fi
fi
case "$builder" in
  docker) build=(docker build) ;;
  buildah) build=(buildah bud) ;;
  *) fail "SITS_IMAGE_BUILDER=$builder: expected docker or buildah" ;;
esac
command -v "${build[0]}" >/dev/null 2>&1 || fail "$builder is not installed on this machine"

read -r -a extra <<<"${SITS_IMAGE_BUILD_ARGS:-}"
cd "$repo"
built=()
for pair in "operator/Dockerfile=$operator_repo:$version" \
  "inference_image/Dockerfile=$inference_repo:$version"; do
  dockerfile="${pair%%=*}" reference="${pair#*=}"
  printf '==> [images] %s build -f %s -t %s\n' "$builder" "$dockerfile" "$reference"
  "${build[@]}" -f "$dockerfile" -t "$reference" ${extra[@]+"${extra[@]}"} .
  built+=("$reference")
done
printf '==> [images] built: %s\n' "${built[*]}"
