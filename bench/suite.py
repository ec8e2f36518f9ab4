"""Side-by-side benchmark: every workload x size x implementation, one fresh process per cell.

    .venv/bin/python bench/suite.py [--quick] [--device cpu|cuda] [--workloads a,b] [--impls x,y]
                                    [--build build] [--out build/bench/results.json] [--runs N]
                                    [--grad] [--threads N]

Implementations (impl):
  eager                 the nn.Module, eager PyTorch
  torchscript           the scripted module saved and loaded, TorchScript's default (profiling)
                        executor, no libtsfuse in the process: first_call_ms is its first
                        (unoptimized, profiled) call, time_ms the steady state after warm-up
  compile               torch.compile(module), default mode; its first call includes compiling,
                        from an empty inductor cache (a fresh TORCHINDUCTOR_CACHE_DIR per cell)
  compile-max-autotune  torch.compile(module, mode="max-autotune"), likewise
  keops                 the workload written with pykeops LazyTensors, where KeOps can express it
                        (KeOps caches its compiled formulas on disk: first_call_ms includes
                        compiling only when the formula was never built on this machine)
  tsfuse-optimize-ts    the optimize-ts output of the scripted module, libtsfuse loaded
  tsfuse-load-time      the unmodified scripted module with libtsfuse loaded (the executor
                        pre-pass fuses at the first call)

Each cell runs in a fresh process: build the inputs (fixed seed), time the FIRST call, run two
warm-up calls, measure the peak memory of one steady-state call, then time repeats and report the
median wall time (time_ms) and the median process CPU time of a call, all threads (cpu_ms; on a
shared, oversubscribed machine it is the steadier of the two). Peak memory: CPU = growth of the peak RSS during the call (VmHWM after a clear_refs reset,
minus VmRSS before; glibc is told to mmap every allocation >= 64 KiB so that freed buffers leave
the RSS), CUDA = the caching allocator's peak above the memory allocated before the call. The
output is part of the peak. first_call_peak_bytes is the same for the first call (for
torch.compile it includes the compiler's own memory). The result is checked against eager's on
the same inputs (matches: exact / close / differs).

A workload with `grad` (bench/workloads.py: a training loss) is timed forward + backward: a call is
the loss, then torch.autograd.grad of it with respect to the inputs that require grad, and its
output is (loss, gradients...): peak memory and first call cover both passes, the result check
covers the loss and every gradient (grad_rel_err: the largest max|g - eager's g| / max|eager's g|),
and the graph counts come from a forward call with grad enabled (tsfuse_ops: fused ops in the
executed graph), plus the autograd nodes the call recorded (fused_grad_nodes: tsfuse's fused
backward nodes; grad_nodes: all of them). compile-max-autotune is left out of these unless --impls
names it. --grad runs only these workloads.

Results: a list of {"workload", "size", "impl", "device", "time_ms", "first_call_ms",
"peak_bytes", ...} in --out (merged with the cells already there, so subsets can be re-run).
bench/report.py turns it into docs/benchmarks.md.
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

IMPLS = ("eager", "torchscript", "compile", "compile-max-autotune", "keops", "tsfuse-optimize-ts",
         "tsfuse-load-time")
MMAP_THRESHOLD = str(64 * 1024)


def count_ops(graph):
    """(fused tsfuse ops, other aten ops) in a graph, nested blocks and subgraphs (a
    prim::DifferentiableGraph's, with grad) included. The tsfuse::broadcast_* nodes are not
    counted: they only make views of a fused op's operands (no arithmetic, no memory); nor is
    tsfuse::full_slice, a `:` slice's index checks alone, nor tsfuse::product_sums, a guard."""
    fused = other = 0
    stack = [graph.nodes()]
    while stack:
        for n in stack.pop():
            kind = n.kind()
            if kind.startswith("tsfuse::broadcast_") or kind in ("tsfuse::full_slice", "tsfuse::product_sums"):
                pass
            elif kind.startswith("tsfuse::"):
                fused += 1
            elif kind.startswith("aten::"):
                other += 1
            stack.extend(b.nodes() for b in n.blocks())
            if "Subgraph" in n.attributeNames():
                stack.append(n.g("Subgraph").nodes())
    return fused, other


def caller(w, inputs):
    """How a cell calls an implementation f of workload w on inputs: f(*inputs), or for a loss
    (w.grad) forward_backward, with those inputs set to require grad."""
    for i in w.grad:
        inputs[i].requires_grad_()
    return (lambda f: forward_backward(f, inputs, w.grad)) if w.grad else (lambda f: f(*inputs))


def forward_backward(fn, inputs, grad):
    """A forward + backward call: (loss, its gradient with respect to inputs[i] for i in grad)."""
    import torch

    loss = fn(*inputs)
    return (loss.detach(),) + torch.autograd.grad(loss, [inputs[i] for i in grad])


def grad_nodes(loss):
    """(tsfuse's fused backward nodes, all nodes) of the autograd graph that produced loss."""
    seen, stack, fused = set(), [loss.grad_fn], 0
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        fused += "tsfuse" in node.name()
        stack.extend(f for f, _ in node.next_functions)
    return fused, len(seen)


def tensors(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def grad_rel_err(out, ref):
    """The largest max|o - r| / max|r| over the gradients (every output but the loss)."""
    errs = [float((o.float() - r.float()).abs().max() / r.float().abs().max().clamp_min(1e-30))
            for o, r in zip(out[1:], ref[1:])]
    return max(errs) if errs else None


def compare(out, ref):
    """exact / close / differs; of a call's outputs, the worst."""
    import torch

    if isinstance(out, (tuple, list)):
        verdicts = [compare(o, r) for o, r in zip(out, ref)]
        return next((v for v in ("differs", "close") if v in verdicts), "exact")
    if isinstance(out, torch.Tensor) and out.dtype == ref.dtype and out.shape == ref.shape:
        if torch.equal(out.cpu(), ref.cpu()):
            return "exact"
    try:
        if torch.allclose(out.cpu().to(ref.dtype), ref.cpu(), rtol=1e-4, atol=1e-5, equal_nan=True):
            return "close"
    except (RuntimeError, TypeError):
        pass
    return "differs"


def child(a):
    """Measures one cell in this fresh process; prints one JSON line."""
    import torch
    from measure_memory import rss_peak_begin, rss_peak_bytes
    from workloads import BY_NAME

    w = BY_NAME[a.workload]
    torch.set_grad_enabled(bool(w.grad))
    if a.threads:
        torch.set_num_threads(a.threads)
    size = tuple(int(s) for s in a.size.split("x"))
    device = torch.device(a.device)
    cuda = device.type == "cuda"
    if a.impl.startswith("tsfuse"):
        torch.ops.load_library(a.lib)
    module = w.module().eval()
    if a.impl == "eager":
        fn = module
    elif a.impl in ("torchscript", "tsfuse-load-time"):
        fn = torch.jit.load(a.model, map_location=device)
    elif a.impl == "tsfuse-optimize-ts":
        fn = torch.jit.load(a.opt_model, map_location=device)
    elif a.impl == "compile":
        fn = torch.compile(module)
    elif a.impl == "compile-max-autotune":
        fn = torch.compile(module, mode="max-autotune")
    elif a.impl == "keops":
        fn = w.keops
    else:
        raise SystemExit(f"unknown impl {a.impl}")
    inputs = w.make_inputs(size, device)
    call = caller(w, inputs)

    def sync():
        if cuda:
            torch.cuda.synchronize(device)

    def mem_begin():
        if cuda:
            sync()
            torch.cuda.reset_peak_memory_stats(device)
            return torch.cuda.memory_allocated(device)
        return rss_peak_begin()

    def mem_end(before):
        if cuda:
            sync()
            return torch.cuda.max_memory_allocated(device) - before
        return rss_peak_bytes(before)

    sync()
    before = mem_begin()
    t0 = time.perf_counter()
    out = call(fn)
    sync()
    first_ms = (time.perf_counter() - t0) * 1e3
    first_peak = mem_end(before)
    for _ in range(2):
        out = call(fn)
    del out
    before = mem_begin()
    out = call(fn)
    peak = mem_end(before)
    times, cpu_times = [], []
    budget_end = time.perf_counter() + a.min_time
    while len(times) < a.max_reps and (len(times) < a.reps or time.perf_counter() < budget_end):
        t0, c0 = time.perf_counter(), time.process_time()
        out = call(fn)
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
        cpu_times.append((time.process_time() - c0) * 1e3)
    fused = other = None
    extra = {}
    if isinstance(fn, torch.jit.ScriptModule) or w.grad:
        loss = fn(*inputs)  # a forward alone: with grad, the executed graph is the forward's, not the backward's
        if isinstance(fn, torch.jit.ScriptModule):
            fused, other = count_ops(torch.jit.last_executed_optimized_graph())
        if w.grad:
            extra = dict(zip(("fused_grad_nodes", "grad_nodes"), grad_nodes(loss)))
        del loss
    ref = call(module)
    if w.grad:
        extra["grad_rel_err"] = grad_rel_err(out, ref)
    row = {
        "workload": w.name, "size": a.size, "impl": a.impl, "device": a.device,
        "time_ms": statistics.median(times), "first_call_ms": first_ms, "peak_bytes": peak,
        "first_call_peak_bytes": first_peak, "output_bytes": sum(t.numel() * t.element_size() for t in tensors(out)),
        "reps": len(times), "min_ms": min(times),
        "cpu_ms": statistics.median(cpu_times), "tsfuse_ops": fused, "aten_ops": other,
        "matches": compare(out, ref), "threads": torch.get_num_threads(), "status": "ok", **extra,
    }
    if a.impl.startswith("compile"):
        row["compile_ms"] = max(0.0, first_ms - row["time_ms"])
    print(json.dumps(row))
    return 0


def run_cell(args, w, size, impl, models):
    from workloads import size_str

    base = {"workload": w.name, "size": size_str(size), "impl": impl, "device": args.device,
            "time_ms": None, "first_call_ms": None, "peak_bytes": None}
    if impl == "keops" and w.keops is None:
        return dict(base, status="n/a", reason=w.keops_why)
    cmd = [sys.executable, __file__, "--child", impl, "--workload", w.name, "--size", size_str(size),
           "--device", args.device, "--model", str(models[w.name][0]), "--opt-model", str(models[w.name][1]),
           "--lib", str(args.lib), "--reps", str(args.reps), "--max-reps", str(args.max_reps),
           "--min-time", str(args.min_time)] + (["--threads", str(args.threads)] if args.threads else [])
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_=MMAP_THRESHOLD, PYTHONDONTWRITEBYTECODE="1")
    with tempfile.TemporaryDirectory(prefix="tsfuse-inductor-") as cache:
        if impl.startswith("compile"):
            env["TORCHINDUCTOR_CACHE_DIR"] = cache
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            return dict(base, status="error", reason=f"timed out after {args.timeout} s")
    if p.returncode != 0:
        lines = [l for l in p.stderr.strip().splitlines() if l.strip()]
        reason = lines[-1] if lines else f"exit {p.returncode}"
        if impl == "keops":
            return dict(base, status="n/a", reason=f"KeOps failed: {reason}"[:300])
        return dict(base, status="error", reason=reason[:300])
    return json.loads(p.stdout.strip().splitlines()[-1])


def prepare_models(build, workdir, workloads):
    """Scripts each workload's module to WORKDIR/<name>.pt and optimizes it to <name>.opt.pt."""
    import torch
    from measure_memory import optimize_ts

    models = {}
    for w in workloads:
        src, dst = workdir / f"{w.name}.pt", workdir / f"{w.name}.opt.pt"
        torch.jit.script(w.module()).save(str(src))
        optimize_ts(build, src, dst)
        models[w.name] = (src, dst)
    return models


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="the small CI run: one small size, three workloads, torch.compile on one")
    ap.add_argument("--device", default=os.environ.get("DEVICE", "cpu"), choices=["cpu", "cuda"])
    ap.add_argument("--workloads", help="comma-separated subset")
    ap.add_argument("--impls", help="comma-separated subset of " + ",".join(IMPLS))
    ap.add_argument("--sizes", help="comma-separated sizes like 4096x500 (default: the workload's)")
    ap.add_argument("--build", default=os.environ.get("TSFUSE_BUILD", str(ROOT / "build")))
    ap.add_argument("--out", help="results JSON (default: BUILD/bench/results.json)")
    ap.add_argument("--fresh", action="store_true", help="drop the cells already in --out")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--max-reps", type=int, default=300)
    ap.add_argument("--runs", type=int, default=1, help="fresh processes per cell (the median one is kept)")
    ap.add_argument("--min-time", type=float, default=None, help="seconds of repeats per cell")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per cell")
    ap.add_argument("--grad", action="store_true", help="only the forward + backward workloads")
    ap.add_argument("--threads", type=int, help="torch.set_num_threads in every cell (default: torch's)")
    for hidden in ("--child", "--workload", "--size", "--model", "--opt-model", "--lib"):
        ap.add_argument(hidden, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.reps is None:
        a.reps = 3 if a.quick else 5
    if a.min_time is None:
        a.min_time = 0.0 if a.quick else 1.0
    if a.child:
        a.impl = a.child
        a.min_time = float(a.min_time)
        return child(a)

    from workloads import WORKLOADS, size_str

    build = pathlib.Path(a.build).resolve()
    a.lib = pathlib.Path(os.environ.get("TSFUSE_LIB", build / "lib" / "libtsfuse.so"))
    out = pathlib.Path(a.out) if a.out else build / "bench" / "results.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    chosen = a.workloads.split(",") if a.workloads else None
    workloads = [w for w in WORKLOADS if (chosen is None or w.name in chosen) and (not a.quick or w.quick)
                 and (not a.grad or w.grad)]
    impls = a.impls.split(",") if a.impls else list(IMPLS)
    if a.quick and not a.impls:
        impls = list(IMPLS)
    rows = [] if a.fresh or not out.exists() else json.loads(out.read_text())
    t_start = time.time()
    models = prepare_models(build, out.parent, workloads)
    for w in workloads:
        sizes = [w.quick] if a.quick else w.sizes
        if a.sizes:
            sizes = [tuple(int(x) for x in s.split("x")) for s in a.sizes.split(",")]
        for size in sizes:
            for impl in impls:
                # torch.compile compiles from an empty cache for tens of seconds per cell: the quick
                # run exercises both modes on one workload only.
                if a.quick and impl.startswith("compile") and w.name != "seed_similarity":
                    continue
                if w.grad and impl == "compile-max-autotune" and not a.impls:
                    continue
                t0 = time.time()
                # --runs N: N fresh processes, the one with the median time is kept (on a shared VM a
                # process's two threads sometimes land badly for its whole life: ~1.4x, bimodal).
                runs = [run_cell(a, w, size, impl, models) for _ in range(max(1, a.runs))]
                timed = sorted((r for r in runs if r.get("time_ms") is not None), key=lambda r: r["time_ms"])
                row = dict(timed[len(timed) // 2], processes=len(runs)) if timed else runs[0]
                key = (row["workload"], row["size"], row["impl"], row["device"])
                rows = [r for r in rows if (r["workload"], r["size"], r["impl"], r["device"]) != key]
                rows.append(row)
                out.write_text(json.dumps(rows, indent=1) + "\n")
                t = row.get("time_ms")
                detail = (f"{t:10.3f} ms  first {row['first_call_ms']:10.1f} ms  peak "
                          f"{row['peak_bytes'] / 2**20:8.1f} MiB  tsfuse ops {row.get('tsfuse_ops')}  "
                          f"{row.get('matches')}") if t is not None else f"{row['status']}: {row.get('reason')}"
                print(f"{w.name:<20} {size_str(size):>11} {impl:<21} {detail}  ({time.time() - t0:.0f} s)",
                      flush=True)
    print(f"{len(rows)} cells in {out} ({time.time() - t_start:.0f} s)")
    errors = [r for r in rows if r.get("status") == "error"]
    for r in errors:
        print(f"ERROR {r['workload']} {r['size']} {r['impl']}: {r.get('reason')}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
