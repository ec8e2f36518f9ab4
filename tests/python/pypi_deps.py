"""Test-only packages from PyPI, installed once into BUILD/test-deps/ (never into the project's
.venv): torchvision, for real models (scripted ResNet-50) and an extension op library (_C.so); and
the libraries of the real-model corpus (bench/corpus/), which compute pairwise box, distance and
kernel matrices.

The install is kept between runs; a test needing it skips, saying why, only when PyPI cannot be
reached (the install fails and so does asking PyPI for the package's versions)."""
import hashlib
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import pytest
import torch

# The torchvision release built against each torch release (its wheel requires torch==X exactly).
TORCHVISION_FOR_TORCH = {"2.11": "0.26.0"}


def _build_dir():
    source = pathlib.Path(os.environ.get("TSFUSE_SOURCE", pathlib.Path(__file__).resolve().parents[2]))
    return pathlib.Path(os.environ.get("TSFUSE_BUILD", source / "build"))


def _pip(*args, timeout):
    return subprocess.run([sys.executable, "-m", "pip", *args, "--disable-pip-version-check"],
                          capture_output=True, text=True, timeout=timeout)


def _install(target, requirements, marker):
    """pip-installs `requirements` (exact pins, --no-deps: torch and numpy come from .venv) into
    `target`, unless `target/marker` exists; returns target."""
    if (target / marker).exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = pathlib.Path(tempfile.mkdtemp(prefix=".staging-", dir=target.parent))
    try:
        proc = _pip("install", "-q", "--no-deps", "--target", str(staging), *requirements, timeout=900)
        if proc.returncode != 0:
            name = requirements[0].split("==")[0]
            probe = _pip("index", "versions", name, "--retries", "1", "--timeout", "15", timeout=120)
            if probe.returncode != 0:
                pytest.skip(f"PyPI is unreachable, {' '.join(requirements)} cannot be installed: "
                            f"{(probe.stderr or probe.stdout).strip().splitlines()[-1:]}")
            pytest.fail(f"pip install {' '.join(requirements)} failed:\n{proc.stdout}\n{proc.stderr}")
        try:
            staging.rename(target)  # whole or not at all: a later run never sees half an install
        except OSError:
            assert (target / marker).exists()  # another run got there first
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def torchvision_dir():
    """A folder to put on PYTHONPATH for `import torchvision` (the version matching this torch)."""
    torch_minor = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    version = TORCHVISION_FOR_TORCH.get(torch_minor)
    assert version, f"no torchvision version known for torch {torch.__version__}: add it to TORCHVISION_FOR_TORCH"
    return _install(_build_dir() / "test-deps" / f"torchvision-{version}", [f"torchvision=={version}"],
                    pathlib.Path("torchvision") / "_C.so")


# The corpus libraries (bench/corpus/entries.py) and the pure-Python or binary packages they import,
# pinned; installed with --no-deps, so torch is never downloaded again. scipy is imported by
# pytorch-metric-learning's utilities, tqdm by kmeans-pytorch, kornia-rs by kornia, linear-operator
# (with jaxtyping and wadler-lindig) by gpytorch, lightning-utilities by torchmetrics. The second
# corpus (bench/corpus/fresh.py) from "ultralytics" on: opencv and psutil are ultralytics' imports,
# opt-einsum(-fx) e3nn's; the rest (matplotlib, pyyaml, sympy) come with .venv.
CORPUS_PACKAGES = {
    "torchmetrics": "1.9.0", "lightning-utilities": "0.15.3",
    "gpytorch": "1.15.2", "linear-operator": "0.6.1", "jaxtyping": "0.3.11", "wadler-lindig": "0.1.8",
    "pytorch-metric-learning": "2.9.0", "scipy": "1.17.1",
    "kornia": "0.9.0", "kornia-rs": "0.2.0",
    "geomloss": "0.3.1",
    "kmeans-pytorch": "0.3", "tqdm": "4.70.1",
    "monai": "1.6.1",
    "ultralytics": "8.4.190", "opencv-python-headless": "5.1.0.95", "psutil": "7.2.2",
    "torchani": "2.9.0",
    "e3nn": "0.6.0", "opt-einsum": "3.4.0", "opt-einsum-fx": "0.1.4",
    "pyro-ppl": "1.9.2",
    "botorch": "0.18.1",
    "torchdrift": "0.1.0.post1",
    "pytorch-adapt": "0.0.83",
    "pot": "0.9.7.post1",
    "online-triplet-loss": "0.0.6",
    "fast-pytorch-kmeans": "0.2.2",
    "torch-kmeans": "0.2.0",
}


def corpus_dir():
    """A folder to put on PYTHONPATH (beside torchvision_dir()) for the corpus libraries."""
    pins = [f"{name}=={version}" for name, version in CORPUS_PACKAGES.items()]
    tag = hashlib.sha256(" ".join(pins).encode()).hexdigest()[:12]
    return _install(_build_dir() / "test-deps" / f"corpus-{tag}", pins, "kmeans_pytorch")


def torchvision_env(*folders):
    """Environment for a subprocess that imports torchvision (and the others) from `folders`."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [*map(str, folders), env.get("PYTHONPATH")]))
    return env
