# kfn: the two commands a newcomer needs are `make dev` and `make test`.
# Everything they need is built or installed by the targets below.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO ?= go
BIN := $(CURDIR)/bin
# How long each fuzz target runs. Empty (the default): each target runs the
# number of inputs FUZZ_TARGETS gives it, a few seconds each. By hand, a longer
# budget for every target: make fuzz FUZZTIME=200000x (or FUZZTIME=5m; Go 1.26
# can then report a spurious "context deadline exceeded" at the deadline with
# no failing input, golang/go#75804, which counts do not hit).
FUZZTIME ?=
# Passed to bench/report, for example BENCHFLAGS="-reps 5 -only eventbridge".
BENCHFLAGS ?=
# Passed to every `go test`.
TESTFLAGS ?= -timeout 30m
# go test's output goes through hack/testsummary: printed as without -v, and
# each failed test's messages repeated at the end without the real node's
# platform dumps, so that the last lines of a long run say what failed.
TESTSUMMARY := $(BIN)/testsummary
GOTEST = $(GO) test -json
# More flags for testsummary in test-race (make test passes -state).
TESTSUMMARY_FLAGS ?=

# Modules of their own inside the repository (heavy test-only dependencies):
# `make verify` vets them all; `make test` runs e2e/keda's tests with the
# others and e2e/cluster's (the real node) in test-cluster.
NESTED_MODULES := e2e/keda e2e/cluster
NESTED_TEST_MODULES := e2e/keda

# Every build, vet and test here (but the race detector's, which needs cgo)
# compiles as the images and the node's binaries are built: without cgo and
# with -trimpath. A package is then compiled once for all of them (Go's build
# cache keys on both): vet, the package tests, the binaries tests build, kfn's
# image, the node's KEDA and nats-server. With other flags each was compiled
# again, about 5 of a cold make test's minutes on 2 cores.
export CGO_ENABLED := 0
export GOFLAGS := $(strip -trimpath $(filter-out -trimpath,$(shell $(GO) env GOFLAGS)))

# Packages whose tests `make test` runs under the race detector, and not
# again without it: the ones with goroutines of their own, and the test
# infrastructure, but the real node's (test/node/...), whose dependencies
# (Helm, kustomize, wazero: a sixth of the packages) would be compiled
# again for the race detector for a few seconds of tests; the real node's
# scenarios run it.
RACE_PACKAGES = ./eventbridge/... ./scaler/... ./controller/... ./local/... ./internal/... ./cmd/... ./contract/... ./cli \
	$(shell $(GO) list ./test/... | grep -v '/test/node\(/\|$$\)')

# Fuzz targets, as package:Target:inputs, run briefly by `make test` (their
# seed corpora also run as plain tests). The inputs are counts, not durations,
# sized for about 3 s each on a loaded 2-core machine: a count has no deadline
# to race (see FUZZTIME).
FUZZ_TARGETS := \
	./api/eventing/v1alpha2:FuzzEventSubject:8000 \
	./api/eventing/v1alpha2:FuzzParseSink:10000 \
	./api/eventing/v1alpha2:FuzzCleanFastPath:8000 \
	./eventbridge/eventstore:FuzzEncodeBinary:10000 \
	./eventbridge/publisher:FuzzPublish:2000 \
	./eventbridge/publisher:FuzzLegacyPublish:3000 \
	./eventbridge/publisher:FuzzPublishToNATS:1500 \
	./runtimes:FuzzHostHTTP:600 \
	./runtimes:FuzzHostRequest:400 \
	./contract/trigger:FuzzParse:8000

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# The project `make dev` runs, its address, and extra flags for `kfn dev`.
DEV_DIR ?= examples/shop
DEV_ADDR ?= 127.0.0.1:8080
DEV_FLAGS ?=

.PHONY: dev
dev: kfn ## Run kfn locally with the example application (kfn dev examples/shop; installs Debian's python3-flask when missing, for its python314 function).
	@hack/test-packages.sh python3-flask
	$(BIN)/kfn dev --addr $(DEV_ADDR) $(DEV_FLAGS) $(DEV_DIR)

