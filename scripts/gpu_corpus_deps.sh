#!/usr/bin/env bash
# Packs the corpus libraries a lent GPU machine lacks into .gpu-deps/corpus.tar.xz, for
# `CORPUS_PATH` of scripts/gpu_validate.sh's PREBUILT mode (that machine reaches no registry; its
# image has torch, torchvision, torchmetrics, gpytorch, scipy, ... but not these). Pure-Python
# packages come from the corpus folder the tests installed (tests/python/pypi_deps.py); kornia's
# Rust extension is downloaded for the machine's Python (PY_TAG, default 3.12).
#   scripts/gpu_corpus_deps.sh            # then carry .gpu-deps and unpack it there:
#   mkdir -p /tmp/corpus && tar xJf .gpu-deps/corpus.tar.xz -C /tmp/corpus && export CORPUS_PATH=/tmp/corpus
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
PY_TAG=${PY_TAG:-3.12}
corpus=$(TSFUSE_BUILD=${BUILD:-build} $PY -c 'import sys; sys.path.insert(0, "tests/python"); import pypi_deps as d; print(d.corpus_dir())')
krs=$($PY -c 'import sys; sys.path.insert(0, "tests/python"); import pypi_deps as d; print(d.CORPUS_PACKAGES["kornia-rs"])')
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
for pkg in geomloss kmeans_pytorch kornia monai pytorch_metric_learning; do cp -r "$corpus/$pkg" "$stage/"; done
$PY -m pip download -q --no-deps --only-binary=:all: --python-version "$PY_TAG" --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$stage/wheels" "kornia-rs==$krs"
(cd "$stage" && unzip -q wheels/*.whl 'kornia_rs/*' && rm -rf wheels && find . -name __pycache__ -prune -exec rm -rf {} +)
mkdir -p .gpu-deps
tar cJf .gpu-deps/corpus.tar.xz -C "$stage" .
ls -l .gpu-deps/corpus.tar.xz
