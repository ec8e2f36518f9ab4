#!/usr/bin/env bash
# Checks that every C++ file of the project is laid out as .clang-format says (ctest `format`).
# Fix with: scripts/check_format.sh --fix
set -euo pipefail
cd "$(dirname "$0")/.."
CLANG_FORMAT=${CLANG_FORMAT:-clang-format}
mapfile -t files < <(find common kernels passes registration tools include tests bench fuzz examples \
  -type f \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.inc' \) | sort)
if [ "${1:-}" = --fix ]; then
  "$CLANG_FORMAT" -i "${files[@]}"
  exit 0
fi
"$CLANG_FORMAT" --dry-run --Werror "${files[@]}"
echo "format: ${#files[@]} files clean"
