# Two commands set everything up on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
PROTOS := $(shell find protos -name '*.proto')

.PHONY: run test lint proto stubs-check bench clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

## run: start concord-server (embedded Valkey unless CONCORD_REDIS_URL is set)
run: $(STAMP)
	$(VENV)/bin/concord-server

## test: proto lint, stub freshness and the whole pytest suite
test: $(STAMP) lint
	$(PY) -m pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/buf lint protos

## proto: regenerate the committed Python stubs from protos/
proto: $(STAMP)
	$(PY) clients/python/gen_stubs.py

## bench: run the benchmark scenarios and print the table
bench: $(STAMP)
	$(PY) -m bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
