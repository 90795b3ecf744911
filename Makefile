# rlxsplat — thin targets over the go tool (style.md §6.15).
GO      ?= go
BIN     := bin/rlxsplat
GPUTEST := bin/gputest

.PHONY: all build test test-short test-gpu ptx vet lint fuzz demo bench parity clean

all: build

## build: the single static binary (no cgo: purego loads libcuda at run time)
build:
	CGO_ENABLED=0 $(GO) build -o $(BIN) ./cmd/rlxsplat

## test: every test; GPU tests skip here with the reason, and the fused engine's kernels then
## run on the host emulator instead (needs g++; skipped with the reason without it), and the
## stage-parity, batch, edit, graph and row-moving tests again through the Metal backend on a simulated device
## (the exact MSL built for the host). The
## output is go test's, then every skipped test with its reason (internal/cmd/skipreport);
## the exit status is go test's.
test:
	@$(GO) build -o bin/skipreport ./internal/cmd/skipreport
	bin/skipreport -go $(GO) ./... \; RLXSPLAT_FUSED_EMU=1 ./internal/fused ./internal/multi \
		\; RLXSPLAT_FUSED_METAL_HOST=1 -run '^(TestStageParity|TestEditsAndState|TestGraphStepsMatchEager|TestBatchParity|TestRows.*)$$' ./internal/fused

test-short:
	$(GO) test -short ./...

## ptx: regenerate shaders/ptx/*.ptx with NVRTC (on a machine that has it); checked by go test ./shaders
ptx:
	$(GO) run ./internal/gpu/cmd/genptx -dir shaders

## test-gpu: test binaries for the GPU machine; run each from its package directory there
test-gpu:
	@mkdir -p $(GPUTEST)
	@for p in $$($(GO) list ./internal/gpu/... ./internal/fused/... ./internal/multi/... 2>/dev/null); do \
		n=$$(basename $$p); \
		CGO_ENABLED=0 $(GO) test -c -o $(GPUTEST)/$$n.test $$p || exit 1; \
	done
	CGO_ENABLED=0 $(GO) build -o $(GPUTEST)/rlxsplat ./cmd/rlxsplat
	@echo "built $(GPUTEST)/"

## vet: go vet for this platform, linux/amd64 and darwin/arm64 (the Metal host code)
vet:
	$(GO) vet ./...
	GOOS=linux GOARCH=amd64 CGO_ENABLED=0 $(GO) vet ./...
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 $(GO) vet ./...

## lint: gofmt, plus staticcheck when installed
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "✗ gofmt:"; echo "$$out"; exit 1; else echo "✓ gofmt"; fi
	@if command -v staticcheck >/dev/null; then staticcheck ./... && echo "✓ staticcheck"; else echo "✗ staticcheck not installed (skipped)"; fi

## fuzz: every parser's fuzzer for FUZZTIME each (default 60s). Minimising each new
## input is capped: with seeds from real (MB-sized) files Go's default 60 s
## minimisation would otherwise eat the whole run.
FUZZTIME ?= 60s
fuzz:
	@for pkg in ./internal/io/ply ./internal/io/spz ./internal/io/gltfsplat ./internal/io/dotsplat ./internal/io/scene ./internal/io/colmap ./internal/io/nerf ./internal/io/imageio ./internal/io/ckpt ./internal/config ./internal/gpu/driver ./internal/viewer; do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg | grep ^Fuzz); do \
			echo "== $$pkg $$f"; \
			$(GO) test $$pkg -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 10x -parallel 1 || exit 1; \
		done; \
	done

## demo: train the built-in demo scene with its preset (configs/demo.yaml)
demo: build
	$(BIN) train --out out/demo

## bench: CPU step timings on the demo scene, and the Go benchmarks
bench: build
	$(BIN) bench
	$(GO) test -run '^$$' -bench . -benchtime 5x ./internal/engine/cpu ./internal/raster ./internal/loss

## parity: every gradient against finite differences (and GPU engines against the CPU)
parity: build
	$(BIN) parity

clean:
	rm -rf bin out