.PHONY: test
test: testsummary ## Run every test (builds the test API server once, about 4 minutes), the real node's included; ends with a table of its phases.
	@hack/phase.sh start
	@hack/phase.sh run verify $(MAKE) --no-print-directory verify
	@hack/phase.sh run envtest $(MAKE) --no-print-directory envtest
	@hack/phase.sh run test-packages $(MAKE) --no-print-directory test-packages
	@# The real node's binaries and images build beside the package tests,
	@# which leave a quarter of the cores idle (waiting on their servers).
	@[ "$${KFN_SKIP_CLUSTER:-}" = 1 ] || hack/phase.sh background cluster-build test/node/prepare.sh
	@# Every package once: those of RACE_PACKAGES under the race detector
	@# (the race phase below), the others here.
	@echo "go test ./... but RACE_PACKAGES"
	@hack/phase.sh run unit bash -o pipefail -c 'race=$$($(GO) list $(RACE_PACKAGES)) && pkgs=$$($(GO) list ./... | grep -vxF -f <(echo "$$race")) && \
		KUBEBUILDER_ASSETS="$$(hack/envtest-assets.sh)" $(GOTEST) $(TESTFLAGS) $$pkgs | $(TESTSUMMARY) -state "$$KFN_PHASE_STATE"'
	@# Nested modules (own go.mod, outside ./... above): the real KEDA's e2e.
	@for m in $(NESTED_TEST_MODULES); do \
		echo "cd $$m && go test ./..."; \
		hack/phase.sh run "$$m" bash -o pipefail -c 'cd "$$1" && KUBEBUILDER_ASSETS="$$($(CURDIR)/hack/envtest-assets.sh)" $(GOTEST) $(TESTFLAGS) ./... | $(TESTSUMMARY) -state "$$KFN_PHASE_STATE"' - "$$m" || exit 1; \
	done
	@hack/phase.sh run race bash -c '$(MAKE) --no-print-directory test-race TESTSUMMARY_FLAGS="-state $$KFN_PHASE_STATE"'
	@# The fuzz targets' instrumented build (every dependency compiled again
	@# for coverage) runs beside the real node's scenarios, which wait on
	@# pods for a third of their time; at the lowest priority, so that the
	@# scenarios' timing is as without it.
	@hack/phase.sh background fuzz nice -n 19 $(MAKE) --no-print-directory fuzz
	@$(MAKE) --no-print-directory test-cluster
	@hack/phase.sh await fuzz
	@hack/phase.sh report

# A single-node cluster from source (see README, "A real node"): the
# binaries are built once per version into ~/.cache/kfn/cluster, kfn's
# images on every run. The upgrade scenario (e2e/cluster
# TestUpgradeUnderLoad) also needs the previous release's images, built once
# per commit (test/node/release-images.sh) by test/node/prepare.sh, beside
# the package tests in make test. -parallel: how many of the
# scenarios that leave the install as it is run at once (e2e/cluster doc.go).
CLUSTER_TESTFLAGS ?= -timeout 40m -parallel 6
# The real node's scenarios must end within this (hack/testsummary -budget):
# a new scenario pays for its time, by running beside the others or making
# another cheaper, instead of slowing every make test.
CLUSTER_BUDGET ?= 20m
# How many nodes make cluster starts (1 or 2; the tests add their second node themselves).
CLUSTER_NODES ?= 1

.PHONY: test-cluster
test-cluster: testsummary ## Run the end-to-end tests on a real node (root; KFN_SKIP_CLUSTER=1 skips them; installs the browser its web view scenario drives when missing).
	@if [ "$${KFN_SKIP_CLUSTER:-}" = 1 ]; then \
		echo "test-cluster: SKIPPED (KFN_SKIP_CLUSTER=1): no kfn pod was run on a real node"; \
	else \
		hack/test-packages.sh chromium fonts-dejavu-core && \
		{ dirs=$$(hack/phase.sh await cluster-build) || \
			{ [ $$? = 3 ] && dirs=$$(hack/phase.sh run cluster-build test/node/prepare.sh); }; } && \
		bin=$$(echo "$$dirs" | sed -n 1p) && images=$$(echo "$$dirs" | sed -n 2p) && \
		echo "cd e2e/cluster && go test $(CLUSTER_TESTFLAGS) ./..." && \
		cd e2e/cluster && export KFN_CLUSTER_BIN="$$bin" KFN_CLUSTER_IMAGES="$$images" && \
		../../hack/phase.sh run cluster-scenarios bash -o pipefail -c '$(GOTEST) $(CLUSTER_TESTFLAGS) ./... | $(TESTSUMMARY) -times -budget $(CLUSTER_BUDGET) -state "$$KFN_PHASE_STATE"'; \
	fi

