#!/usr/bin/env bash
# Builds fuzz/expr_fuzzer.cpp + kernels/ir/expr.cpp with clang++ -fsanitize=fuzzer,address,undefined
# against the wheel's libc10 and runs it for N seconds (default 60) from a seed corpus written
# from tests/expr_fuzz.h's seeds. Optional: without clang++ it says so and exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_TO_RUN=${1:-60}
if ! command -v clang++ >/dev/null; then
  echo "fuzz-expr: skipped, clang++ is not installed (apt-get install clang); the bounded fuzz test"
  echo "           ExprFuzz.* in the gtest suite covers the decoder without it"
  exit 0
fi
OUT=${FUZZ_BUILD:-build-fuzz}
mkdir -p "$OUT/corpus"
TORCH=$(.venv/bin/python -c 'import torch, os; print(os.path.dirname(torch.__file__))')
ABI=$(.venv/bin/python -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')
clang++ -std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -D_GLIBCXX_USE_CXX11_ABI="$ABI" \
  -I. -Iinclude -isystem "$TORCH/include" fuzz/expr_fuzzer.cpp kernels/ir/expr.cpp kernels/ir/op_registry.cpp \
  -L"$TORCH/lib" -lc10 -Wl,-rpath,"$TORCH/lib" -o "$OUT/expr_fuzzer"
# Seed corpus: the valid expressions of tests/expr_fuzz.h, one file each.
grep -o '"v1: [^"]*"' tests/expr_fuzz.h | sed 's/^"//; s/"$//' | nl -nln | while read -r n e; do
  printf '%s' "$e" > "$OUT/corpus/seed-$n"
done
"$OUT/expr_fuzzer" -max_total_time="$SECONDS_TO_RUN" -max_len=512 -print_final_stats=1 "$OUT/corpus"
