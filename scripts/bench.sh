#!/usr/bin/env bash
# `make bench`: the side-by-side suite (bench/suite.py), the first calls' memory against issue 14's
# bound (bench/first_call_memory.py --enforce), the kernel micro-benchmarks (tsfuse_microbench,
# AVX2 and SSE2 loops), then the report (bench/report.py).
#   QUICK=1     small sizes, fewer workloads; the report goes to BUILD/bench/benchmarks.md
#               instead of docs/benchmarks.md (CI runs this so the harness cannot rot)
#   DEVICE=cuda run the suite on the GPU (default cpu)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
PY=${PY:-.venv/bin/python}
OUT="$BUILD/bench"
mkdir -p "$OUT"
export DEVICE=${DEVICE:-cpu}

if [ -n "${QUICK:-}" ] && [ "${QUICK}" != 0 ]; then
  "$PY" bench/suite.py --quick --fresh --build "$BUILD" --out "$OUT/results.json"
  MIN_TIME=0.05; FILTER='/4096$|/250$|/1024$|tiny'; REPORT="$OUT/benchmarks.md"; FIRST_SIZES=(--sizes 1024x500)
else
  "$PY" bench/suite.py --build "$BUILD" --out "$OUT/results.json"
  MIN_TIME=0.5; FILTER='.'; REPORT=docs/benchmarks.md; FIRST_SIZES=()
fi
if [ "$DEVICE" = cpu ]; then
  "$PY" bench/first_call_memory.py --build "$BUILD" "${FIRST_SIZES[@]}" --enforce --markdown \
    --json "$OUT/first_call.json" > "$OUT/first_call.md"
fi
"$BUILD/bin/tsfuse_microbench" --benchmark_min_time=$MIN_TIME --benchmark_filter="$FILTER" \
  --benchmark_out="$OUT/microbench.json" --benchmark_out_format=json
TSFUSE_CPU_ISA=baseline "$BUILD/bin/tsfuse_microbench" --benchmark_min_time=$MIN_TIME \
  --benchmark_filter="($FILTER).*" --benchmark_out="$OUT/microbench_baseline.json" --benchmark_out_format=json >/dev/null
"$PY" bench/report.py --results "$OUT/results.json" --micro "$OUT/microbench.json" \
  --micro-baseline "$OUT/microbench_baseline.json" --out "$REPORT"
