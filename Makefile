# Two commands set everything up on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
PROTOS := $(shell find protos -name '*.proto')

.PHONY: run test chaos lint proto stubs-check go-stubs tools go-tools node-tools bench clean

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
$(STAMP): pyproject.toml setup.py clients/python/pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip uninstall --quiet --yes concord 2>/dev/null || true  # the one distribution before the split
	$(PY) -m pip install --quiet -c constraints.txt -e clients/python -e '.[dev]'
	touch $(STAMP)

## run: start concord-server (embedded Valkey unless CONCORD_REDIS_URL is set)
run: $(STAMP)
	$(VENV)/bin/concord-server

## test: proto lint, stub freshness and the whole pytest suite
test: $(STAMP) lint tools
	$(PY) -m pytest $(PYTEST_ARGS)

## chaos: the long fault campaign (tests/chaos/), several minutes per topology, >= 20 Redis
## kills each; CHAOS_SEED=<seed> replays a run's fault schedule, CHAOS_SECONDS sets its length
## (default 180 per topology). The short form runs in `make test`.
chaos: $(STAMP)
	$(PY) -m pytest tests/test_chaos.py -m chaos -p no:cacheprovider -s $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/buf lint protos

## proto: regenerate the committed Python and Go stubs from protos/
proto: $(STAMP) go-stubs
	$(PY) clients/python/gen_stubs.py

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
else
node-tools: $(NODE_STAMP)
endif

$(NODE_STAMP): clients/node/package.json clients/node/package-lock.json
	cd clients/node && $(NPM) ci --no-audit --no-fund --loglevel=error
	touch $@

## bench: run the benchmark scenarios and print the table
bench: $(STAMP)
	$(PY) -m bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info $(TOOLS) clients/node/node_modules
