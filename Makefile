# Tephra's build, test and local-cluster commands. Run `make help` for the list.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

GO ?= go
BIN := $(CURDIR)/bin
# Tephra's version: the git description, or what the caller (e.g. the Dockerfile) passes.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
K8S_VERSION = $(shell $(GO) list -m -f '{{.Version}}' k8s.io/kubernetes)
K8S_MINOR = $(word 2,$(subst ., ,$(K8S_VERSION)))
LDFLAGS = -X k8s.io/component-base/version.gitVersion=$(K8S_VERSION) \
	-X k8s.io/component-base/version.gitMajor=1 \
	-X k8s.io/component-base/version.gitMinor=$(K8S_MINOR) \
	-X k8s.io/component-base/version.gitTreeState=clean \
	-X github.com/tephra-dev/tephra/cmd/internal/version.Version=$(VERSION)

# Pinned tools, built once into bin/ under a versioned name.
CONTROLLER_GEN_VERSION := v0.23.0
GOLANGCI_LINT_VERSION := v2.15.0
CONTROLLER_GEN := $(BIN)/controller-gen-$(CONTROLLER_GEN_VERSION)
GOLANGCI_LINT := $(BIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)

# e2e tests start real control planes; give them time on a 2-core machine.
TEST_TIMEOUT ?= 60m
TEST_FLAGS ?=

.PHONY: help
help: ## Show the targets.
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  %-14s %s\n", $$1, $$2}'

##@ Use

.PHONY: up
up: build kubectl ## Start a local Tephra cluster in the background (kubeconfig: .tephra/kubeconfig) and run the demo.
	$(BIN)/tephra-local up --dir .tephra

.PHONY: down
down: ## Stop the local cluster of `make up`.
	@if [ -x $(BIN)/tephra-local ]; then $(BIN)/tephra-local down --dir .tephra; else $(GO) run ./cmd/tephra-local down --dir .tephra; fi

# Packages outside test/ need no cluster: their tests run with the race detector. test/ holds the
# e2e tests, the local cluster and the benchmark, which run real control planes.
UNIT_PACKAGES = $(shell $(GO) list ./... | grep -v '/test/')

.PHONY: test
test: ## Unit tests with -race, then e2e tests against real local control planes.
	$(GO) test -race -count=1 -timeout 20m $(TEST_FLAGS) $(UNIT_PACKAGES)
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(TEST_FLAGS) ./test/...

.PHONY: test-unit
test-unit: ## Unit tests only (e2e tests skip themselves under -short).
	$(GO) test -short -timeout 10m $(TEST_FLAGS) ./...

##@ Build

.PHONY: build
build: ## Build tephra-scheduler, tephra-controllers and tephra-local into bin/.
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cmd/tephra-scheduler ./cmd/tephra-controllers ./cmd/tephra-local

.PHONY: kubectl
kubectl: $(BIN)/kubectl ## Build kubectl at the pinned Kubernetes version into bin/.

$(BIN)/kubectl:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/kubectl-$(K8S_VERSION) k8s.io/kubernetes/cmd/kubectl
	ln -sf kubectl-$(K8S_VERSION) $(BIN)/kubectl

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Regenerate deepcopy, CRDs and the typed clientset from apis/.
	CONTROLLER_GEN=$(CONTROLLER_GEN) hack/update-codegen.sh

.PHONY: verify
verify: ## gofmt, go vet, generated files current, golangci-lint.
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(MAKE) --no-print-directory generate
	@if [ -n "$$(git status --porcelain -- apis manifests/crds)" ]; then git status --porcelain -- apis manifests/crds; git diff --stat -- apis manifests/crds; echo "generated files are stale: run make generate and commit"; exit 1; fi
	$(MAKE) --no-print-directory lint

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint.
	$(GOLANGCI_LINT) run ./...

$(CONTROLLER_GEN):
	hack/go-install-tool.sh $@ sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)

$(GOLANGCI_LINT):
	hack/go-install-tool.sh $@ github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

##@ Install elsewhere

.PHONY: docker-build
docker-build: ## Build the container images (needs Docker).
	docker build --build-arg VERSION=$(VERSION) -t tephra/tephra-scheduler:dev -t tephra/tephra-controllers:dev .

.PHONY: kind-up
kind-up: ## Create a kind cluster with Tephra installed (needs Docker and kind).
	VERSION=$(VERSION) hack/kind-up.sh

.PHONY: kind-down
kind-down: ## Delete the kind cluster.
	hack/kind-down.sh

.PHONY: clean
clean: down ## Remove built binaries and local cluster state.
	rm -rf $(BIN) .tephra

##@ Benchmark

.PHONY: bench
bench: ## Benchmark L, B0, B1 and C on local control planes, 20-30 min on 2 cores (BENCH_NODES, BENCH_PODS, BENCH_REPS, BENCH_SWEEP=1); writes docs/benchmarks.md.
	$(GO) run ./cmd/tephra-bench

.PHONY: bench-smoke
bench-smoke: ## Smoke-run the benchmark: 100 nodes, a few hundred pods, all configurations; fails unless each completes.
	$(GO) run ./cmd/tephra-bench --smoke
