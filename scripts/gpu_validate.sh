#!/usr/bin/env bash
# GPU validation of the CUDA kernels, for a machine with a CUDA device, nvcc and the
# repository's .venv (torch 2.11+cu130). No internet needed when build/ was configured before or
# the Debian build dependencies (spdlog, fmt, gtest, CLI11, nlohmann-json, xbyak) are installed or
# unpacked (`dpkg -x pkg.deb /opt/deps` and CMAKE_FLAGS=-DCMAKE_PREFIX_PATH=/opt/deps/usr).
#
#   scripts/gpu_validate.sh [OUTDIR]      # default OUTDIR=gpu-results
#
# Steps (each writes OUTDIR/<step>.log; the script stops at the first failure):
#   1. build (both archs, as CI)            4. compute-sanitizer racecheck (shared-memory kernels)
#   2. GPU tests (TSFUSE_CUDA_KERNELS=1)    5. op tests on CUDA via the chunked default (unchanged)
#   3. compute-sanitizer memcheck           6. benchmark cells -> OUTDIR/benchmarks.md
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-gpu-results}
mkdir -p "$OUT"
BUILD=${BUILD:-build}
PY=.venv/bin/python
SAN=${COMPUTE_SANITIZER:-/usr/local/cuda/bin/compute-sanitizer}
log() { echo "== $*" | tee -a "$OUT/summary.txt"; }

nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || true
log "device: $($PY -c 'import torch; print(torch.cuda.get_device_name())')"

log "1. build"
( time make build JOBS="$(nproc)" ) > "$OUT/build.log" 2>&1

log "1b. generated kernels: NVRTC for this device's arch family, PoCL, oclgrind (no GPU needed)"
( cd "$BUILD" && ctest --output-on-failure -R 'GeneratedKernels|oclgrind' ) > "$OUT/generated_kernels.log" 2>&1

log "2. GPU tests"
TSFUSE_CUDA_KERNELS=1 "$BUILD/bin/tsfuse_tests" --gtest_filter='CudaKernels.*' \
  > "$OUT/gpu_tests.log" 2>&1
grep -q "SKIPPED" "$OUT/gpu_tests.log" && grep "SKIPPED" "$OUT/gpu_tests.log" | tee -a "$OUT/summary.txt" || true

log "3. memcheck"
TSFUSE_CUDA_KERNELS=1 "$SAN" --tool memcheck --error-exitcode 9 \
  "$BUILD/bin/tsfuse_tests" --gtest_filter='CudaKernels.*:-CudaKernels.SixtyFourBitIndexing' \
  > "$OUT/memcheck.log" 2>&1

log "4. racecheck"
TSFUSE_CUDA_KERNELS=1 "$SAN" --tool racecheck --error-exitcode 9 \
  "$BUILD/bin/tsfuse_tests" --gtest_filter='CudaKernels.PairwiseIoU*:CudaKernels.Similarity*:CudaKernels.GenericReduce*:CudaKernels.State*' \
  > "$OUT/racecheck.log" 2>&1

log "5. full test suite (CPU + default CUDA path)"
( cd "$BUILD" && ctest --output-on-failure -j 4 ) > "$OUT/ctest.log" 2>&1

log "6. benchmarks"
TSFUSE_LIB="$BUILD/lib/libtsfuse.so" $PY bench/cuda_bench.py --out "$OUT/benchmarks.md" > "$OUT/bench.log" 2>&1
cat "$OUT/benchmarks.md" | tee -a "$OUT/summary.txt"
log "all steps passed; paste $OUT/benchmarks.md into docs/benchmarks.md"