.PHONY: cluster
cluster: ## Start a single-node cluster with KEDA and kfn installed (root; prints the kubeconfig; CLUSTER_NODES=2 adds a second node).
	bin=$$(test/node/assets.sh) && images=$$(test/node/images.sh "$$bin") && \
		$(GO) run ./test/node up -bin "$$bin" -images "$$images" -nodes $(CLUSTER_NODES)

.PHONY: cluster-down
cluster-down: ## Stop the cluster of make cluster and remove every trace of it.
	$(GO) run ./test/node down

.PHONY: fuzz
fuzz: ## Run each fuzz target for its number of inputs (or FUZZTIME).
	@for t in $(FUZZ_TARGETS); do \
		IFS=: read -r pkg fn inputs <<< "$$t"; \
		budget="$(FUZZTIME)"; budget="$${budget:-$${inputs}x}"; \
		echo "fuzz $$pkg $$fn ($$budget)"; \
		out=$$($(GO) test $$pkg -run '^$$' -fuzz "^$$fn$$" -fuzztime "$$budget" -parallel 1 2>&1) || \
			{ echo "$$out"; exit 1; }; \
	done

# make mutate: mutation testing with gremlins (hack/mutate.sh says how), of
# the packages PKGS names (make mutate PKGS="./eventbridge/publisher ./scaler/activity")
# or, with PKGS empty, of those a change touches since BASE. Not part of
# make test: one package takes minutes to an hour.
PKGS ?=
BASE ?= main
# More flags for `gremlins unleash`, for example --dry-run.
MUTATE_FLAGS ?=
# File names: only these files of the packages are mutated (empty: all).
MUTATE_FILES ?=
# Mutants tested at once, and how many times its package's first test run
# a mutant's may take before it counts as timed out (see hack/mutate.sh).
MUTATE_WORKERS ?= 1
MUTATE_TIMEOUT_COEFFICIENT ?= 3
# Run outside the main module (go install module@version) so that its
# dependencies do not change the module graph of kfn's own code (a tool line
# in go.mod would upgrade spf13/cast, which Helm's template functions use).
GREMLINS_VERSION := v0.6.0

.PHONY: mutate
mutate: envtest ## Mutation testing (gremlins) of PKGS, or of the packages changed since BASE (default main); see README.
	@GOBIN=$(BIN) $(GO) install github.com/go-gremlins/gremlins/cmd/gremlins@$(GREMLINS_VERSION)
	KUBEBUILDER_ASSETS="$$(hack/envtest-assets.sh)" GREMLINS=$(BIN)/gremlins BASE="$(BASE)" \
		MUTATE_WORKERS="$(MUTATE_WORKERS)" MUTATE_TIMEOUT_COEFFICIENT="$(MUTATE_TIMEOUT_COEFFICIENT)" \
		MUTATE_FLAGS="$(MUTATE_FLAGS)" MUTATE_FILES="$(MUTATE_FILES)" hack/mutate.sh $(PKGS)

.PHONY: bench
bench: envtest ## Run every benchmark and write BENCHMARKS.md with scaling curves (about an hour and a half, an hour of it the real node's wakes, which need root; BENCH_QUICK=1: about 2, without them).
	KUBEBUILDER_ASSETS="$$(hack/envtest-assets.sh)" $(GO) run ./bench/report $(BENCHFLAGS)

.PHONY: test-race
test-race: envtest testsummary ## Run the tests of RACE_PACKAGES with the race detector (part of make test).
	KUBEBUILDER_ASSETS="$$(hack/envtest-assets.sh)" CGO_ENABLED=1 $(GOTEST) -race $(TESTFLAGS) $(RACE_PACKAGES) | $(TESTSUMMARY) $(TESTSUMMARY_FLAGS)

.PHONY: stress
stress: envtest testsummary ## Run the tests of RACE_PACKAGES (or PKGS) under the race detector beside busy loops, as a loaded CI machine does (STRESS_LOAD loops, default 2; STRESS_COUNT runs, default 2; STRESS_RUN: -run). Not part of make test.
	KUBEBUILDER_ASSETS="$$(hack/envtest-assets.sh)" GO=$(GO) hack/stress.sh $(or $(PKGS),$(RACE_PACKAGES)) | $(TESTSUMMARY) $(TESTSUMMARY_FLAGS)

