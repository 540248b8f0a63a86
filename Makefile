SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DELETE_ON_ERROR:
MAKEFLAGS += --warn-undefined-variables --no-builtin-rules

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PROTOS := $(wildcard protos/sessiontodo/v1/*.proto) $(wildcard protos/sessiontodo_etcd/*/*.proto)
GENERATED := $(PROTOS:.proto=_pb2.py)
ARGS ?=

NODE_DEPS := node_modules/.package-lock.json

.PHONY: setup debian-packages run opencode mcp web typescript test test-fast lint proto-release bench bench-compare clean

## setup: create the virtualenv, install the project and generate the protobuf code
setup: $(VENV)/.installed $(GENERATED)

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[opencode,acp,mcp,redis,bench,tracing,ctl,claude,dev]'
	touch $@

# The build hook the wheel uses, run as a script: one way to generate.
$(GENERATED) &: $(PROTOS) hatch_build.py $(VENV)/.installed
	$(BIN)/python hatch_build.py

# The names in debian-packages.txt, without comments.
DEBIAN_PACKAGES := $(shell sed -e 's/\#.*//' debian-packages.txt)

## debian-packages: install the missing Debian packages of debian-packages.txt (as root), else name them and stop
debian-packages:
	@missing=$$(for package in $(DEBIAN_PACKAGES); do \
		dpkg-query -W -f='$${Status}\n' "$$package" 2>/dev/null | grep -qx 'install ok installed' || echo "$$package"; \
	done); \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" -ne 0 ]; then echo "missing Debian packages, install them as root: apt-get install" $$missing >&2; exit 1; fi; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing; \
	fi

$(NODE_DEPS): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

## run: serve on 127.0.0.1:50051 with the embedded sqlite store (ARGS="--store memory://" to override)
run: debian-packages setup
	$(BIN)/python -m sessiontodo_server $(ARGS)

SESSIONTODO_ADDRESS ?= 127.0.0.1:50051

## opencode: serve OpenCode's todo routes and /event on 127.0.0.1:4096 for the sessiontodo server at SESSIONTODO_ADDRESS (default 127.0.0.1:50051)
opencode: setup
	$(BIN)/python -m sessiontodo_opencode --sessiontodo-address $(SESSIONTODO_ADDRESS) $(ARGS)

## mcp: serve MCP over streamable HTTP on http://127.0.0.1:50060/mcp for the sessiontodo server at SESSIONTODO_ADDRESS
mcp: setup
	$(BIN)/sessiontodo-mcp --transport http --sessiontodo-address $(SESSIONTODO_ADDRESS) $(ARGS)

# @sessiontodo/client (clients/typescript) and the OpenCode plugin on it: npm packages whose
# protobuf code (buf generate, local protoc-gen-es) and JavaScript (tsc) are built, never committed.
TS_CLIENT := clients/typescript
TS_CLIENT_DEPS := $(TS_CLIENT)/node_modules/.package-lock.json
TS_CLIENT_BUILT := $(TS_CLIENT)/dist/index.js
OPENCODE_PLUGIN := clients/opencode-plugin
OPENCODE_PLUGIN_BUILT := $(OPENCODE_PLUGIN)/dist/index.js

# npm ci, then the registry entries of the runtime dependencies into npm's cache: npm ci fetches
# only tarballs, and the packed client must install offline (the doc runner has no network).
$(TS_CLIENT_DEPS): $(TS_CLIENT)/package.json $(TS_CLIENT)/package-lock.json
	cd $(TS_CLIENT) && npm ci --no-audit --no-fund --loglevel=error
	cd $(TS_CLIENT) && npm cache add --loglevel=error $$(node -p 'Object.entries(require("./package.json").dependencies).map(([name, version]) => `$${name}@$${version}`).join(" ")')
	touch $@

$(TS_CLIENT_BUILT): $(TS_CLIENT_DEPS) $(TS_CLIENT)/buf.gen.yaml $(TS_CLIENT)/tsconfig.json $(wildcard $(TS_CLIENT)/src/*.ts) $(PROTOS) $(VENV)/.installed
	$(BIN)/buf generate --template $(TS_CLIENT)/buf.gen.yaml
	$(TS_CLIENT)/node_modules/.bin/tsc -p $(TS_CLIENT)

# Compiled against the client's types and the root's pinned @opencode-ai/plugin (types only).
$(OPENCODE_PLUGIN_BUILT): $(TS_CLIENT_BUILT) $(NODE_DEPS) $(OPENCODE_PLUGIN)/package.json $(OPENCODE_PLUGIN)/tsconfig.json $(wildcard $(OPENCODE_PLUGIN)/src/*.ts)
	$(TS_CLIENT)/node_modules/.bin/tsc -p $(OPENCODE_PLUGIN)

## typescript: build @sessiontodo/client (buf generate, tsc) and the OpenCode plugin
typescript: $(TS_CLIENT_BUILT) $(OPENCODE_PLUGIN_BUILT)

## web: serve the live web board on http://127.0.0.1:8080 for the sessiontodo server at SESSIONTODO_ADDRESS (the sign-in link is in its log)
web: setup
	$(BIN)/python -m sessiontodo_web --sessiontodo-address $(SESSIONTODO_ADDRESS) $(ARGS)

## test: run the whole suite
test: debian-packages setup $(NODE_DEPS) typescript
	$(BIN)/python -m pytest $(ARGS)

## test-fast: run the unit tier (tests/unit: domain and pure code, no sockets or processes) in seconds
test-fast: setup
	$(BIN)/python -m pytest tests/unit $(ARGS)

## bench: measure against a bare grpc.aio echo server and etcd (h2load), print the table, write bench/results/ (BENCH_QUICK=1: tiny sizes, written to a temporary folder)
bench: debian-packages setup $(NODE_DEPS)
	$(BIN)/python bench/run.py $(ARGS)

BASE ?=

## bench-compare: this checkout against BASE (a git ref, built in its own virtualenv) in one run: throughput, CPU per write, write-to-watch p50
bench-compare: debian-packages setup
	@if [ -z "$(BASE)" ]; then echo "usage: make bench-compare BASE=<git ref> [ARGS='--rounds 8 --stores memory']" >&2; exit 2; fi
	$(BIN)/python bench/compare.py $(BASE) $(ARGS)

# The wire contract as last released: `buf breaking` fails on any change that breaks it.
PROTO_BASELINE := protos/released.json

## lint: ruff, mypy, the layer contract (lint-imports), buf lint + format, and buf breaking against the released protos
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/buf lint
	$(BIN)/buf format --diff --exit-code
	$(BIN)/buf breaking --against $(PROTO_BASELINE)

## proto-release: record protos/ as released (run when cutting a release, commit the result)
proto-release: setup
	$(BIN)/buf build --exclude-source-info -o '-#format=json' | $(BIN)/python -m json.tool --indent 1 > $(PROTO_BASELINE)

clean:
	rm -rf $(VENV) $(GENERATED) $(PROTOS:.proto=_pb2.pyi) $(PROTOS:.proto=_pb2_grpc.py) $(PROTOS:.proto=_pb2_grpc.pyi)
	rm -rf $(TS_CLIENT)/node_modules $(TS_CLIENT)/src/gen $(TS_CLIENT)/dist $(OPENCODE_PLUGIN)/dist
