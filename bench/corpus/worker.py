"""Runs the corpus (entries.py) in two process phases; the test and the bench both drive it.

    python bench/corpus/worker.py export   --size test|bench OUTDIR [NAME...]
    python bench/corpus/worker.py loadtime --lib libtsfuse.so OUTDIR [NAME...]
    python bench/corpus/worker.py train [--lib libtsfuse.so] --tag TAG OUTDIR [NAME...]

export (no libtsfuse in the process): for every entry, builds the eager callable, saves the
scripted or traced module as OUTDIR/<slug>.pt (example_inputs() = the seed-0 inputs), and saves
OUTDIR/<slug>.ref.pt: the inputs of seeds 0 and 1, eager's outputs and the unfused TorchScript
module's outputs on them.

loadtime (libtsfuse loaded first, so the executor's pre-pass fuses at the first call): loads every
<slug>.pt, calls it on seed 0 then seed 1, and prints one JSON line per entry: whether the outputs
are torch.equal to eager's, the largest difference to eager of the fused and of the unfused
TorchScript run, the tsfuse ops of the executed graph (and of <slug>.opt.pt, if present), counted
and as distinct regions (fused_regions), and how
the fused work ran over both calls (torch.ops.tsfuse.path_counts(): compiled, interpreted, ...).

train (libtsfuse loaded with --lib, else unfused TorchScript): the float inputs of seed 0 and the
module's parameters require grad; eager's gradients and the loaded module's (second call) for fixed
incoming gradients go to OUTDIR/<slug>.grads.TAG.pt, and one JSON line per entry says whether an
output requires grad and which fused ops the graph executed with grad held.

The corpus libraries must be importable (PYTHONPATH: tests/python/pypi_deps.py's folders).
"""
import argparse
import json
import pathlib
import re
import sys
import time
import warnings

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import entries  # noqa: E402

SEEDS = (0, 1)


def slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_")


