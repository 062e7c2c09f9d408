# Two commands on a fresh machine: `make run` and `make test`. Both create .venv and install on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test lint typecheck check gates clean-db bench-scale

$(STAMP): requirements.txt requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $(STAMP)

run: $(STAMP)  ## migrate, seed demo data, print credentials once, serve on :8000 with workers
	$(PY) -m clinic.launch run

test: $(STAMP)  ## the whole test suite on real PostgreSQL (DATABASE_URL or embedded) and Redis
	$(PY) -m clinic.launch test $(PYTEST_ARGS)

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

typecheck: $(STAMP)
	$(PY) -m clinic.launch init
	$(PY) -m mypy .

check: $(STAMP)  ## Django system checks and migrations in sync with models
	$(PY) -m clinic.launch manage check --fail-level WARNING
	$(PY) -m clinic.launch manage makemigrations --check --dry-run

gates: lint typecheck check test  ## everything CI runs

bench-scale: $(STAMP)  ## issue 7: every endpoint at 1M patients + 1M invoices under gunicorn and wrk (BENCH_ARGS=...)
	@command -v wrk >/dev/null || { echo "wrk is missing: apt-get install wrk"; exit 1; }
	$(PY) bench/scale.py $(BENCH_ARGS)

clean-db:  ## delete the embedded PostgreSQL data folder
	rm -rf .pgdata
