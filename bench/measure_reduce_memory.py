"""Peak CPU memory of the FIRST call of the reduction workloads (examples/reduce_models.py):
eager vs the optimize-ts output, each in a fresh process, measured like bench/measure_memory.py
(/proc/self/clear_refs reset, then VmHWM minus VmRSS before the call; the outputs are part of
the peak).

    .venv/bin/python bench/measure_reduce_memory.py [--build build] [--workload NAME|all]
"""
import argparse
import json
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))

from measure_memory import MIB, proc_status_kib  # noqa: E402

# name: input factory (sizes chosen so eager's [N, M] intermediates dominate)
WORKLOADS = {
    "nearest_neighbour": lambda rm, torch: (torch.randn(20000, 3, generator=torch.Generator().manual_seed(0)),
                                            torch.randn(5000, 3, generator=torch.Generator().manual_seed(1))),
    "anchor_match": lambda rm, torch: (rm.random_boxes(200000, 0), rm.random_boxes(50, 1)),
    "gaussian_lse": lambda rm, torch: (torch.randn(10000, 2, generator=torch.Generator().manual_seed(0)),
                                       torch.randn(5000, 2, generator=torch.Generator().manual_seed(1))),
    "kernel_epilogue": lambda rm, torch: (torch.randn(2000, 64, generator=torch.Generator().manual_seed(0)),
                                          torch.randn(1000, 64, generator=torch.Generator().manual_seed(1)),
                                          torch.rand(1000, generator=torch.Generator().manual_seed(2))),
    "gaussian_mmd": lambda rm, torch: (torch.randn(4000, 3, generator=torch.Generator().manual_seed(0)),
                                       torch.randn(3000, 3, generator=torch.Generator().manual_seed(1))),
    "soft_quantize": lambda rm, torch: (torch.randn(20000, 16, generator=torch.Generator().manual_seed(0)),
                                        torch.linspace(-3, 3, 32)),
    "kernel_regression": lambda rm, torch: (torch.randn(4000, 3, generator=torch.Generator().manual_seed(0)),
                                            torch.randn(3000, 3, generator=torch.Generator().manual_seed(1)),
                                            torch.randn(3000, 2, generator=torch.Generator().manual_seed(2))),
}


def child(args):
    import torch
    import reduce_models as rm

    torch.set_grad_enabled(False)
    if args.impl == "optimized":
        torch.ops.load_library(args.lib)
        fn = torch.jit.load(args.model)
    else:
        fn = rm.MODELS[args.workload][1]
    inputs = WORKLOADS[args.workload](rm, torch)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = proc_status_kib("VmRSS")
    t0 = time.perf_counter()
    out = fn(*inputs)
    ms = (time.perf_counter() - t0) * 1000
    peak = proc_status_kib("VmHWM") - before
    out = out if isinstance(out, tuple) else (out,)
    want = rm.MODELS[args.workload][1](*inputs)
    want = want if isinstance(want, tuple) else (want,)
    ok = all((torch.equal(a, b) if b.dtype == torch.int64 else torch.allclose(a, b, rtol=1e-5, atol=1e-5))
             for a, b in zip(out, want))
    out_mib = sum(t.numel() * t.element_size() for t in out) / MIB
    print(json.dumps({"peak_mib": peak / 1024.0, "out_mib": out_mib, "ms": ms, "ok": ok}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=str(ROOT / "build"))
    ap.add_argument("--workload", default="all")
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--impl")
    ap.add_argument("--model")
    ap.add_argument("--lib")
    args = ap.parse_args()
    if args.child:
        return child(args)
    import torch
    import reduce_models as rm

    build = pathlib.Path(args.build)
    names = list(WORKLOADS) if args.workload == "all" else [args.workload]
    print("| workload | implementation | peak MiB | output MiB | vs eager | time ms | equal |")
    print("| --- | --- | ---: | ---: | ---: | ---: | --- |")
    with tempfile.TemporaryDirectory() as d:
        for name in names:
            src, dst = pathlib.Path(d) / f"{name}.pt", pathlib.Path(d) / f"{name}.opt.pt"
            torch.jit.script(rm.MODELS[name][0]()).save(str(src))
            subprocess.run([str(build / "bin" / "optimize-ts"), str(src), str(dst)], check=True, capture_output=True)
            eager = None
            for impl in ("eager", "optimized"):
                cmd = [sys.executable, __file__, "--child", "--impl", impl, "--workload", name,
                       "--model", str(dst), "--lib", str(build / "lib" / "libtsfuse.so")]
                r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1])
                eager = eager or r["peak_mib"]
                print(f"| {name if impl == 'eager' else ''} | {impl} | {r['peak_mib']:.1f} | {r['out_mib']:.2f} | "
                      f"{r['peak_mib'] / eager:.3f}x | {r['ms']:.0f} | {r['ok']} |", flush=True)


if __name__ == "__main__":
    main()
