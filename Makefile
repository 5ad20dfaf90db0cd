# kiln — convenience wrapper around scripts/install-deps, CMake and ctest.
#   make demo       set-up, build, run the bundled model
#   make test       set-up, build, run every test; ends with the passed, failed
#                   and skipped counts and why each skipped test skipped
#                   (not the quantized ops and models kiln does not run yet:
#                   label quant-pending, tests/models/QUANT_PENDING.txt)
#   make test-quant the quantized-op and quantized-model tests (label quant),
#                   the pending ones included
#   make test-asan  the same under AddressSanitizer + UBSan
#   make mutate     plants each bug of tests/mutate/mutations.txt in a scratch
#                   copy and reports the ones the tests do not catch (minutes;
#                   not part of make test)
#   make fuzz       every fuzz target (npy, meta, attrs, onnx), FUZZ_SECONDS
#                   each (600 by default); fails on any finding
#   make difftest   random graphs through onnxruntime, the reference evaluator
#                   and the compiled path for DIFF_SECONDS (docs/testing.md)
#   make bench      kiln vs onnxruntime on four models and their INT8 versions
#                   (docs/benchmarks.md);
#                   BENCH_MODELS, BENCH_BATCHES, BENCH_THREADS, BENCH_RUNS narrow it

BUILD      ?= build
BUILD_ASAN ?= build-asan
BUILD_FUZZ ?= build-fuzz
JOBS       ?= $(shell nproc)
FUZZ_SECONDS ?= 600
DIFF_SECONDS ?= 600
KILN_PYTHON ?= .venv/bin/python

.PHONY: all deps build demo test test-quant test-asan mutate fuzz difftest bench clean

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

# ctest's status is kept aside so that the summary (tests/lib/summary.sh)
# can print the counts last and the target still fails when a test failed.
test: build
	@mkdir -p $(BUILD)/Testing
	@{ cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -LE quant-pending; echo $$? > Testing/ctest-rc; } 2>&1 \
	    | tee $(BUILD)/Testing/ctest-output.txt
	@./tests/lib/summary.sh $(BUILD)/Testing/ctest-output.txt $(BUILD); exit $$(cat $(BUILD)/Testing/ctest-rc)

# Everything labelled quant, the quant-pending tests included (they fail until
# their ops land; tests/models/QUANT_PENDING.txt lists them).
test-quant: build
	@mkdir -p $(BUILD)/Testing
	@{ cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -L quant; echo $$? > Testing/ctest-rc; } 2>&1 \
	    | tee $(BUILD)/Testing/ctest-output.txt
	@./tests/lib/summary.sh $(BUILD)/Testing/ctest-output.txt $(BUILD); exit $$(cat $(BUILD)/Testing/ctest-rc)

test-asan: deps
	@cmake -S . -B $(BUILD_ASAN) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DKILN_SANITIZE=ON >/dev/null
	@ninja -C $(BUILD_ASAN) -j $(JOBS)
	@mkdir -p $(BUILD_ASAN)/Testing
	@{ cd $(BUILD_ASAN) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	    ctest --output-on-failure -j $(JOBS) -LE 'no-asan|quant-pending'; echo $$? > Testing/ctest-rc; } 2>&1 \
	    | tee $(BUILD_ASAN)/Testing/ctest-output.txt
	@./tests/lib/summary.sh $(BUILD_ASAN)/Testing/ctest-output.txt $(BUILD_ASAN); \
	    exit $$(cat $(BUILD_ASAN)/Testing/ctest-rc)

# Not part of `make test`: one rebuild and test run per planted bug.
mutate: deps
	@./scripts/mutate

fuzz: deps
	@CC=clang cmake -S . -B $(BUILD_FUZZ) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	    -DKILN_FUZZ=ON -DKILN_SANITIZE=ON -DKILN_TESTS=OFF >/dev/null
	@ninja -C $(BUILD_FUZZ) -j $(JOBS) fuzz_all
	@./scripts/fuzz $(BUILD_FUZZ) $(FUZZ_SECONDS)

# Open-ended differential testing with random seeds; cases that fail are
# minimized and saved under $(BUILD)/difftest-found (copy them to
# tests/difftest/regress once the bug is fixed).
difftest: build
	@$(KILN_PYTHON) tests/difftest/difftest.py --kiln $(BUILD)/kiln --seconds $(DIFF_SECONDS) \
	    --save-dir $(BUILD)/difftest-found

# Not part of `make test`: it takes minutes and its figures depend on the
# machine; it fails only if a model cannot be generated, compiled or run.
bench: build
	@$(KILN_PYTHON) bench/run_bench.py --build $(BUILD)

clean:
	rm -rf $(BUILD) $(BUILD_ASAN) $(BUILD_FUZZ)
