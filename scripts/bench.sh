#!/usr/bin/env bash
# `make bench`: the side-by-side suite (bench/suite.py), the first calls' memory against issue 14's
# bound (bench/first_call_memory.py --enforce), the kernel micro-benchmarks (tsfuse_microbench,
# AVX2 and SSE2 loops), then the report (bench/report.py).
#   QUICK=1     small sizes, fewer workloads; the report goes to BUILD/bench/benchmarks.md
#               instead of docs/benchmarks.md (CI runs this so the harness cannot rot)
#   GRAD=1      the forward + backward workloads only (bench/workloads.py, `grad`), 2 threads and,
#               for the per-core ratios, compile and tsfuse at one thread, and their first calls'
#               allocated bytes; their tables on the page are rewritten, the rest of it is left as it is
#   DEVICE=cuda run the suite on the GPU (default cpu)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
PY=${PY:-.venv/bin/python}
OUT="$BUILD/bench"
mkdir -p "$OUT"
export DEVICE=${DEVICE:-cpu}
# The forward + backward workloads' per-core cells: torch.compile and tsfuse at one thread.
PER_CORE=(--grad --threads 1 --impls compile,tsfuse-load-time --build "$BUILD")
# Their first calls' allocated bytes against inputs + loss + gradients + 2 MiB (reported, not enforced).
FIRST_GRAD=(--grad --build "$BUILD" --markdown --json "$OUT/first_call_grad.json")

if [ -n "${QUICK:-}" ] && [ "${QUICK}" != 0 ]; then
  "$PY" bench/suite.py --quick --fresh --build "$BUILD" --out "$OUT/results.json"
  MIN_TIME=0.05; FILTER='/4096$|/250$|/1024$|tiny'; REPORT="$OUT/benchmarks.md"; FIRST_SIZES=(--sizes 1024x500)
  PER_CORE_JSON=
elif [ -n "${GRAD:-}" ] && [ "${GRAD}" != 0 ]; then
  # A cell that errors fails the run only after the page is written (its tables say which).
  status=0
  "$PY" bench/suite.py --grad --build "$BUILD" --out "$OUT/results_grad.json" || status=1
  "$PY" bench/suite.py "${PER_CORE[@]}" --out "$OUT/results_grad_1thread.json" || status=1
  "$PY" bench/first_call_memory.py "${FIRST_GRAD[@]}" | tee "$OUT/first_call_grad.md" || status=1
  "$PY" bench/report.py --results "$OUT/results_grad.json" --per-core "$OUT/results_grad_1thread.json" \
    --out docs/benchmarks.md
  exit $status
else
  "$PY" bench/suite.py --build "$BUILD" --out "$OUT/results.json"
  MIN_TIME=0.5; FILTER='.'; REPORT=docs/benchmarks.md; FIRST_SIZES=(); PER_CORE_JSON=
  if [ "$DEVICE" = cpu ]; then
    PER_CORE_JSON="$OUT/results_1thread.json"
    "$PY" bench/suite.py "${PER_CORE[@]}" --out "$PER_CORE_JSON"
    "$PY" bench/first_call_memory.py "${FIRST_GRAD[@]}" > "$OUT/first_call_grad.md"
  fi
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
  --micro-baseline "$OUT/microbench_baseline.json" --per-core "$PER_CORE_JSON" --out "$REPORT"
