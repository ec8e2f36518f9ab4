"""The FIRST call's memory of every workload's optimize-ts output, against the bound
output + inputs + 2 MiB (issue 14), each cell in a fresh process.

    .venv/bin/python bench/first_call_memory.py [--build build] [--workloads a,b | --grad] [--sizes 1024x500,...]
                                                [--json FILE] [--markdown] [--enforce]

Two measures of one first call, side by side:
  allocated  the most bytes held at once by blocks the call took from c10's CPU allocator (its
             tensors, the output among them, and tsfuse's scratch, which comes from the same
             allocator): bench/memprobe.cpp. The bound is checked on this.
  resident   the growth of the peak resident set (VmHWM after a clear_refs reset, minus VmRSS
             before), as bench/suite.py measures. It also holds what is not the call's data: code
             pages of libtorch and libtsfuse touched for the first time (file-backed, shared with
             the page cache: reported apart, as the growth of RssFile), TorchScript's own
             first-call structures, the intra-op threads' stacks and arenas, compiled kernels. The
             unfused TorchScript run of the same model (no libtsfuse in the process) is measured the
             same way, for scale.
Environment as in bench/suite.py (glibc maps every block >= 64 KiB afresh). --enforce exits 1 when
an optimized first call allocates more than its bound or differs from eager beyond the suite's
"close". The fused ops it ran are counted (bench/suite.py's count_ops), not enforced.

A forward + backward workload (bench/workloads.py, `grad`; none is in the default list) is measured
the same way over its forward + backward call (bench/suite.py's forward_backward): its output is the
loss and the gradients, so the bound is what tsfuse should store: inputs, loss, gradients, scratch.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

# The nested-reduction family of issue 14, at 1024 x 500 and at a size where eager needs > 1 GB.
DEFAULT_WORKLOADS = ("l1_distance", "l2_distance", "l2_distance_d3", "l2_distance_d64", "gaussian_kernel_sum",
                     "gaussian_kernel_product", "gaussian_mmd", "nearest_neighbour", "chamfer", "iou", "giou",
                     "diou", "ciou", "anchor_matching", "soft_assignment")
POINT_SIZES, BOX_SIZES = ("1024x500", "4096x4096"), ("1024x500", "4096x500")
SLACK = 2 * 1024 * 1024
MIB = 1024.0 * 1024.0


def child(a):
    import torch
    from measure_memory import proc_status_kib, rss_peak_begin, rss_peak_bytes
    from suite import caller, compare, count_ops, tensors
    from workloads import BY_NAME, WORKLOADS, size_str

    w = BY_NAME[a.workload]
    torch.set_grad_enabled(bool(w.grad))
    if a.impl == "tsfuse":
        torch.ops.load_library(a.lib)
    torch.ops.load_library(a.memprobe)
    fn = torch.jit.load(a.model)
    inputs = w.make_inputs(tuple(int(s) for s in a.size.split("x")), torch.device("cpu"))
    call = caller(w, inputs)
    torch.ops.tsfuse_memprobe.begin()
    before = rss_peak_begin()
    file_before = proc_status_kib("RssFile")
    out = call(fn)
    resident = rss_peak_bytes(before)
    file_pages = (proc_status_kib("RssFile") - file_before) * 1024
    allocated = torch.ops.tsfuse_memprobe.peak()
    if w.grad:
        fn(*inputs)  # a forward alone: the executed graph is the forward's
    fused, _ = count_ops(torch.jit.last_executed_optimized_graph())
    ref = call(w.module().eval())
    print(json.dumps({
        "workload": w.name, "size": a.size, "impl": a.impl, "allocated_bytes": allocated, "resident_bytes": resident,
        "file_bytes": file_pages,
        "output_bytes": sum(t.numel() * t.element_size() for t in tensors(out)),
        "input_bytes": sum(t.numel() * t.element_size() for t in inputs),
        "tsfuse_ops": fused, "matches": compare(out, ref)}))
    return 0


def run_child(args, workload, size, impl, model):
    cmd = [sys.executable, __file__, "--child", impl, "--workload", workload, "--size", size, "--model", str(model),
           "--lib", str(args.lib), "--memprobe", str(args.memprobe)]
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_=str(64 * 1024), PYTHONDONTWRITEBYTECODE="1")
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"{workload} {size} {impl} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def verdict(row):
    """Why an optimized first call misses issue 14's bound, or None."""
    bound = row["output_bytes"] + row["input_bytes"] + SLACK
    if row["allocated_bytes"] > bound:
        return f"allocates {row['allocated_bytes'] / MIB:.2f} MiB > bound {bound / MIB:.2f} MiB"
    if row["matches"] not in ("exact", "close"):
        return f"result {row['matches']}"
    return None


