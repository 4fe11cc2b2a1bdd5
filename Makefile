# The two commands of the README's quick start are `make demo` and `make test`.
# Each does all set-up itself (scripts/setup.sh is idempotent and caches heavy builds).
SHELL := /bin/bash
VENV := .venv/bin

.PHONY: setup demo test live lint unit integration bench down clean images

setup:
	@scripts/setup.sh

demo: setup
	@$(VENV)/python e2e/demo.py

# Lint and unit tests first (minutes, even on a cold machine), then the long set-up
# (control plane, node images, vLLM venv), then everything against the real cluster.
# Lint and unit tests first, with the long set-up (Go builds, images) running beside them;
# then the integration suite and the live scenarios (scripts/test.sh says why).
test:
	@scripts/test.sh

# The live scenarios alone (tests/integration/test_live_rollouts.py: four vLLM pods, four
# gateway pods, the operator from its chart, Prometheus, real traffic); `make test` runs them
# last, in a session of their own.
live: setup
	$(VENV)/python -m pytest tests/integration -m live

lint:
	@[[ -x $(VENV)/ruff ]] || scripts/setup.sh --python
	$(VENV)/ruff check operator inference_image e2e tests benchmarks
	$(VENV)/ruff format --check operator inference_image e2e tests benchmarks
	$(VENV)/mypy operator/sits_operator operator/sits_kubectl e2e inference_image/sits_inference inference_image/sits_inference_testing benchmarks tests
	$(VENV)/lint-imports

unit:
	@scripts/setup.sh --python
	$(VENV)/python -m pytest tests/unit

integration: setup
	$(VENV)/python -m pytest tests/integration

# Every benchmark writes its section of docs/benchmarks.md. Heavy inputs (100k embedded
# cache entries, the 1M-vector index, 32 LoRA adapters) are cached in ~/.cache/sits/bench.
bench: setup
	@scripts/setup-bench.sh
	$(VENV)/python -m benchmarks.operator_scale
	$(VENV)/python -m benchmarks.watch_scope
	$(VENV)/python -m benchmarks.analysis_scale
	$(VENV)/python -m benchmarks.rollback_reaction
	$(VENV)/python -m benchmarks.gateway_proxy
	$(VENV)/python -m benchmarks.semantic_cache
	$(VENV)/python -m benchmarks.cache_hit_vs_miss
	$(VENV)/python -m benchmarks.cache_miss_path
	$(VENV)/python -m benchmarks.vector_index
	$(VENV)/python -m benchmarks.lora_residency
	$(VENV)/python -m benchmarks.real_node
	$(VENV)/python -m benchmarks.live_rollback

# The production images with Docker or buildah (exit 1 when neither is installed): the
# operator and the data plane, named as the chart pulls them and tagged with pyproject's
# version (scripts/build-images.sh says how to use another registry). vLLM is upstream's.
images:
	@scripts/build-images.sh

# The chart's Grafana dashboards (charts/sits-operator/dashboards/*.json) from their
# generator (e2e/sits_dashboards); tests/unit/test_dashboards.py fails while they are stale.
.PHONY: dashboards
dashboards:
	@[[ -x $(VENV)/python ]] || scripts/setup.sh --python
	$(VENV)/python -m sits_dashboards

down:
	-@$(VENV)/python e2e/demo.py --down

clean: down
	rm -rf .venv .mypy_cache .ruff_cache .pytest_cache
