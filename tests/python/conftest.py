"""Shared fixtures for the Python tests: the built library, optimize-ts, and a scratch dir."""
import os
import pathlib
import subprocess
import sys

import pytest
import torch

import pypi_deps

SOURCE = pathlib.Path(os.environ.get("TSFUSE_SOURCE", pathlib.Path(__file__).resolve().parents[2]))
BUILD = pathlib.Path(os.environ.get("TSFUSE_BUILD", SOURCE / "build"))
LIB = pathlib.Path(os.environ.get("TSFUSE_LIB", BUILD / "lib" / "libtsfuse.so"))
OPTIMIZE_TS = BUILD / "bin" / "optimize-ts"

_loaded = False


def load_tsfuse():
    """Loads libtsfuse.so once per process (a second TORCH_LIBRARY(tsfuse) would fail)."""
    global _loaded
    if not _loaded:
        torch.ops.load_library(str(LIB))
        _loaded = True


@pytest.fixture(scope="session")
def tsfuse_lib():
    load_tsfuse()
    return LIB


@pytest.fixture(scope="session")
def optimize_ts():
    assert OPTIMIZE_TS.exists(), f"{OPTIMIZE_TS} not built"
    return OPTIMIZE_TS


@pytest.fixture(scope="session")
def source_package(tmp_path_factory):
    """A folder to put on PYTHONPATH holding the source tree's tsfuse package over the build's
    libraries (scripts/source_package.py), for tests that import tsfuse in processes of their own."""
    sys.path.insert(0, str(SOURCE / "scripts"))
    import source_package as sp

    return sp.make(LIB.parent, tmp_path_factory.mktemp("pkg"))


@pytest.fixture(scope="session")
def torchvision_path():
    """A folder holding torchvision (installed once from PyPI into BUILD/test-deps/, not .venv)."""
    return pypi_deps.torchvision_dir()


@pytest.fixture(scope="session")
def seed_model_dir(tmp_path_factory):
    """The seed models (examples/seed_models.py: intersection.pt, similarity.pt, ...), saved once."""
    out = tmp_path_factory.mktemp("seed_models")
    subprocess.run([sys.executable, str(SOURCE / "examples" / "seed_models.py"), str(out)], check=True,
                   stdout=subprocess.DEVNULL)
    return out
