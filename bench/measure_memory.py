"""Peak CPU memory of the FIRST call of the seed workloads: eager vs scripted vs optimize-ts.

    .venv/bin/python bench/measure_memory.py [--build build] [--workload iou|similarity|all]
                                             [--json FILE] [--enforce]

Implementations: eager (the Python function), scripted (the original .pt, no libtsfuse in the
process), scripted+hook (the original .pt with libtsfuse loaded: its executor pre-pass fuses at
the first call), optimized (the optimize-ts output, libtsfuse loaded).

Each (workload, implementation) runs in a fresh subprocess, which
  1. imports torch (and loads libtsfuse.so where needed), loads the model (torch.jit.load, or the
     eager function) and creates the inputs (fixed seed);
  2. resets the kernel's peak-RSS counter (writes "5" to /proc/self/clear_refs) and reads VmRSS
     from /proc/self/status;
  3. runs ONE call (the first: TorchScript's profiling executor runs it unoptimized);
  4. reads VmHWM: peak = VmHWM - VmRSS before the call. The output itself is part of the peak.
It then checks the result against eager's on the same inputs (torch.equal: the IoU result is
elementwise and the similarity result an integer count, so both must be bit-identical).

Sizes (acceptance): IoU boxes1 [121496, 4], boxes2 [500, 4]; similarity x, y [128, 1000].
Targets: optimized peak <= 0.3x eager (IoU) and <= 0.05x eager (similarity); --enforce exits 1
when one is missed or an output differs.

The models are generated (examples/seed_models.py) and optimized (BUILD/bin/optimize-ts) into a
temporary folder, or --workdir.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))

WORKLOADS = {
    # name: (seed model, input shapes, target ratio optimized/eager)
    "iou": ("intersection", {"boxes1": [121496, 4], "boxes2": [500, 4]}, 0.3),
    "similarity": ("similarity", {"x": [128, 1000], "y": [128, 1000]}, 0.05),
}
# eager: the Python function; scripted: the original .pt as written (no libtsfuse in the process);
# scripted+hook: the original .pt with libtsfuse loaded (its executor pre-pass fuses at the first
# call); optimized: the optimize-ts output.
IMPLS = ("eager", "scripted", "scripted+hook", "optimized")
MIB = 1024.0 * 1024.0


def proc_status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def rss_peak_begin():
    """Resets the kernel's peak-RSS counter (VmHWM) to the current RSS; returns VmRSS in KiB."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return proc_status_kib("VmRSS")


def rss_peak_bytes(before_kib):
    """Peak RSS growth since rss_peak_begin() returned before_kib, in bytes."""
    return (proc_status_kib("VmHWM") - before_kib) * 1024


def optimize_ts(build, src, dst):
    """Runs BUILD/bin/optimize-ts on src, writing dst."""
    subprocess.run([str(pathlib.Path(build) / "bin" / "optimize-ts"), "-q", str(src), str(dst)], check=True)


def make_inputs(workload):
    import torch
    import seed_models

    g = torch.Generator().manual_seed(0)
    shapes = WORKLOADS[workload][1]
    if workload == "iou":
        return (seed_models.random_boxes(shapes["boxes1"][0], g), seed_models.random_boxes(shapes["boxes2"][0], g))
    return (torch.randn(shapes["x"], generator=g), torch.randn(shapes["y"], generator=g))


def child(args):
    """One measurement in this (fresh) process; prints one JSON line."""
    import torch
    import seed_models

    torch.set_grad_enabled(False)
    eager_fn = seed_models.MODELS[WORKLOADS[args.workload][0]][1]
    if args.impl in ("optimized", "scripted+hook"):
        torch.ops.load_library(args.lib)
    fn = eager_fn if args.impl == "eager" else torch.jit.load(args.model)
    inputs = make_inputs(args.workload)

    before = rss_peak_begin()
    t0 = time.perf_counter()
    out = fn(*inputs)
    elapsed = time.perf_counter() - t0
    peak = rss_peak_bytes(before)

    reference = eager_fn(*inputs)
    result = {
        "impl": args.impl,
        "peak_mib": peak / MIB,
        "output_mib": out.numel() * out.element_size() / MIB,
        "time_ms": elapsed * 1e3,
        "matches_eager": bool(out.dtype == reference.dtype and torch.equal(out, reference)),
        "output": f"{str(out.dtype).replace('torch.', '')}{list(out.shape)}",
    }
    print(json.dumps(result))
    return 0


