"""Test-only packages from PyPI, installed once into BUILD/test-deps/ (never into the project's
.venv): torchvision, for real models (scripted ResNet-50) and an extension op library (_C.so).

The install is kept between runs; a test needing it skips, saying why, only when PyPI cannot be
reached (the install fails and so does asking PyPI for the package's versions)."""
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


def torchvision_dir():
    """A folder to put on PYTHONPATH for `import torchvision` (the version matching this torch)."""
    torch_minor = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    version = TORCHVISION_FOR_TORCH.get(torch_minor)
    assert version, f"no torchvision version known for torch {torch.__version__}: add it to TORCHVISION_FOR_TORCH"
    target = _build_dir() / "test-deps" / f"torchvision-{version}"
    if (target / "torchvision" / "_C.so").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = pathlib.Path(tempfile.mkdtemp(prefix=".staging-", dir=target.parent))
    try:
        proc = _pip("install", "-q", "--no-deps", "--target", str(staging), f"torchvision=={version}", timeout=600)
        if proc.returncode != 0:
            probe = _pip("index", "versions", "torchvision", "--retries", "1", "--timeout", "15", timeout=120)
            if probe.returncode != 0:
                pytest.skip(f"PyPI is unreachable, torchvision=={version} cannot be installed: "
                            f"{(probe.stderr or probe.stdout).strip().splitlines()[-1:]}")
            pytest.fail(f"pip install torchvision=={version} failed:\n{proc.stdout}\n{proc.stderr}")
        try:
            staging.rename(target)  # whole or not at all: a later run never sees half an install
        except OSError:
            assert (target / "torchvision" / "_C.so").exists()  # another run got there first
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def torchvision_env(folder):
    """Environment for a subprocess that imports torchvision from `folder`."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(folder), env.get("PYTHONPATH")]))
    return env
