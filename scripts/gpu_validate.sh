#!/usr/bin/env bash
# GPU validation of the CUDA kernels, for a machine with a CUDA device.
#
#   scripts/gpu_validate.sh [OUTDIR]             # default OUTDIR=gpu-results: builds, then every step
#   PREBUILT=1 PY=python3 scripts/gpu_validate.sh OUTDIR
#       # binaries built elsewhere (build/bin, build/lib carried over, the Debian runtime libraries
#       # spdlog and fmt in $DEPS): no build, no PoCL steps, no ctest; for a lent GPU machine with
#       # its own torch 2.11.0+cu130 and nothing to install from.
#
# Every step runs under its own time limit and writes OUTDIR/<step>.log; a failing step is
# recorded in OUTDIR/summary.txt and the next one still runs (a lent machine's minutes are few),
# and the exit status is 1 when any step failed. ARCHIVE=FILE.tgz also packs OUTDIR into FILE after
# every step (a run cut short still leaves the finished steps' logs in one file).
#   1. build (both archs, as CI)                 5. compute-sanitizer memcheck (models)
#   1b. generated kernels: NVRTC, PoCL, oclgrind 6. fuzz: random programs on CUDA vs eager CUDA,
#   2. GPU tests (kernels on by default)            one step per seed of FUZZ_SEEDS (default 31)
#   3. example models on CUDA vs eager CUDA      7. compute-sanitizer racecheck (models)
#   4. the real-model corpus on CUDA vs eager    8. benchmark cells -> OUTDIR/benchmarks.md
#      CUDA (OUTDIR/corpus.md; its libraries     9. full test suite (CPU + default CUDA path)
#      from PyPI, or CORPUS_PATH where prebuilt), then trained (OUTDIR/corpus_grad.md: gradients
#      vs eager CUDA's); the fuzzer's gradient mode on CUDA follows step 6 (FUZZ_GRAD_SEEDS, 43)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-gpu-results}
mkdir -p "$OUT"
BUILD=${BUILD:-build}
PY=${PY:-.venv/bin/python}
SAN=${COMPUTE_SANITIZER:-/usr/local/cuda/bin/compute-sanitizer}
FUZZ_PROGRAMS=${FUZZ_PROGRAMS:-1000}
JOBS=${JOBS:-$(nproc)}
failed=0
log() { echo "== $*" | tee -a "$OUT/summary.txt"; }
# step NAME LIMIT_S COMMAND...: runs COMMAND with its output in OUTDIR/NAME.log.
step() {
  local name=$1 limit=$2 t0=$SECONDS rc
  shift 2
  timeout -k 10 "$limit" "$@" > "$OUT/$name.log" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then log "$name: passed ($((SECONDS - t0)) s)"
  else failed=1; log "$name: FAILED, exit $rc$([ $rc -eq 124 ] && echo " (time limit ${limit} s)") ($((SECONDS - t0)) s)"; tail -25 "$OUT/$name.log"; fi
  if [ -n "${ARCHIVE:-}" ]; then tar czf "$ARCHIVE" -C "$OUT" .; fi
}

export TSFUSE_LIB="$BUILD/lib/libtsfuse.so" TSFUSE_BUILD="$BUILD"
if [ "${PREBUILT:-0}" = 1 ]; then
  # The carried binaries find torch, the CUDA runtime and NVRTC of this machine's torch wheel.
  TORCH_DIR=$($PY -c 'import os, torch; print(os.path.dirname(torch.__file__))')
  export LD_LIBRARY_PATH="$TORCH_DIR/lib:$TORCH_DIR/../nvidia/cu13/lib:$PWD/$BUILD/lib:${DEPS:-$PWD/.gpu-deps}:${LD_LIBRARY_PATH:-}"
fi
nvidia-smi > "$OUT/env.txt" 2>&1
$PY -c 'import torch; print(torch.__version__, torch.cuda.get_device_name(), torch.cuda.get_device_capability())' \
  >> "$OUT/env.txt" 2>&1
