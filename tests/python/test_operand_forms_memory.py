"""First-call peak memory of the operand forms of examples/detection_models.py that need more than
views of the inputs (chunk-unpacked views, a buffer filled before the region, repeats read as
broadcasts, matmul-expanded distances, a reduction over a stored cdist output, a buffer
accumulated in place, pairs expanded and flattened), optimized by
optimize-ts.

Each measurement runs in a fresh process, as bench/measure_memory.py does: load libtsfuse and the
optimized model, build the inputs, reset the peak-RSS counter (/proc/self/clear_refs), run ONE
call, read VmHWM - VmRSS. A process's first call also pays one-time costs that do not grow with
the inputs (code pages of the kernels it touches, the executor's graph compilation, starting the
intra-op thread pool and its threads' malloc arenas, the matmul library's first-use buffers). The
same first call on inputs 10x smaller in each dim, in another fresh process, pays them too (the
small call is still large enough to run on every thread), so the bound is checked on the growth
from the small call to the big one:

    peak(big) - peak(small) <= growth of output (+ an intermediate the function stores anyway:
                               the matmul output, the cdist output) + growth of inputs + 2 MiB

Eager's peak on the same inputs is printed alongside (pytest -s). Results are compared with the
eager function: exactly, or within the reduction tolerance where a sum of squares is fused.
"""
import json
import os
import pathlib
import subprocess
import sys

import pytest

from optimize_ts_util import run_tool

import detection_models

MIB = 1024.0 * 1024.0
SLACK_MIB = 2.0
# name -> (big input sizes (N, M), outputs' worth of an intermediate stored anyway (the [N, M]
# matmul output; periodic_kernel's [3, N, M] cdist output, which its fused reduce's value takes
# over: without that, value and cdist output would be live together), exact)
RUNS = 3

CASES = {
    "chunk_box_iou": ((20000, 500), 0, True),
    "xywh_box_iou": ((20000, 500), 0, True),
    "repeat_sq_distance": ((2000, 1500), 0, False),
    "matmul_distance": ((3000, 2000), 1, False),
    "matmul_rbf_kernel": ((3000, 2000), 1, False),
    "periodic_kernel": ((2000, 2000), 3, True),
    "coordinate_l1_distance": ((3000, 2000), 0, True),
    # (at 3000 x 2000 the call at 1/10 the size runs its compiled sum on one thread: the big
    # call's growth would include the second thread's first scratch)
    "flattened_pairs_assign": ((6000, 4000), 0, True),
}

CHILD = r'''
import json, sys, torch
sys.path.insert(0, sys.argv[1])
import detection_models as dm
name, model, lib, n, m = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
torch.set_grad_enabled(False)
fn, key = dm.FUNCTIONS[name]
if key in ("xyxy", "xywh"):
    make = dm.xyxy_boxes if key == "xyxy" else dm.xywh_boxes
    inputs = (make(n, 1), make(m, 2))
else:
    d = {"points3": 3, "points8": 8}[key]
    inputs = (dm.points(n, d, 1), dm.points(m, d, 2))
if model != "eager":
    torch.ops.load_library(lib)
    fn = torch.jit.load(model)
def status(field):
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith(field + ":"))
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
before = status("VmRSS")
out = fn(*inputs)
peak = (status("VmHWM") - before) * 1024
want = dm.FUNCTIONS[name][0](*inputs)
threads = status("Threads")
print(json.dumps({"peak": peak, "threads": threads, "out": out.numel() * out.element_size(),
                  "inputs": sum(t.numel() * t.element_size() for t in inputs),
                  "equal": bool(torch.equal(out, want)),
                  "close": bool(torch.allclose(out, want, rtol=1e-5, atol=1e-5))}))
'''


def _measure(name, model, lib, n, m):
    examples = pathlib.Path(detection_models.__file__).parent
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "2"))
    p = subprocess.run([sys.executable, "-c", CHILD, str(examples), name, str(model), str(lib), str(n), str(m)],
                       capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def optimized(tmp_path_factory, optimize_ts):
    d = tmp_path_factory.mktemp("forms")
    paths = detection_models.save_all(d, list(CASES))
    out = {}
    for name in CASES:
        out[name] = d / f"{name}.opt.pt"
        proc = run_tool(optimize_ts, paths[name], out[name])
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


@pytest.mark.parametrize("name", list(CASES))
def test_first_call_peak_is_the_output(optimized, tsfuse_lib, name):
    (n, m), stored, exact = CASES[name]
    # A fresh process's RSS varies by ~1 MiB from run to run (which threads' malloc arenas a call
    # first touches), always upwards: each side is the least of RUNS fresh processes.
    big = min((_measure(name, optimized[name], tsfuse_lib, n, m) for _ in range(RUNS)), key=lambda r: r["peak"])
    small = min((_measure(name, optimized[name], tsfuse_lib, n // 10, m // 10) for _ in range(RUNS)),
                key=lambda r: r["peak"])
    eager = _measure(name, "eager", tsfuse_lib, n, m)
    assert big["equal"] if exact else big["close"], big
    assert small["threads"] == big["threads"], (small, big)  # the small call started the same threads
    budget = (big["out"] - small["out"]) * (1 + stored) + big["inputs"] - small["inputs"] + SLACK_MIB * MIB
    grown = big["peak"] - small["peak"]
    print(f"{name}: first call {big['peak'] / MIB:.1f} MiB (at 1/10 the size {small['peak'] / MIB:.1f}), "
          f"grew {grown / MIB:.1f} of {budget / MIB:.1f} MiB, output {big['out'] / MIB:.1f} MiB, eager {eager['peak'] / MIB:.1f} MiB")
    assert grown <= budget, (f"{name}: first call grew {grown / MIB:.1f} MiB from the call at 1/10 the size; "
                             f"budget {budget / MIB:.1f} MiB (eager {eager['peak'] / MIB:.1f} MiB)")
