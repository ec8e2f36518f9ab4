#!/usr/bin/env bash
# Packs the corpus libraries a lent GPU machine lacks into .gpu-deps/corpus.tar.xz, for
# `CORPUS_PATH` of scripts/gpu_validate.sh's PREBUILT mode (that machine reaches no registry; its
# image has torch, torchvision, torchmetrics, gpytorch, botorch, e3nn, scipy, opencv, psutil, ...
# but not the packages below). Pure-Python packages (with their dist-info: torchani reads its own
# version) come from the corpus folder the tests installed (tests/python/pypi_deps.py); the binary
# ones, kornia-rs and POT, are downloaded for the machine's Python (PY_TAG, default 3.12), POT's
# extensions stripped of debug sections (its bsp module is 167 MB with them, 1 MB without).
#   scripts/gpu_corpus_deps.sh            # then carry .gpu-deps and unpack it there:
#   mkdir -p /tmp/corpus && tar xJf .gpu-deps/corpus.tar.xz -C /tmp/corpus && export CORPUS_PATH=/tmp/corpus
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
PY_TAG=${PY_TAG:-3.12}
pin() { $PY -c 'import sys; sys.path.insert(0, "tests/python"); import pypi_deps as d; print(d.CORPUS_PACKAGES[sys.argv[1]])' "$1"; }
corpus=$(TSFUSE_BUILD=${BUILD:-build} $PY -c 'import sys; sys.path.insert(0, "tests/python"); import pypi_deps as d; print(d.corpus_dir())')
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
for pkg in geomloss kmeans_pytorch kornia monai pytorch_metric_learning ultralytics torchani pyro torchdrift \
  pytorch_adapt online_triplet_loss fast_pytorch_kmeans torch_kmeans; do
  cp -r "$corpus/$pkg" "$stage/"
  for info in "$corpus/${pkg}"-*.dist-info "$corpus/${pkg/pyro/pyro_ppl}"-*.dist-info; do
    [ -d "$info" ] && cp -r "$info" "$stage/"
  done
done
$PY -m pip download -q --no-deps --only-binary=:all: --python-version "$PY_TAG" --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$stage/wheels" "kornia-rs==$(pin kornia-rs)" "pot==$(pin pot)"
(cd "$stage" && for w in wheels/*.whl; do unzip -q -o "$w"; done && rm -rf wheels \
  && find . -name '*.so' -path './ot/*' -exec strip --strip-debug {} + \
  && find . -name __pycache__ -prune -exec rm -rf {} +)
mkdir -p .gpu-deps
tar cJf .gpu-deps/corpus.tar.xz -C "$stage" .
ls -l .gpu-deps/corpus.tar.xz
