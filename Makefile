# The two commands of the README's quick start are `make demo` and `make test`.
# Each does all set-up itself (scripts/setup.sh is idempotent and caches heavy builds).
SHELL := /bin/bash
VENV := .venv/bin

.PHONY: setup demo test lint unit integration bench down clean

setup:
	@scripts/setup.sh

demo: setup
	@$(VENV)/python e2e/demo.py

test: setup lint
	$(VENV)/python -m pytest

lint:
	$(VENV)/ruff check operator inference_image e2e tests benchmarks
	$(VENV)/mypy operator/sits_operator e2e inference_image/sits_inference benchmarks tests
	$(VENV)/lint-imports

unit: setup
	$(VENV)/python -m pytest tests/unit

integration: setup
	$(VENV)/python -m pytest tests/integration

bench: setup
	$(VENV)/python -m benchmarks.operator_scale
	$(VENV)/python -m benchmarks.rollback_reaction

down:
	-@$(VENV)/python e2e/demo.py --down

clean: down
	rm -rf .venv .mypy_cache .ruff_cache .pytest_cache
