# Tephra's build, test and local-cluster commands. Run `make help` for the list.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

GO ?= go
BIN := $(CURDIR)/bin
# Tephra's version: the git description, or what the caller passes.
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
# Pinned in internal/localcluster/helm.go, which the tests build it from too.
HELM_VERSION := $(shell sed -n 's/^const HelmVersion = "\(.*\)"$$/\1/p' internal/localcluster/helm.go)
CONTROLLER_GEN := $(BIN)/controller-gen-$(CONTROLLER_GEN_VERSION)
GOLANGCI_LINT := $(BIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
HELM := $(BIN)/helm-$(HELM_VERSION)

# e2e tests start real control planes; give them time on a 2-core machine.
TEST_TIMEOUT ?= 60m
TEST_FLAGS ?=

# Images: `make image` stages their content in $(IMAGE_DIR) and builds them FROM scratch.
# IMAGE_TAG is the tag manifests/ name.
IMAGE_TAG ?= dev
IMAGE_DIR := $(BIN)/image
HOST_CA_CERTS ?= /etc/ssl/certs/ca-certificates.crt

.PHONY: help
help: ## Show the targets.
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  %-14s %s\n", $$1, $$2}'

##@ Use

.PHONY: up
up: build kubectl ## Start a local Tephra cluster in the background (kubeconfig: .tephra/kubeconfig) and run the demo; SCHEDULER_ARGS=file tries scheduler plugin args (hack/scheduler-args.example.yaml).
	$(BIN)/tephra-local up --dir .tephra $(if $(SCHEDULER_ARGS),--scheduler-args $(SCHEDULER_ARGS))

.PHONY: down
down: ## Stop the local cluster of `make up`.
	@if [ -x $(BIN)/tephra-local ]; then $(BIN)/tephra-local down --dir .tephra; else $(GO) run ./cmd/tephra-local down --dir .tephra; fi

.PHONY: up-multikueue
up-multikueue: build kubectl ## Start three local clusters in the background, a MultiKueue manager and two workers with Kueue and Tephra (kubeconfigs: .tephra-multikueue/<cluster>/kubeconfig), and send a Job through the manager (docs/kueue.md).
	$(BIN)/tephra-local up --multikueue --dir .tephra-multikueue

.PHONY: down-multikueue
down-multikueue: ## Stop the clusters of `make up-multikueue`.
	@if [ -x $(BIN)/tephra-local ]; then $(BIN)/tephra-local down --dir .tephra-multikueue; else $(GO) run ./cmd/tephra-local down --dir .tephra-multikueue; fi

# Packages outside test/ hold the unit tests (and cmd/tephra-local's one run of `make up`): they
# run with the race detector. test/ holds the tests that run real control planes: the e2e tests,
# the benchmark's smoke run and upstream's scheduler_perf.
UNIT_PACKAGES = $(shell $(GO) list ./... | grep -v '/test/')

# The e2e packages make test runs a second time with kube-scheduler's GenericWorkload gate on in
# tephra-scheduler (docs/gang.md, "Upstream PodGroups and the GenericWorkload gate").
E2E_BOTH_GATES = ./test/e2e/gang ./test/e2e/queue ./test/e2e/elastic ./test/e2e/topology ./test/e2e/upstream ./test/e2e/preemption

.PHONY: test
# The race detector needs cgo; everything else builds static (CGO_ENABLED=0), as the images and
# the local cluster's binaries are, so that one compilation serves them all. The unit stage's
# timeout covers cmd/tephra-local on a cold cache: its runs of make up and make up-multikueue build
# Kubernetes' components and Kueue from source first.
test: ## Unit tests with -race, e2e tests against real local control planes (the gang, queue, elastic, topology, upstream and preemption ones with GenericWorkload off and on), and upstream's scheduler_perf short workloads under both profiles.
	CGO_ENABLED=1 $(GO) test -race -count=1 -timeout 40m $(TEST_FLAGS) $(UNIT_PACKAGES)
	CGO_ENABLED=0 $(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(TEST_FLAGS) ./test/...
	CGO_ENABLED=0 TEPHRA_E2E_GENERIC_WORKLOAD=true $(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(TEST_FLAGS) $(E2E_BOTH_GATES)
	CGO_ENABLED=0 $(GO) test -count=1 -timeout 20m -run '^$$' -bench '^BenchmarkUpstream$$' -benchtime 1x $(TEST_FLAGS) ./test/benchupstream -args -upstream-set=short -upstream-pods-timeout=3m

.PHONY: soak
soak: ## Run the gang, queue, elastic, flow and upstream e2e packages SOAK_RUNS times in a row (default 10, about 15 min each on 2 cores); writes docs/soak.md.
	hack/soak.sh

.PHONY: test-unit
test-unit: ## Unit tests only (e2e tests skip themselves under -short).
	$(GO) test -short -timeout 10m $(TEST_FLAGS) ./...

##@ Build

.PHONY: build
build: ## Build tephra-scheduler, tephra-controllers, tephra-local and the kubectl plugin kubectl-tephra into bin/.
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cmd/tephra-scheduler ./cmd/tephra-controllers ./cmd/tephra-local ./cmd/kubectl-tephra

.PHONY: kubectl
kubectl: $(BIN)/kubectl ## Build kubectl at the pinned Kubernetes version into bin/.

$(BIN)/kubectl:
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/kubectl-$(K8S_VERSION) k8s.io/kubernetes/cmd/kubectl
	ln -sf kubectl-$(K8S_VERSION) $(BIN)/kubectl

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Regenerate deepcopy, CRDs and the typed clientset from apis/.
	CONTROLLER_GEN=$(CONTROLLER_GEN) hack/update-codegen.sh

.PHONY: verify
verify: $(HELM) ## gofmt, go vet, generated files current, golangci-lint, helm lint.
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(MAKE) --no-print-directory generate
	@if [ -n "$$(git status --porcelain -- apis manifests/crds manifests/components/foreign-crds charts/tephra/crds charts/tephra/foreign-crds charts/tephra/monitoring)" ]; then git status --porcelain -- apis manifests/crds manifests/components/foreign-crds charts/tephra/crds charts/tephra/foreign-crds charts/tephra/monitoring; git diff --stat -- apis manifests/crds manifests/components/foreign-crds charts/tephra/crds charts/tephra/foreign-crds charts/tephra/monitoring; echo "generated files are stale: run make generate and commit"; exit 1; fi
	$(MAKE) --no-print-directory lint helm-lint

.PHONY: helm-lint
helm-lint: $(HELM) ## Lint charts/tephra with its default values and as the default scheduler.
	$(HELM) lint --strict charts/tephra
	$(HELM) lint --strict charts/tephra --set mode=replaceDefault --set 'compatibleSchedulerNames={volcano,scheduler-plugins-scheduler}'
	$(HELM) lint --strict charts/tephra --set foreignCRDs.install=true
	$(HELM) lint --strict charts/tephra --set prometheusRule.enabled=true --set grafanaDashboard.enabled=true --set serviceMonitor.enabled=true

.PHONY: helm
helm: $(HELM) ## Build helm at the pinned version into bin/.

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint.
	$(GOLANGCI_LINT) run ./...

$(CONTROLLER_GEN):
	hack/go-install-tool.sh $@ sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)

$(GOLANGCI_LINT):
	hack/go-install-tool.sh $@ github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

# Built as the tests build it (localcluster.BuildHelm: stamped with its version and Kubernetes').
$(HELM):
	$(GO) run ./hack/build-helm

##@ Install elsewhere

.PHONY: image
image: ## Build the images tephra/tephra-scheduler and tephra/tephra-controllers, tag IMAGE_TAG (default dev), FROM scratch (needs Docker; pulls nothing).
	@test -r $(HOST_CA_CERTS) || { echo "$(HOST_CA_CERTS) not found: install ca-certificates (or pass HOST_CA_CERTS=<PEM bundle>)"; exit 1; }
	rm -rf $(IMAGE_DIR)
	mkdir -p $(IMAGE_DIR)/base/etc/ssl/certs $(IMAGE_DIR)/base/tmp \
		$(IMAGE_DIR)/scheduler/usr/local/bin $(IMAGE_DIR)/scheduler/etc/tephra $(IMAGE_DIR)/controllers/usr/local/bin
	chmod 1777 $(IMAGE_DIR)/base/tmp
	cp $(HOST_CA_CERTS) $(IMAGE_DIR)/base/etc/ssl/certs/ca-certificates.crt
	printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >$(IMAGE_DIR)/base/etc/passwd
	printf 'root:x:0:\nnonroot:x:65532:\n' >$(IMAGE_DIR)/base/etc/group
	CGO_ENABLED=0 GOOS=linux $(GO) build -ldflags "$(LDFLAGS)" -o $(IMAGE_DIR)/scheduler/usr/local/bin/ ./cmd/tephra-scheduler
	CGO_ENABLED=0 GOOS=linux $(GO) build -ldflags "$(LDFLAGS)" -o $(IMAGE_DIR)/controllers/usr/local/bin/ ./cmd/tephra-controllers
	ln -s tephra-scheduler $(IMAGE_DIR)/scheduler/usr/local/bin/kube-scheduler
	{ echo '# Baked into tephra/tephra-scheduler by `make image` for kubeadm control planes:'; \
	  echo '# manifests/overlays/replace-default/config-replace-default.yaml reading the kubeconfig kubeadm mounts.'; \
	  awk '{ print } /^clientConnection:$$/ { print "  kubeconfig: /etc/kubernetes/scheduler.conf" }' manifests/overlays/replace-default/config-replace-default.yaml; \
	} >$(IMAGE_DIR)/scheduler/etc/tephra/kubeadm.yaml
	@grep -q '^  kubeconfig: /etc/kubernetes/scheduler.conf$$' $(IMAGE_DIR)/scheduler/etc/tephra/kubeadm.yaml || \
		{ echo "manifests/overlays/replace-default/config-replace-default.yaml has no top-level clientConnection: to add kubeadm's kubeconfig to"; exit 1; }
	docker build --target tephra-scheduler -t tephra/tephra-scheduler:$(IMAGE_TAG) .
	docker build --target tephra-controllers -t tephra/tephra-controllers:$(IMAGE_TAG) .

.PHONY: kind-up
kind-up: ## Create a kind cluster with Tephra installed (needs Docker and kind).
	hack/kind-up.sh

.PHONY: kind-down
kind-down: ## Delete the kind cluster.
	hack/kind-down.sh

.PHONY: clean
clean: down ## Remove built binaries and local cluster state.
	rm -rf $(BIN) .tephra

##@ Benchmark

# The Job burst's flags (make bench-jobs, and make bench after the matrix), e.g.
# BENCH_JOBS_FLAGS='--jobs-n=200 --jobs-reps=1'.
BENCH_JOBS_FLAGS ?=

.PHONY: bench
bench: ## Benchmark L, B0, B1, C, CU and CG on local control planes, then the Job burst (bench-jobs), about 90 min on 2 cores (BENCH_NODES, BENCH_PODS, BENCH_REPS, BENCH_SWEEP=1); writes docs/benchmarks.md.
	$(GO) run ./cmd/tephra-bench
	$(GO) run ./cmd/tephra-bench --jobs $(BENCH_JOBS_FLAGS)

.PHONY: bench-jobs
bench-jobs: ## Job burst: N=1000 one-pod Jobs, then 125 Jobs of 8 pods, created at once as Tephra Jobs and as batch/v1 Jobs on one cluster started as make up starts it, 3 repetitions, about 10 min on 2 cores (BENCH_JOBS_FLAGS); writes docs/benchmarks.md.
	$(GO) run ./cmd/tephra-bench --jobs $(BENCH_JOBS_FLAGS)

# Upstream's scheduler_perf, run by test/benchupstream: its workload files, upstream's default
# profile and Tephra's. BENCH_UPSTREAM_FLAGS picks others, e.g.
# -upstream-workloads=podgroup/gangscheduling:GangScheduling/5000Nodes_3000Gangs_9000Pods.
BENCH_UPSTREAM_FLAGS ?=
.PHONY: bench-upstream
bench-upstream: ## Run upstream's scheduler_perf (5000 nodes: plain pods, gangs, topology, gang preemption) with upstream's profile and Tephra's, every performance workload of upstream's gang files, about 60 min on 2 cores; writes docs/benchmarks.md and the CPU profiles of rows below 1.0x.
	CGO_ENABLED=0 $(GO) test -count=1 -timeout 180m -run '^$$' -bench '^BenchmarkUpstream$$' -benchtime 1x ./test/benchupstream \
		-args -upstream-publish -upstream-cpuprofile $(BENCH_UPSTREAM_FLAGS)

##@ Replay

# A trace to replay (docs/replay.md); without one, make replay generates a synthetic day for 64
# nodes of 8 GPUs into replay-out/. REPLAY_FLAGS adds tephra-replay's flags, e.g. --queues.
TRACE ?=
REPLAY_FLAGS ?=
REPLAY_OUT ?= replay-out
# The synthetic day that docs/replay.md publishes. Its runs end at 29 h of trace time (its last
# job could end by 28 h), so that each takes about 12 minutes; jobs not ended then are reported.
REPLAY_DAY_FLAGS := --span 24h --load 0.8 --seed 1 --nodes 64 --node-gpus 8
REPLAY_DAY_HORIZON := --horizon 29h

.PHONY: replay
replay: ## Replay TRACE=file.csv (default: a synthetic day on 64 nodes of 8 GPUs, through C, Cp, B1, B1p and B1j as docs/replay.md publishes it), each configuration on a fresh local control plane, about 12 min each for the day; writes $(REPLAY_OUT)/report.md.
ifeq ($(TRACE),)
	mkdir -p $(REPLAY_OUT)
	$(GO) run ./cmd/tephra-replay --generate $(REPLAY_OUT)/synthetic-day.csv $(REPLAY_DAY_FLAGS)
	$(GO) run ./cmd/tephra-replay --trace $(REPLAY_OUT)/synthetic-day.csv --out $(REPLAY_OUT) $(REPLAY_DAY_HORIZON) --configs C,Cp,B1,B1p,B1j $(REPLAY_FLAGS)
else
	$(GO) run ./cmd/tephra-replay --trace $(TRACE) --out $(REPLAY_OUT) $(REPLAY_FLAGS)
endif

.PHONY: replay-publish
replay-publish: ## make replay of the synthetic day, with its report published in docs/replay/.
	$(MAKE) replay TRACE= REPLAY_FLAGS='--publish $(REPLAY_FLAGS)'

# A mixed trace of 6 hours on 16 nodes of 8 GPUs, where gangs of up to 64 GPUs are half the
# cluster.
REPLAY_MIXED_FLAGS := --span 6h --load 0.9 --seed 5 --nodes 16 --node-gpus 8 --mean-duration 30m
REPLAY_MIXED_OUT ?= replay-mixed

.PHONY: replay-mixed
replay-mixed: ## Replay a mixed 6-hour trace on 16 nodes through C, Cp (a static partition), B1, B1p and B1j (upstream gangs through the Job controller), as docs/replay.md publishes it, about 30 min; writes $(REPLAY_MIXED_OUT)/report.md (add REPLAY_FLAGS=--publish to publish it in docs/replay.md).
	mkdir -p $(REPLAY_MIXED_OUT)
	$(GO) run ./cmd/tephra-replay --generate $(REPLAY_MIXED_OUT)/mixed.csv $(REPLAY_MIXED_FLAGS)
	$(GO) run ./cmd/tephra-replay --trace $(REPLAY_MIXED_OUT)/mixed.csv --nodes 16 --node-gpus 8 --configs C,Cp,B1,B1p,B1j --out $(REPLAY_MIXED_OUT) --publish-as mixed $(REPLAY_FLAGS)

# The mixed trace's jobs, each reading one of its team's three datasets of up to 1.5 TB, on nodes
# that cache 2 TB and pull at 1.25 GB/s (docs/io.md).
REPLAY_DATA_FLAGS := $(REPLAY_MIXED_FLAGS) --datasets-per-queue 3 --dataset-gb 1500
REPLAY_DATA_OUT ?= replay-data

.PHONY: replay-data
replay-data: ## Replay the mixed trace with datasets through C, Cio (data locality), Ciw (with a locality wait) and B1p, as docs/replay.md publishes it, about 20 min; writes $(REPLAY_DATA_OUT)/report.md (add REPLAY_FLAGS=--publish to publish it).
	mkdir -p $(REPLAY_DATA_OUT)
	$(GO) run ./cmd/tephra-replay --generate $(REPLAY_DATA_OUT)/data-reuse.csv $(REPLAY_DATA_FLAGS)
	$(GO) run ./cmd/tephra-replay --trace $(REPLAY_DATA_OUT)/data-reuse.csv --nodes 16 --node-gpus 8 --node-cache-gb 2000 --configs C,Cio,Ciw,B1p --out $(REPLAY_DATA_OUT) --publish-as data-reuse $(REPLAY_FLAGS)

.PHONY: bench-smoke
bench-smoke: ## Smoke-run the benchmark: 100 nodes, a few hundred pods, all configurations; fails unless each completes.
	$(GO) run ./cmd/tephra-bench --smoke
