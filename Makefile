# ncclrun build and checks. `make test` is what CI runs (.ci/run).
GO      ?= go
BIN     ?= bin/ncclrun
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
# runtime.godebugDefault is the GODEBUG the binary starts with (the go
# command sets it the same way from go.mod): disablethp=1 keeps the Go
# heap off transparent huge pages from its first page, on nodes whose THP
# setting is "always" (docs/performance.md, "Huge pages").
GODEBUG_DEFAULT := -X runtime.godebugDefault=disablethp=1
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT) $(GODEBUG_DEFAULT)
IMAGE   ?= ncclrun:dev
BASE_IMAGE ?= ubuntu:24.04
FUZZTIME ?= 10s

export CGO_ENABLED := 0

.PHONY: build test unit vet cross fuzz-short demo bench image integration acceptance clean
.PHONY: multinode slurm

# urfave_cli_no_docs leaves out the CLI library's man-page generator, whose
# package init costs ~1 ms of every start (docs/performance.md).
build:
	$(GO) build -trimpath -tags urfave_cli_no_docs -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/ncclrun

# The test command of README.md: vet, unit tests with the race detector,
# the cross-builds that keep the build tags honest, and a short fuzz run.
test: vet unit cross fuzz-short

vet:
	$(GO) vet ./...
	@if command -v staticcheck >/dev/null 2>&1; then staticcheck ./...; \
	elif [ "$$CI" = true ]; then echo "staticcheck not installed (CI=true): failing"; exit 1; \
	else echo "staticcheck not installed: skipped (.ci/run installs honnef.co/go/tools/cmd/staticcheck@v0.8.2)"; fi

# Under -race the diagnosis sweeps (every pattern against every testdata
# line) take every 8th log line; the second run checks every line.
unit:
	CGO_ENABLED=1 $(GO) test -race -count=1 -timeout 25m ./...
	$(GO) test -count=1 ./diagnosis/

cross:
	GOOS=linux GOARCH=arm64 $(GO) build -o /dev/null ./...
	GOOS=darwin GOARCH=arm64 $(GO) build -o /dev/null ./...

fuzz-short:
	scripts/fuzz-short.sh $(FUZZTIME)

demo: build
	$(BIN) demo

bench: build
	scripts/bench.sh

image: build
	docker build -f Dockerfile.base --build-arg BASE_IMAGE=$(BASE_IMAGE) -t $(IMAGE) .

integration: build
	$(GO) test -count=1 -tags integration ./integration/...

# The real clients (torchrun, mpirun) through ncclrun and without it.
acceptance:
	$(GO) test -count=1 -timeout 20m -tags acceptance ./acceptance/...

# Multi-node jobs on network namespaces of this machine (part of acceptance).
multinode:
	$(GO) test -count=1 -timeout 15m -tags acceptance -run '^TestMultinode' ./acceptance/...

# A real Slurm cluster (munge, slurmctld, a slurmd on each of two nodes made
# of network namespaces), started and torn down by the tests: docs/slurm.md.
slurm:
	$(GO) test -count=1 -timeout 5m -tags slurm ./slurm/...

clean:
	rm -rf bin dist

# The Soft-RoCE suite (rdma/, docs/rdma.md): a qemu VM with Debian's kernel
# and verbs stack, assembled by scripts/rdma-vm.sh and cached outside the
# repository; real ibv_reg_mr failures and the ways out of them.
.PHONY: rdma
rdma:
	$(GO) test -count=1 -timeout 20m -tags rdma ./rdma/