def tensors(out):
    """The tensors of an output (tuples, lists and dicts flattened in order)."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        return [t for k in sorted(out) for t in tensors(out[k])]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in tensors(o)]
    return [torch.tensor(out)]


def max_diff(expected, actual) -> float:
    """0 if every tensor is torch.equal (same dtype and shape too); inf on a dtype/shape mismatch;
    else the largest absolute difference (NaN where only one side is NaN counts as inf)."""
    e, a = tensors(expected), tensors(actual)
    if len(e) != len(a):
        return float("inf")
    worst = 0.0
    for x, y in zip(e, a):
        if x.dtype != y.dtype or x.shape != y.shape:
            return float("inf")
        if torch.equal(x, y) or x.numel() == 0:
            continue
        if not x.dtype.is_floating_point:
            return float("inf")
        nan = x.isnan() | y.isnan()
        if not torch.equal(x.isnan(), y.isnan()):
            return float("inf")
        d = (x.double() - y.double()).abs().masked_fill(nan, 0)
        worst = max(worst, float(d.max()))
    return worst


def close(expected, actual, rtol: float, atol: float) -> bool:
    try:
        for x, y in zip(tensors(expected), tensors(actual), strict=True):
            torch.testing.assert_close(y, x, rtol=rtol, atol=atol, equal_nan=True)
        return True
    except (AssertionError, ValueError):
        return False


def fused_ops(graph) -> dict:
    """{'pairwise': n, 'reduce': n, ...}: the fused tsfuse:: nodes of a graph (entries.is_fused_op)."""
    counts = {}
    for kind in re.findall(r"tsfuse::(\w+)\(", str(graph)):
        if entries.is_fused_op(kind):
            counts[kind] = counts.get(kind, 0) + 1
    return counts


def fused_regions(graph) -> list:
    """The distinct fused ops of a graph, each as its kind and source line. Two graphs that fused
    the same regions give the same list, however many copies of a region they hold (the profiling
    executor unrolls loops, copying the regions of a body) and however the executor's own passes
    (constant propagation, peepholes such as x * 1 -> x, CSE) simplified the program inside."""
    found = set()

    def walk(block):
        for node in block.nodes():
            kind = node.kind()
            if kind.startswith("tsfuse::") and entries.is_fused_op(kind[len("tsfuse::"):]):
                found.add(f"{kind} @ {str(node).partition('#')[2].strip()}")
            for b in node.blocks():
                walk(b)

    walk(graph)
    return sorted(found)


def selected(names):
    return [entries.BY_NAME[n] for n in names] if names else entries.ENTRIES


def cmd_export(a) -> int:
    out = pathlib.Path(a.outdir)
    out.mkdir(parents=True, exist_ok=True)
    torch.set_grad_enabled(False)
    for e in selected(a.names):
        start = time.perf_counter()
        fn = entries.make(e)
        ins = [entries.inputs(e, a.size, s) for s in SEEDS]
        module = entries.export(e, fn, ins[0])
        module.save(str(out / f"{slug(e.name)}.pt"))
        loaded = torch.jit.load(str(out / f"{slug(e.name)}.pt"))
        ref = {"inputs": ins, "eager": [fn(*i) for i in ins], "script": [loaded(*i) for i in ins]}
        torch.save(ref, str(out / f"{slug(e.name)}.ref.pt"))
        print(json.dumps({"name": e.name, "script_vs_eager": max(max_diff(x, y) for x, y in
                                                                  zip(ref["eager"], ref["script"])),
                          "seconds": round(time.perf_counter() - start, 2)}), flush=True)
    return 0


def cmd_loadtime(a) -> int:
    out = pathlib.Path(a.outdir)
    torch.ops.load_library(a.lib)
    torch.set_grad_enabled(False)
    if any(e.needs_torchvision_ops for e in selected(a.names)):
        import torchvision  # noqa: F401  registers torchvision::nms, which the saved detectors call
    for e in selected(a.names):
        ref = torch.load(str(out / f"{slug(e.name)}.ref.pt"), weights_only=False)
        model = torch.jit.load(str(out / f"{slug(e.name)}.pt"))
        got, ops, regions = [], [], []
        counts = dict(torch.ops.tsfuse.path_counts())
        for i in ref["inputs"]:
            got.append(model(*i))
            executed = torch.jit.last_executed_optimized_graph()
            ops.append(fused_ops(executed))
            regions.append(fused_regions(executed))
        ran = {k: v - counts[k] for k, v in torch.ops.tsfuse.path_counts().items()}
        row = {
            "name": e.name,
            "equal": all(max_diff(x, y) == 0 for x, y in zip(ref["eager"], got)),
            "fused_vs_eager": max(max_diff(x, y) for x, y in zip(ref["eager"], got)),
            "script_vs_eager": max(max_diff(x, y) for x, y in zip(ref["eager"], ref["script"])),
            "loadtime_ops": ops[0],
            "loadtime_ops_second_call": ops[1],
            "loadtime_regions": regions[0],
            "loadtime_regions_second_call": regions[1],
            "path_counts": ran,
        }
        row["within_tolerance"] = all(close(x, y, *entries.TOLERANCE) for x, y in zip(ref["eager"], got))
        opt = out / f"{slug(e.name)}.opt.pt"
        if opt.exists():
            optimized = torch.jit.load(str(opt)).forward.graph
            row["optimize_ts_ops"] = fused_ops(optimized)
            row["optimize_ts_regions"] = fused_regions(optimized)
        print(json.dumps(row), flush=True)
    return 0


def _leaves(xs):
    return [x.detach().clone().requires_grad_() if isinstance(x, torch.Tensor) and x.dtype in (torch.float32,
                                                                                               torch.float64)
            else x for x in xs]


def gradients(fn, params, xs):
    """The gradients of fn(*xs)'s floating outputs requiring grad, for fixed incoming gradients,
    with respect to xs's float tensors and `params`; None where no output requires grad."""
    leaves = _leaves(xs)
    outs = [t for t in tensors(fn(*leaves)) if t.dtype.is_floating_point and t.requires_grad]
    if not outs:
        return None
    incoming = [torch.randn(o.shape, generator=torch.Generator().manual_seed(7 + k), dtype=torch.float64)
                .to(o.device, o.dtype) for k, o in enumerate(outs)]
    wrt = [x for x in leaves if isinstance(x, torch.Tensor) and x.requires_grad] + params
    grads = torch.autograd.grad(outs, wrt, incoming, allow_unused=True)
    return [g if g is not None else torch.zeros_like(w) for g, w in zip(grads, wrt)]


