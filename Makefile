# tsfuse — the two commands a newcomer needs: `make demo` and `make test`.
# Both set up everything on a fresh machine (idempotent), build, then run.
SHELL := /bin/bash
BUILD ?= build
PY := .venv/bin/python
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all setup configure build test demo bench clean test-asan test-tsan fuzz-expr

all: build

setup:
	@bash scripts/setup.sh

$(BUILD)/build.ninja: CMakeLists.txt | setup
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DPython3_EXECUTABLE=$(abspath $(PY)) \
	  -DCMAKE_PREFIX_PATH="$$($(PY) -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')" \
	  $(CMAKE_FLAGS)

configure: setup $(BUILD)/build.ninja

build: configure
	cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

demo: build
	@bash scripts/demo.sh $(BUILD)

# Sanitizer builds (docs/reliability.md): our code instrumented, libtorch as shipped; the C++
# suite runs in one process with the options compiled into it (tests/reliability/sanitizer_options.cpp).
# SAN_GTEST_FILTER picks a subset; SAN_TARGET=tsfuse_reliability_tests builds only the reliability
# test files (6 of 23). CI runs neither: a cold sanitizer build is too slow here (docs/reliability.md).
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
SAN_GTEST_FILTER ?= *
SAN_TARGET ?= tsfuse_tests
test-asan: setup
	$(MAKE) configure BUILD=$(ASAN_BUILD) CMAKE_FLAGS=-DTSFUSE_SANITIZE=address,undefined
	cmake --build $(ASAN_BUILD) -j $(JOBS) --target $(SAN_TARGET)
	$(ASAN_BUILD)/bin/$(SAN_TARGET) --gtest_filter='$(SAN_GTEST_FILTER)'

# OMP_NUM_THREADS=1: libtorch's OpenMP runtime is not instrumented, so TSan cannot see its
# barriers; the threads under test are ours (tests/reliability/concurrency_test.cpp).
test-tsan: setup
	$(MAKE) configure BUILD=$(TSAN_BUILD) CMAKE_FLAGS=-DTSFUSE_SANITIZE=thread
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target $(SAN_TARGET)
	OMP_NUM_THREADS=1 $(TSAN_BUILD)/bin/$(SAN_TARGET) --gtest_filter='$(SAN_GTEST_FILTER)'

# libFuzzer target for the expression decoder (optional: needs clang++; fuzz/README.md).
FUZZ_SECONDS ?= 60
fuzz-expr: setup
	@bash fuzz/run.sh $(FUZZ_SECONDS)

# Benchmarks: `make bench` (full suite, regenerates docs/benchmarks.md), `make bench QUICK=1` (the
# small CI run, report in build/bench/), `make bench GRAD=1` (the forward + backward rows only, and
# their tables on the page), `DEVICE=cuda` on a GPU machine.
bench: build
	cmake --build $(BUILD) -j $(JOBS) --target tsfuse_microbench
	@QUICK=$(QUICK) GRAD=$(GRAD) DEVICE=$(DEVICE) PY=$(PY) bash scripts/bench.sh $(BUILD)

# The pass pipeline's own time on scripted torchvision models (not in `make test`; torchvision goes
# into build/bench-deps, see bench/pipeline_time.py).
.PHONY: bench-pipeline
bench-pipeline: build
	$(PY) bench/pipeline_time.py --build $(BUILD)

# What loading libtsfuse costs big models with nothing to fuse: fresh processes per cell, medians
# (bench/load_cost.py; not in `make test`; numbers in docs/benchmarks.md).
.PHONY: bench-load-cost
bench-load-cost: build
	$(PY) bench/load_cost.py --build $(BUILD) --markdown

clean:
	rm -rf $(BUILD)

# The differential fuzzer, longer than CI's 2000 programs: `make fuzz N=100000 SEED=3`.
.PHONY: fuzz
N ?= 20000
SEED ?= 0
fuzz: build
	TSFUSE_BUILD=$(abspath $(BUILD)) TSFUSE_LIB=$(abspath $(BUILD))/lib/libtsfuse.so \
	  $(PY) tests/fuzz/run.py --programs $(N) --seed $(SEED) --jobs $(JOBS)
