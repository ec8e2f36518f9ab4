#!/usr/bin/env bash
# Idempotent set-up for a fresh machine: Debian build deps, then the project-local .venv with the
# pinned torch wheel. A second run only verifies. pip's own cache (~/.cache/pip) keeps the wheel
# between runs on the same machine.
set -euo pipefail
cd "$(dirname "$0")/.."

DEBS=(cmake ninja-build g++ ccache clang-format chromium libspdlog-dev libfmt-dev libgtest-dev libcli11-dev nlohmann-json3-dev libbenchmark-dev libxbyak-dev valgrind
      pocl-opencl-icd ocl-icd-opencl-dev opencl-c-headers oclgrind)
missing=()
for p in "${DEBS[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "[setup] installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv"
  "$PY" -m venv .venv
fi
want=$(sha256sum requirements.txt | cut -d' ' -f1)
if [ "$(cat .venv/.requirements.sha256 2>/dev/null)" != "$want" ]; then
  # The installed packages take 5.2 GiB and pip unpacks the wheels in TMPDIR first: say so before
  # pip fails half-way with ENOSPC.
  need_kib=$((8 * 1024 * 1024))
  for dir in . "${TMPDIR:-/tmp}"; do
    free_kib=$(df -Pk "$dir" | awk 'NR == 2 {print $4}')
    if [ "${free_kib:-0}" -lt "$need_kib" ]; then
      echo "[setup] $(realpath "$dir") has $((free_kib / 1024)) MiB free; the pinned packages need about" \
           "8 GiB there (torch's wheel and its CUDA libraries). Free some space and rerun." >&2
      exit 1
    fi
  done
  echo "[setup] installing pinned Python packages (torch==2.11.0; cached by pip after the first run)"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -r requirements.txt
  echo "$want" > .venv/.requirements.sha256
fi
.venv/bin/python - <<'PY'
import torch, sys
want = "2.11.0"
if not torch.__version__.startswith(want):
    sys.exit(f"[setup] torch {torch.__version__} found in .venv, {want} required")
PY
