# Lethe: the two commands of the README are `make demo` and `make test`.
SHELL := /bin/bash
# uv from PATH, else the one pip installed (user or site); `=` re-evaluates after ensure-uv.
UV = $(shell command -v uv 2>/dev/null || python3 -c "import uv; print(uv.find_uv_bin())" 2>/dev/null)
VENV := .venv
PY := $(VENV)/bin/python
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export PYSPARK_PYTHON := $(CURDIR)/$(PY)
export PYSPARK_DRIVER_PYTHON := $(CURDIR)/$(PY)

.PHONY: ensure-uv setup duckdb14 demo test test-fast lint typecheck bench synth spark-package layer clean

ensure-uv:
	@command -v uv >/dev/null 2>&1 || python3 -c "import uv" 2>/dev/null \
		|| python3 -m pip install --quiet --user uv || python3 -m pip install --quiet uv

$(VENV)/.synced: pyproject.toml uv.lock | ensure-uv
	$(UV) sync --frozen --all-groups
	touch $@

setup: $(VENV)/.synced

# DuckDB 1.4.4 + its iceberg/httpfs/avro extension wheels (PyPI has them for 1.4.4 only; the
# project's DuckDB is 2.x): their own environment, for tests/test_view_duckdb14.py
DUCK14 := .venv-duckdb14
$(DUCK14)/.synced: devtools/duckdb14-requirements.txt | ensure-uv
	$(UV) venv -q --allow-existing --python "$(if $(wildcard $(PY)),$(PY),python3)" $(DUCK14)
	$(UV) pip install -q --python $(DUCK14)/bin/python -r devtools/duckdb14-requirements.txt
	touch $@

duckdb14: $(DUCK14)/.synced

demo: setup
	$(PY) -m devtools.demo

# a crashed worker fails the run at once (xdist's replacement worker could hang loadgroup)
test: setup duckdb14
	$(PY) -m pytest -n 2 --dist loadgroup --max-worker-restart=0 -q

test-fast: setup
	$(PY) -m pytest -q -m "not slow"

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check shared functions spark_jobs infra tests

typecheck: setup
	$(VENV)/bin/mypy

bench: setup
	$(PY) -m bench

layer: setup
	$(PY) -m layers.build

synth: layer
	$(PY) -m infra.app $(CONTEXT)

spark-package: setup
	UV=$(UV) PYTHON=$(PY) bash spark_jobs/package.sh

clean:
	rm -rf $(VENV) $(DUCK14) cdk.out layers/build dist .pytest_cache .mypy_cache .hypothesis