def markdown(rows):
    L = ["| workload | size | output MiB | bound MiB | tsfuse allocated MiB | tsfuse resident MiB (code pages) "
         "| TorchScript allocated MiB | TorchScript resident MiB (code pages) | tsfuse ops |",
         "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for (workload, size), r in rows.items():
        t, s = r["tsfuse"], r["torchscript"]
        bound = t["output_bytes"] + t["input_bytes"] + SLACK
        L.append(f"| {workload} | {size} | {t['output_bytes'] / MIB:.2f} | {bound / MIB:.2f} "
                 f"| {t['allocated_bytes'] / MIB:.2f} | {t['resident_bytes'] / MIB:.1f} ({t['file_bytes'] / MIB:.1f}) "
                 f"| {s['allocated_bytes'] / MIB:.1f} | {s['resident_bytes'] / MIB:.1f} ({s['file_bytes'] / MIB:.1f}) "
                 f"| {t['tsfuse_ops']} |")
    return "\n".join(L)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.environ.get("TSFUSE_BUILD", str(ROOT / "build")))
    ap.add_argument("--workloads", default=",".join(DEFAULT_WORKLOADS))
    ap.add_argument("--grad", action="store_true", help="the forward + backward workloads instead, at their sizes")
    ap.add_argument("--sizes", help="comma-separated NxM sizes for every workload (default: per kind)")
    ap.add_argument("--json", help="also write the rows to this JSON file")
    ap.add_argument("--markdown", action="store_true", help="print a markdown table")
    ap.add_argument("--enforce", action="store_true", help="exit 1 when a bound is missed")
    for hidden in ("--child", "--workload", "--size", "--model", "--lib", "--memprobe"):
        ap.add_argument(hidden, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        args.impl = args.child
        return child(args)

    from suite import prepare_models
    from workloads import BY_NAME, WORKLOADS, size_str

    build = pathlib.Path(args.build).resolve()
    args.lib = pathlib.Path(os.environ.get("TSFUSE_LIB", build / "lib" / "libtsfuse.so"))
    args.memprobe = build / "lib" / "libtsfuse_memprobe.so"
    workloads = [w for w in WORKLOADS if w.grad] if args.grad else [BY_NAME[n] for n in args.workloads.split(",")]
    rows, failures, errors = {}, [], []
    with tempfile.TemporaryDirectory(prefix="tsfuse-first-call-") as tmp:
        models = prepare_models(build, pathlib.Path(tmp), workloads)
        for w in workloads:
            sizes = (args.sizes.split(",") if args.sizes else [size_str(s) for s in w.sizes] if w.grad
                     else BOX_SIZES if w.size_label.endswith("boxes") else POINT_SIZES)
            for size in sizes:
                try:
                    r = {impl: run_child(args, w.name, size, impl, models[w.name][i])
                         for i, impl in ((0, "torchscript"), (1, "tsfuse"))}
                except RuntimeError as e:  # the call raised: said, and the run goes on (exit 1 at the end)
                    errors.append(str(e).strip().splitlines()[0] + " " + str(e).strip().splitlines()[-1])
                    print(f"{w.name:<24} {size:<10} ERROR {errors[-1]}", flush=True)
                    continue
                rows[(w.name, size)] = r
                why = verdict(r["tsfuse"])
                t = r["tsfuse"]
                print(f"{w.name:<24} {size:<10} allocated {t['allocated_bytes'] / MIB:7.2f} MiB "
                      f"(output {t['output_bytes'] / MIB:.2f}, inputs {t['input_bytes'] / MIB:.2f}) "
                      f"resident {t['resident_bytes'] / MIB:6.1f} MiB, code pages {t['file_bytes'] / MIB:4.1f} "
                      f"| TorchScript resident {r['torchscript']['resident_bytes'] / MIB:6.1f} MiB  "
                      f"{t['tsfuse_ops']} op(s)  {why or 'ok'}", flush=True)
                if why:
                    failures.append(f"{w.name} {size}: {why}")
    if args.markdown:
        print(markdown(rows))
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps([dict(v, key=list(k)) for k, v in rows.items()], indent=1) + "\n")
    for f in failures:
        print("MISSED:", f, file=sys.stderr)
    for e in errors:
        print("ERROR:", e, file=sys.stderr)
    return 1 if errors or (failures and args.enforce) else 0


if __name__ == "__main__":
    sys.exit(main())
