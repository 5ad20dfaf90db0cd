# kiln — convenience wrapper around scripts/install-deps, CMake and ctest.
#   make demo       set-up, build, run the bundled model
#   make test       set-up, build, run every test
#   make test-asan  the same under AddressSanitizer + UBSan
#   make fuzz       every fuzz target (npy, meta, attrs, onnx), FUZZ_SECONDS
#                   each (600 by default); fails on any finding
#   make bench      kiln vs onnxruntime on four models (docs/benchmarks.md);
#                   BENCH_MODELS, BENCH_BATCHES, BENCH_THREADS, BENCH_RUNS narrow it

BUILD      ?= build
BUILD_ASAN ?= build-asan
BUILD_FUZZ ?= build-fuzz
JOBS       ?= $(shell nproc)
FUZZ_SECONDS ?= 600
KILN_PYTHON ?= .venv/bin/python

.PHONY: all deps build demo test test-asan fuzz bench clean

all: build

deps:
	@./scripts/install-deps

$(BUILD)/build.ninja: | deps
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null

build: deps $(BUILD)/build.ninja
	@ninja -C $(BUILD) -j $(JOBS) | grep -v "^ninja: no work to do" || true
	@test -x $(BUILD)/kiln

demo: build
	@./scripts/demo $(BUILD)

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-asan: deps
	@cmake -S . -B $(BUILD_ASAN) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DKILN_SANITIZE=ON >/dev/null
	@ninja -C $(BUILD_ASAN) -j $(JOBS)
	@cd $(BUILD_ASAN) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	    ctest --output-on-failure -j $(JOBS) -LE no-asan

fuzz: deps
	@CC=clang cmake -S . -B $(BUILD_FUZZ) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	    -DKILN_FUZZ=ON -DKILN_SANITIZE=ON -DKILN_TESTS=OFF >/dev/null
	@ninja -C $(BUILD_FUZZ) -j $(JOBS) fuzz_all
	@./scripts/fuzz $(BUILD_FUZZ) $(FUZZ_SECONDS)

# Not part of `make test`: it takes minutes and its figures depend on the
# machine; it fails only if a model cannot be generated, compiled or run.
bench: build
	@$(KILN_PYTHON) bench/run_bench.py --build $(BUILD)

clean:
	rm -rf $(BUILD) $(BUILD_ASAN) $(BUILD_FUZZ)
