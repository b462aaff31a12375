# media-orchestrator: every command users, scripts and CI rely on. See README.md.
SHELL := /bin/bash
.DEFAULT_GOAL := help
TSX := node_modules/.bin/tsx
export GOTOOLCHAIN := local
export npm_config_update_notifier := false
export npm_config_fund := false

.PHONY: help deps build lint typecheck crds crds-check test test-unit controlplane cluster-up cluster-down \
        install run dev-up dev-down demo bench helm clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit
	@touch $@

deps: node_modules/.installed ## install the Node packages (npm ci)

build: deps ## compile TypeScript to dist/
	npx tsc -p tsconfig.build.json

lint: deps ## eslint + prettier --check
	npx eslint .
	npx prettier --check .

typecheck: deps ## tsc --noEmit over src, test, bench, scripts
	npx tsc -p tsconfig.json --noEmit

crds: deps ## regenerate the CRD manifests from the zod schemas
	$(TSX) src/crds/generate.ts

crds-check: deps ## fail when the committed CRD manifests differ from the zod schemas
	$(TSX) src/crds/generate.ts --check

controlplane: deps ## build (or reuse) the local kube-apiserver + etcd binary
	$(TSX) scripts/cluster.ts build

helm: deps ## build (or reuse) helm v3.18.6 from its Go module into .local/bin
	$(TSX) -e 'import("./test/support/helm.ts").then((m) => console.log(m.helmBinary()))'

test: deps crds-check lint typecheck controlplane helm sdk-venv ## every test, from a fresh clone
	npx vitest run --reporter=default --reporter=json --outputFile.json=.local/test-results.json

# RunPod's official Python SDK for test/sdk (python3 with venv); reinstalled when the pins change.
SDK_VENV := .local/venv
$(SDK_VENV)/.installed: test/sdk/requirements.txt
	python3 -m venv $(SDK_VENV)
	$(SDK_VENV)/bin/pip install --quiet --disable-pip-version-check -r test/sdk/requirements.txt
	@touch $@

.PHONY: sdk-venv
sdk-venv: $(SDK_VENV)/.installed ## the Python venv with RunPod's Python SDK, for the SDK tests

cluster-up: deps ## start the local control plane; kubeconfig in .local/kubeconfig
	$(TSX) scripts/cluster.ts up

cluster-down: deps ## stop the local control plane and remove its data
	$(TSX) scripts/cluster.ts down

install: deps ## apply the CRDs to the cluster of the current KUBECONFIG
	$(TSX) src/crds/generate.ts --print | kubectl apply -f -

run: deps ## run the controller and the webhooks sidecar here, against the current KUBECONFIG
	$(TSX) src/main.ts all

dev-up: deps ## the whole local stack in the background; writes .local/env
	$(TSX) scripts/devstack.ts up

dev-down: deps ## stop everything dev-up started
	$(TSX) scripts/devstack.ts down

demo: deps ## the main job: control plane, simulator, operator, a sample ASR -> TTS -> render pipeline
	$(TSX) scripts/demo.ts $(DEMO_ARGS)

bench: deps controlplane ## the benchmarks; results in docs/benchmarks.md and bench/results/
	$(TSX) bench/run.ts $(BENCH_ARGS)

fuzz: deps controlplane ## generated requests against both sidecar routes (FUZZ_ARGS="--requests N --seed S"); docs/reliability.md
	$(TSX) bench/fuzz.ts $(FUZZ_ARGS)

clean: ## remove build output and local state (stops nothing: run cluster-down / dev-down first)
	rm -rf dist .local/bin