log "device: $(tail -1 "$OUT/env.txt")"

if [ "${PREBUILT:-0}" != 1 ]; then
  step build 1800 make build JOBS="$JOBS"
  step generated_kernels 900 bash -c "cd $BUILD && ctest --output-on-failure -R 'GeneratedKernels|oclgrind'"
fi

unset TSFUSE_CUDA_KERNELS  # the default: the generated kernels
step gpu_tests 120 "$BUILD/bin/tsfuse_tests" --gtest_filter='CudaKernels.*'
grep "SKIPPED\|FAILED" "$OUT/gpu_tests.log" | tee -a "$OUT/summary.txt"
step models 120 $PY tests/gpu/cuda_models_check.py --out "$OUT/models.md"
# The sanitizers run the example models (Python loads libtsfuse after the sanitizer attached; the
# gtest binary initialises CUDA before it can, and the sanitizer then disables itself): small and
# medium sizes reach every skeleton, the tiled ones (pair2, gemm, redblock) with shared memory.
# The corpus's libraries: installed from PyPI by the test helpers, or (PREBUILT) a folder of them
# carried over (CORPUS_PATH, ahead of the machine's own packages).
if [ "${PREBUILT:-0}" != 1 ]; then
  CORPUS_PATH=$($PY -c 'import sys; sys.path.insert(0, "tests/python"); import pypi_deps as d
print(f"{d.corpus_dir()}:{d.torchvision_dir()}")' 2>> "$OUT/summary.txt")
fi
if [ -n "${CORPUS_PATH:-}" ]; then
  step corpus 300 env PYTHONPATH="$CORPUS_PATH${PYTHONPATH:+:$PYTHONPATH}" \
    $PY tests/gpu/cuda_corpus_check.py --size bench --out "$OUT/corpus.md"
  step corpus_grad 150 env PYTHONPATH="$CORPUS_PATH${PYTHONPATH:+:$PYTHONPATH}" \
    $PY tests/gpu/cuda_corpus_check.py --grad --size test --out "$OUT/corpus_grad.md"
else
  log "corpus: skipped (no CORPUS_PATH)"
fi
step memcheck 240 "$SAN" --tool memcheck --error-exitcode 9 $PY tests/gpu/cuda_models_check.py --sizes small,medium
for seed in ${FUZZ_SEEDS:-31}; do
  step "fuzz_$seed" "${FUZZ_LIMIT:-100}" env TSFUSE_FUZZ_DEVICE=cuda $PY tests/fuzz/run.py \
    --programs "$FUZZ_PROGRAMS" --jobs "$JOBS" --seed "$seed" --max-minimize 2
  tail -30 "$OUT/fuzz_$seed.log" >> "$OUT/summary.txt"
done
for seed in ${FUZZ_GRAD_SEEDS:-43}; do
  step "fuzz_grad_$seed" "${FUZZ_LIMIT:-100}" env TSFUSE_FUZZ_DEVICE=cuda $PY tests/fuzz/run.py --grad \
    --programs "${FUZZ_GRAD_PROGRAMS:-$FUZZ_PROGRAMS}" --jobs "$JOBS" --seed "$seed" --max-minimize 2
  tail -30 "$OUT/fuzz_grad_$seed.log" >> "$OUT/summary.txt"
done
step racecheck 180 "$SAN" --tool racecheck --error-exitcode 9 $PY tests/gpu/cuda_models_check.py --sizes medium
step bench 150 $PY bench/cuda_bench.py --out "$OUT/benchmarks.md" --reps "${BENCH_REPS:-20}" --compile-mode "${COMPILE_MODE:-max-autotune}"
[ -f "$OUT/benchmarks.md" ] && cat "$OUT/benchmarks.md" >> "$OUT/summary.txt"
if [ "${PREBUILT:-0}" != 1 ]; then
  step ctest 1800 bash -c "cd $BUILD && ctest --output-on-failure -j 4"
fi
[ $failed = 0 ] && log "all steps passed; paste $OUT/benchmarks.md into docs/benchmarks.md"
exit $failed
