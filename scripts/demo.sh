#!/usr/bin/env bash
# tsfuse demo (`make demo`): script the seed workloads, optimize each with optimize-ts (checked
# against the original, JSON report next to it), then measure the first-call peak memory of eager
# vs scripted vs optimized at the acceptance sizes.
#
#   scripts/demo.sh [BUILD_DIR]      (default: build; run `make build` first)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
PY=.venv/bin/python
TOOL="$BUILD/bin/optimize-ts"
OUT="$BUILD/examples"

for f in "$PY" "$TOOL" "$BUILD/lib/libtsfuse.so"; do
  [ -e "$f" ] || { echo "demo: $f is missing; run 'make build BUILD=$BUILD' first" >&2; exit 1; }
done

echo "== 1. seed models -> $OUT"
"$PY" examples/seed_models.py "$OUT"

echo
echo "== 2. optimize-ts --check (reports: $OUT/*.report.json)"
for name in intersection similarity nothing_to_fuse; do
  args=(--check --report "$OUT/$name.report.json")
  # nothing_to_fuse has no example_inputs(): give forward's input shapes
  [ "$name" = nothing_to_fuse ] && args+=(--input-shape a:8,16 --input-shape b:16,4)
  echo
  echo "\$ optimize-ts ${args[*]} $OUT/$name.pt $OUT/$name.opt.pt"
  "$TOOL" "${args[@]}" "$OUT/$name.pt" "$OUT/$name.opt.pt"
done

echo
echo "== 3. first-call peak memory (CPU, one fresh process per row; JSON: $OUT/memory.json)"
"$PY" bench/measure_memory.py --build "$BUILD" --workdir "$OUT/bench" --json "$OUT/memory.json"
