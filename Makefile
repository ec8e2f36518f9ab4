# tsfuse — the two commands a newcomer needs: `make demo` and `make test`.
# Both set up everything on a fresh machine (idempotent), build, then run.
SHELL := /bin/bash
BUILD ?= build
PY := .venv/bin/python
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all setup configure build test demo clean

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

clean:
	rm -rf $(BUILD)

# The differential fuzzer, longer than CI's 2000 programs: `make fuzz N=100000 SEED=3`.
.PHONY: fuzz
N ?= 20000
SEED ?= 0
fuzz: build
	TSFUSE_BUILD=$(abspath $(BUILD)) TSFUSE_LIB=$(abspath $(BUILD))/lib/libtsfuse.so \
	  $(PY) tests/fuzz/run.py --programs $(N) --seed $(SEED) --jobs $(JOBS)
