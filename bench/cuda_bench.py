"""GPU benchmark of the seed workloads: eager CUDA, TorchScript (first call and steady state),
torch.compile (mode "max-autotune" unless --compile-mode; compile time separately) and tsfuse (its
CUDA kernels, the default), next to fill_ of an output-sized tensor and each workload's bandwidth
or compute bound. Needs a CUDA device.

    TSFUSE_LIB=build/lib/libtsfuse.so .venv/bin/python bench/cuda_bench.py [--out results.md]

Time: "steady" = CUDA events around one call after warm-up (median of --reps: the GPU idles while
the host issues the call, so the host's latency counts); "back-to-back" = GPU time per call over
50 calls issued without waiting (the kernels' own time; "x bound" uses it). Peak memory: the
caching allocator's max_memory_allocated() growth during one call (reset before it), so "output +
at most 1 MiB" can be read directly. Bounds: IoU writes N*M float32 (+ reads 32 bytes per box
pair row/col, negligible): t_bw = 4*N*M / peak_bandwidth; similarity is compute bound: S*D*D
evaluations of sub/abs/lt/add (4 ops) at the FP32 peak, and its [D, D] int64 output write.
"""
import argparse
import datetime
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import seed_models  # noqa: E402

# Published peak numbers (SXM parts); the script prints the device name so a reader can check.
PEAKS = {"H100": (3.35e12, 67e12), "H200": (4.8e12, 67e12), "A100": (2.0e12, 19.5e12)}


def peaks():
    name = torch.cuda.get_device_name()
    for key, val in PEAKS.items():
        if key in name:
            return name, val
    return name, (None, None)


def timed(fn, reps):
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def back_to_back(fn, calls=50):
    """GPU ms per call over `calls` calls issued without waiting: the kernels' own time when the
    host issues faster than the GPU runs (a pipeline's steady state), where `timed` also counts
    the host's issue latency of one call."""
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / calls


def peak_mib(fn):
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    out = fn()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    del out
    return peak / 2**20


def first_call_ms(fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3


def bench(name, fn, inputs, reps, rows):
    call = lambda: fn(*inputs)  # noqa: E731
    first = first_call_ms(call)
    for _ in range(3):
        call()
    ms = timed(call, reps)
    rows.append((name, first, ms, back_to_back(call), peak_mib(call)))


def run_workload(label, eager_fn, inputs, bound_ms, out_mib, reps, lib, compile_mode):
    rows = []
    with torch.no_grad():
        ref = eager_fn(*inputs)
        # What writing an output of this size costs here (allocation included, as for every
        # row): the practical bound beside the datasheet's.
        bench("fill_ of an output-sized tensor", lambda r: torch.empty_like(r).fill_(1), (ref,), reps, rows)
        bench("eager CUDA", eager_fn, inputs, reps, rows)
        scripted = torch.jit.script(eager_fn)
        bench("TorchScript default executor", scripted, inputs, reps, rows)
        t0 = time.perf_counter()
        compiled = torch.compile(eager_fn, mode=compile_mode)
        compiled(*inputs)
        torch.cuda.synchronize()
        compile_s = time.perf_counter() - t0
        bench("torch.compile %s (compile %.1f s)" % (compile_mode, compile_s), compiled, inputs, reps, rows)
        torch.ops.load_library(lib)
        fused = torch.jit.script(eager_fn)  # the executor pass rewrites it on the first call
        got = fused(*inputs)
        assert torch.equal(got, ref) or torch.allclose(got.double(), ref.double()), "tsfuse differs from eager"
        bench("tsfuse (CUDA kernels)", fused, inputs, reps, rows)
    lines = ["", "### %s (output %.1f MiB, bound %.3f ms)" % (label, out_mib, bound_ms), "",
             "| implementation | first call ms | steady ms | back-to-back ms | x bound | peak MiB |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for name, first, ms, b2b, mib in rows:
        lines.append("| %s | %.2f | %.3f | %.3f | %.2f | %.1f |" % (name, first, ms, b2b, b2b / bound_ms if bound_ms else float("nan"), mib))
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--compile-mode", default="max-autotune", help="torch.compile's mode")
    args = ap.parse_args()
    lib = os.environ.get("TSFUSE_LIB", "build/lib/libtsfuse.so")
    name, (bw, flops) = peaks()
    lines = ["## CUDA, %s, %s" % (name, datetime.date.today().isoformat())]
    g = torch.Generator().manual_seed(0)
    N, M = 242991, 500
    b1 = seed_models.random_boxes(N, g).cuda()
    b2 = seed_models.random_boxes(M, g).cuda()
    out_mib = N * M * 4 / 2**20
    lines += run_workload("IoU intersection %d x %d" % (N, M), seed_models.intersection, (b1, b2),
                          (N * M * 4 / bw * 1e3) if bw else 0.0, out_mib, args.reps, lib, args.compile_mode)
    S, D = 256, 2000
    x = torch.randn(S, D, generator=g).cuda()
    y = torch.randn(S, D, generator=g).cuda()
    bound = max(S * D * D * 4 / flops, D * D * 8 / bw) * 1e3 if bw else 0.0
    lines += run_workload("similarity [%d, %d]" % (S, D), seed_models.similarity, (x, y), bound,
                          D * D * 8 / 2**20, args.reps, lib, args.compile_mode)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