def parameters(fn, model):
    """The parameters trained on both sides, in one order: (eager callable's, loaded module's);
    none where a wrapper renamed them (then the inputs' gradients only)."""
    if not isinstance(fn, torch.nn.Module):
        return [], []
    names = [n for n, _ in fn.named_parameters()]
    loaded = dict(model.named_parameters())
    if any(n not in loaded for n in names):
        return [], []
    own = dict(fn.named_parameters())
    return [own[n] for n in names], [loaded[n] for n in names]


def same_gradient(got, want):
    """Equal NaN and infinity positions, finite values within 1e-4 of the largest finite magnitude."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    finite = torch.isfinite(want)
    if not torch.equal(torch.isnan(got), torch.isnan(want)) or not torch.equal(got[~finite & ~torch.isnan(want)],
                                                                               want[~finite & ~torch.isnan(want)]):
        return False
    if not bool(finite.any()):
        return True
    scale = want[finite].double().abs().max().item() or 1.0
    return (got[finite].double() - want[finite].double()).abs().max().item() <= 1e-4 * scale


def cmd_train(a) -> int:
    out = pathlib.Path(a.outdir)
    if a.lib:
        torch.ops.load_library(a.lib)
    for e in selected(a.names):
        if e.needs_torchvision_ops:
            continue  # (the detectors' training paths are not TorchScript's)
        ref = torch.load(str(out / f"{slug(e.name)}.ref.pt"), weights_only=False)
        xs = ref["inputs"][0]
        fn = entries.make(e)
        model = torch.jit.load(str(out / f"{slug(e.name)}.pt"))
        own, loaded = parameters(fn, model)
        eager = gradients(fn, own, xs)
        row = {"name": e.name, "trainable": eager is not None}
        if eager is not None:
            got = None
            try:
                for _ in range(2):  # the profiling run, then the optimized graph
                    got = gradients(model, loaded, xs)
                row["fused_ops"] = fused_ops(torch.jit.last_executed_optimized_graph())
            except RuntimeError as exc:  # (TorchScript's own: an in-place op on a view it made of a leaf)
                row["error"] = str(exc).strip().splitlines()[-1][:300]
            torch.save({"eager": eager, "module": got}, str(out / f"{slug(e.name)}.grads.{a.tag}.pt"))
        print(json.dumps(row), flush=True)
    return 0


def main(argv=None) -> int:
    warnings.filterwarnings("ignore")
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    ex = sub.add_parser("export")
    ex.add_argument("--size", choices=("test", "bench"), default="test")
    lt = sub.add_parser("loadtime")
    lt.add_argument("--lib", required=True)
    tr = sub.add_parser("train")
    tr.add_argument("--lib", help="libtsfuse.so (none: unfused TorchScript)")
    tr.add_argument("--tag", required=True, help="OUTDIR/<slug>.grads.TAG.pt")
    for p in (ex, lt, tr):
        p.add_argument("outdir")
        p.add_argument("names", nargs="*")
    a = ap.parse_args(argv)
    return {"export": cmd_export, "loadtime": cmd_loadtime, "train": cmd_train}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
