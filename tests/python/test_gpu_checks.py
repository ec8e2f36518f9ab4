"""The GPU checks (tests/gpu/cuda_models_check.py, cuda_corpus_check.py, run by
scripts/gpu_validate.sh on a lent GPU) in their CPU dry runs (`--device cpu`): a machine with a GPU
is lent rarely and for minutes, so the scripts must not break between loans (a model they could not
script, an entry they could not train). Each must exit 0 and report 0 mismatches."""
import os
import subprocess
import sys

import pytest

import pypi_deps
from conftest import LIB, SOURCE

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _check(script, *args, env=None):
    proc = subprocess.run([sys.executable, str(SOURCE / "tests" / "gpu" / script), "--device", "cpu", *args],
                          capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert proc.stdout.strip().splitlines()[-1] == "0 mismatches", proc.stdout[-4000:]
    return proc.stdout


def test_every_example_model_runs_in_the_models_check():
    out = _check("cuda_models_check.py", "--sizes", "small", env=dict(os.environ, TSFUSE_LIB=str(LIB)))
    assert "reduce.soft_assignment" in out and "MISMATCH" not in out


@pytest.mark.parametrize("grad", [False, True], ids=["forward", "trained"])
def test_every_corpus_entry_runs_in_the_corpus_check(torchvision_path, grad):
    env = pypi_deps.torchvision_env(torchvision_path, pypi_deps.corpus_dir()) | {"TSFUSE_LIB": str(LIB)}
    out = _check("cuda_corpus_check.py", "--size", "test", *(["--grad"] if grad else []), env=env)
    assert "MISMATCH" not in out
    assert ("within 1e-4" if grad else "| exact |") in out
