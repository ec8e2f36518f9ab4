"""Per-core steady-state time of the seed workloads: tsfuse (optimize-ts output) vs torch.compile.

    .venv/bin/python bench/per_core.py [--build build] [--reps 7] [--json FILE]

One thread (torch.set_num_threads(1)), process CPU time of a call, median of --reps after a warm-up
call: on a shared 2-core machine CPU time is steadier than wall time. Every cell runs in a fresh
process (tsfuse and torch.compile never share one). torch.compile uses its default mode; its first
call (compiling) is reported separately. Prints a markdown table with the ratio tsfuse / compile
(the acceptance bar: <= 0.75x). The results are checked against eager (torch.equal).
"""
import argparse
import json
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
CELLS = [("intersection", n, 500) for n in (4096, 30000, 121496)] + [("similarity", 128, d) for d in (250, 500, 1000)]


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def child(impl, workload, a, b, build, reps):
    import torch
    sys.path.insert(0, str(ROOT / "examples"))
    import seed_models as sm

    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    fn = getattr(sm, workload)
    if workload == "intersection":
        args = (sm.random_boxes(a, g), sm.random_boxes(b, g))
    else:
        args = (torch.randn(a, b, generator=g) * 2, torch.randn(a, b, generator=g) * 2)
    if impl == "tsfuse":
        torch.ops.load_library(str(build / "lib" / "libtsfuse.so"))
        with tempfile.TemporaryDirectory() as d:
            torch.jit.script(fn).save(f"{d}/m.pt")
            subprocess.run([str(build / "bin" / "optimize-ts"), f"{d}/m.pt", f"{d}/o.pt", "-q"], check=True)
            f = torch.jit.load(f"{d}/o.pt")
        assert "tsfuse::" in str(f.graph), "optimize-ts fused nothing"
    else:
        f = torch.compile(fn)
    t0 = time.perf_counter()
    out = f(*args)
    first = time.perf_counter() - t0
    assert torch.equal(out, fn(*args)), "result differs from eager"
    times = []
    for _ in range(reps):
        t = cpu_seconds()
        f(*args)
        times.append(cpu_seconds() - t)
    print(json.dumps({"ms": statistics.median(times) * 1e3, "first_s": first}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=str(ROOT / "build"))
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--json", help="also write the cells to this file")
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    a = ap.parse_args()
    build = pathlib.Path(a.build).resolve()
    if a.child:
        impl, workload, x, y = a.child
        return child(impl, workload, int(x), int(y), build, a.reps)
    rows = []
    print("| workload | size | tsfuse | torch.compile | ratio | compile's first call |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for workload, x, y in CELLS:
        cell = {"workload": workload, "size": f"{x}x{y}"}
        for impl in ("tsfuse", "compile"):
            p = subprocess.run([sys.executable, __file__, "--build", str(build), "--reps", str(a.reps), "--child",
                                impl, workload, str(x), str(y)], capture_output=True, text=True,
                               env=dict(os.environ, TSFUSE_LOG_LEVEL="off"))
            if p.returncode != 0:
                sys.exit(f"{impl} {workload} {x}x{y} failed:\n{p.stderr[-2000:]}")
            cell[impl] = json.loads(p.stdout.strip().splitlines()[-1])
        ratio = cell["tsfuse"]["ms"] / cell["compile"]["ms"]
        cell["ratio"] = ratio
        rows.append(cell)
        print(f"| {workload} | {cell['size']} | {cell['tsfuse']['ms']:.1f} ms | {cell['compile']['ms']:.1f} ms | "
              f"{ratio:.2f}x | {cell['compile']['first_s']:.1f} s |", flush=True)
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
