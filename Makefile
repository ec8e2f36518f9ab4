# tsfuse — the two commands a newcomer needs: `make demo` and `make test`.
# Both set up everything on a fresh machine (idempotent), build, then run.
SHELL := /bin/bash
BUILD ?= build
PY := .venv/bin/python
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all setup configure build test demo bench clean

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

# Benchmarks: `make bench` (full suite, regenerates docs/benchmarks.md), `make bench QUICK=1` (the
# small CI run, report in build/bench/), `DEVICE=cuda` on a GPU machine.
bench: build
	cmake --build $(BUILD) -j $(JOBS) --target tsfuse_microbench
	@QUICK=$(QUICK) DEVICE=$(DEVICE) PY=$(PY) bash scripts/bench.sh $(BUILD)

clean:
	rm -rf $(BUILD)