def run_child(workload, impl, model, lib):
    cmd = [sys.executable, __file__, "--child", impl, "--workload", workload, "--model", str(model), "--lib", str(lib)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{workload}/{impl} failed ({p.returncode}):\n{p.stderr}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def prepare_models(build, workdir):
    import seed_models

    paths = seed_models.save_all(workdir)
    optimized = {}
    for workload, (name, _, _) in WORKLOADS.items():
        out = pathlib.Path(workdir) / f"{name}.opt.pt"
        optimize_ts(build, paths[name], out)
        optimized[workload] = (paths[name], out)
    return optimized


def print_table(results):
    print(f"{'workload':<11} {'impl':<14} {'peak MiB':>9} {'output MiB':>11} {'vs eager':>9} {'time ms':>9}  equal")
    for workload, w in results.items():
        eager = next(r for r in w["results"] if r["impl"] == "eager")["peak_mib"]
        for r in w["results"]:
            print(f"{workload:<11} {r['impl']:<14} {r['peak_mib']:9.1f} {r['output_mib']:11.1f} "
                  f"{r['ratio_vs_eager']:8.3f}x {r['time_ms']:9.1f}  {'yes' if r['matches_eager'] else 'NO'}")
        verdict = "met" if w["target_met"] else "NOT MET"
        print(f"{'':<11} target: optimized <= {w['target_ratio']}x eager: {verdict}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.environ.get("TSFUSE_BUILD", str(ROOT / "build")),
                    help="build folder with bin/optimize-ts and lib/libtsfuse.so (default: build)")
    ap.add_argument("--workload", choices=list(WORKLOADS) + ["all"], default="all")
    ap.add_argument("--workdir", help="where to write the models (default: a temporary folder)")
    ap.add_argument("--json", help="also write the results to this JSON file")
    ap.add_argument("--enforce", action="store_true", help="exit 1 unless every target is met and outputs equal")
    ap.add_argument("--child", choices=IMPLS, help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--lib", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        args.impl = args.child
        return child(args)

    build = pathlib.Path(args.build).resolve()
    lib = pathlib.Path(os.environ.get("TSFUSE_LIB", build / "lib" / "libtsfuse.so"))
    workloads = list(WORKLOADS) if args.workload == "all" else [args.workload]
    with tempfile.TemporaryDirectory(prefix="tsfuse-bench-") as tmp:
        workdir = pathlib.Path(args.workdir or tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        models = prepare_models(build, workdir)
        results = {}
        for workload in workloads:
            original, optimized = models[workload]
            rows = []
            for impl in IMPLS:
                model = optimized if impl == "optimized" else original
                rows.append(run_child(workload, impl, model, lib))
            eager = rows[0]["peak_mib"]
            for r in rows:
                r["ratio_vs_eager"] = r["peak_mib"] / eager if eager > 0 else float("nan")
            target = WORKLOADS[workload][2]
            opt = next(r for r in rows if r["impl"] == "optimized")
            results[workload] = {
                "shapes": WORKLOADS[workload][1],
                "target_ratio": target,
                "target_met": bool(opt["ratio_vs_eager"] <= target and opt["matches_eager"]),
                "results": rows,
            }
    print_table(results)
    if args.json:
        import torch

        doc = {"torch_version": torch.__version__, "cpu_threads": torch.get_num_threads(),
               "workloads": results}
        pathlib.Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
    ok = all(w["target_met"] and all(r["matches_eager"] for r in w["results"]) for w in results.values())
    return 0 if ok or not args.enforce else 1


if __name__ == "__main__":
    sys.exit(main())
