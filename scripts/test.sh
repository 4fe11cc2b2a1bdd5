#!/usr/bin/env bash
# `make test`: lint and unit tests first (a broken change fails within minutes), the
# integration suite, then the live scenarios in a pytest session of their own.
#
# On a fresh machine the full set-up (Go builds of the control plane, the node's images,
# the vLLM venv: most of a cold run) needs nothing that lint and the unit tests produce,
# so it starts in the background as soon as the Python venv exists; its lines come
# prefixed with [setup]. A lint or unit failure stops it; a set-up failure stops the run
# before the integration tests, with the log's path.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
venv=.venv/bin

scripts/setup.sh --python

setup_log="${XDG_CACHE_HOME:-$HOME/.cache}/sits/setup-test.log"
mkdir -p "$(dirname "$setup_log")"
# A session of its own (setsid): stopping it stops its whole process group, builds included.
setsid bash -c 'set -o pipefail; scripts/setup.sh 2>&1 | tee "$1" | sed -u "s/^/[setup] /"' \
  _ "$setup_log" &
setup_pid=$!
stop_setup() {
  kill -TERM -- "-$setup_pid" 2>/dev/null || true
}
trap stop_setup EXIT

make --no-print-directory lint
"$venv/python" -m pytest tests/unit -q

echo "==> waiting for the set-up (started in the background; log: $setup_log)"
if ! wait "$setup_pid"; then
  echo "set-up failed; its whole log: $setup_log" >&2
  exit 1
fi
trap - EXIT

"$venv/python" -m pytest tests/integration -m "not live" --durations=15
# The operator suites again under the chart's namespaced install (Roles in the served
# namespaces, `--namespace`; sits_operator_testing/rbac.py): a 403 fails them. A subset,
# to keep `make test` under an hour: analysis end to end, the secured Prometheus and its
# Secrets' Role, and the server-side watch selectors (one watch per namespace).
SITS_TEST_RBAC=namespaced "$venv/python" -m pytest -m "not live" \
  tests/integration/test_analysis.py::test_healthy_candidate_is_promoted_step_by_step \
  tests/integration/test_analysis.py::test_prometheus_outage_freezes_then_resumes \
  tests/integration/test_prometheus_access.py tests/integration/test_watch_scope.py
# The live scenarios in a session of their own: the first session's host vLLM servers are
# gone by then, so four vLLM pods, their sidecars and gateways get the memory.
"$venv/python" -m pytest tests/integration -m live --durations=15