.PHONY: testsummary
testsummary: ## Build hack/testsummary, which prints go test -json's output for make test.
	$(GO) build -o $(TESTSUMMARY) ./hack/testsummary

.PHONY: test-packages
test-packages: ## Install the Debian packages the tests use when missing (root: apt-get; else says what is missing).
	@hack/test-packages.sh

.PHONY: envtest
envtest: ## Build kube-apiserver and etcd for tests into ~/.cache/kfn (only when missing).
	@hack/envtest-assets.sh >/dev/null

.PHONY: generate
generate: ## Regenerate deepcopy code and the CRDs (api/crds, copied into charts/kfn/files/crds, which the chart renders) from the API markers.
	$(GO) tool controller-gen object:headerFile=hack/boilerplate.go.txt paths=./api/...
	$(GO) tool controller-gen crd paths=./api/... output:crd:artifacts:config=api/crds
	$(GO) run ./hack/crdversions -crd api/crds/gateway.kyma-project.io_apirules.yaml -from v2 -as v2alpha1
	rm -f charts/kfn/files/crds/*.yaml && cp api/crds/*.yaml charts/kfn/files/crds/

.PHONY: verify
verify: ## Fail when code is unformatted, vet complains, a rule of hack/rules is broken, a go.mod is untidy, or generated files are stale.
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
		if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	@# The written rules (file and function length, no stored context, one
	@# constructor and lifecycle shape, no duplicated logic: hack/rules/doc.go),
	@# against the list of known violations, which must only shrink. After
	@# vet, whose export data it reads, it costs seconds.
	$(GO) run ./hack/rules
	@for m in $(NESTED_MODULES); do echo "cd $$m && go vet ./..."; \
		(cd $$m && $(GO) vet ./...) || exit 1; done
	@# go.mod and go.sum of every module as go mod tidy leaves them (a nested
	@# module's test run stops at "updates to go.mod needed" otherwise).
	@for m in . $(NESTED_MODULES); do (cd $$m && $(GO) mod tidy -diff >/dev/null) || { echo "$$m: go.mod or go.sum is not tidy: run 'go mod tidy' there and commit"; exit 1; }; done
	@$(MAKE) --no-print-directory generate >/dev/null
	@if ! git diff --quiet -- api charts/kfn/files/crds; then \
		git --no-pager diff --stat -- api charts/kfn/files/crds; \
		echo "generated files are stale: run 'make generate' and commit the result"; exit 1; fi

.PHONY: kfn
kfn: ## Build bin/kfn only (what make dev runs).
	$(GO) build -o $(BIN)/ ./cmd/kfn

.PHONY: build
build: ## Build the binaries under cmd/ into bin/.
	$(GO) build -o $(BIN)/ ./cmd/...

# Where `make images` tags and `make images-push` pushes the images; their tag
# is the chart's appVersion, the tag the chart installs by default.
REGISTRY ?= localhost:5000/kfn
APP_VERSION = $(shell awk '/^appVersion:/ {gsub(/"/, "", $$2); print $$2}' charts/kfn/Chart.yaml)
# The runtime images, each with its Dockerfile and build arguments, as
# runtimes/images.txt lists them (test/node/images.sh reads it too).
RUNTIME_IMAGES := $(shell awk '!/^\#/ && NF { print $$1 }' runtimes/images.txt)

.PHONY: images
images: ## Build the server image and the runtime images with Docker (REGISTRY=...).
	docker build -t $(REGISTRY)/kfn:$(APP_VERSION) --build-arg VERSION=$(APP_VERSION) .
	@grep -v '^#' runtimes/images.txt | while read -r r file args; do \
		[ -n "$$r" ] || continue; \
		set -- ; for a in $$args; do set -- "$$@" --build-arg "$$a"; done; \
		echo "docker build -t $(REGISTRY)/runtime-$$r:$(APP_VERSION) -f runtimes/$$file $$* runtimes"; \
		docker build -t $(REGISTRY)/runtime-$$r:$(APP_VERSION) -f runtimes/$$file "$$@" runtimes || exit 1; \
	done

.PHONY: images-push
images-push: images ## Push the images built by `make images`.
	docker push $(REGISTRY)/kfn:$(APP_VERSION)
	@for r in $(RUNTIME_IMAGES); do docker push $(REGISTRY)/runtime-$$r:$(APP_VERSION); done

.PHONY: clean
clean: ## Remove bin/ (the test API server cache in ~/.cache/kfn stays).
	rm -rf $(BIN)
