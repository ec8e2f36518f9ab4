"""The real-model corpus (bench/corpus/entries.py: torchvision, torchmetrics, gpytorch, kornia,
monai, ... functions and models) on a CUDA device: each entry's eager callable on CUDA inputs
against the same code exported as the corpus exports it (scripted or traced on those inputs),
saved, loaded into this process with libtsfuse, and run twice with the executor pass on and, as
the unfused TorchScript reference, off. One row per entry: the fused tsfuse ops of the executed
graph, the generated kernels launched, the comparison with eager, and at --size bench the CUDA
time per call and peak allocator memory of eager, unfused TorchScript and tsfuse.

    PYTHONPATH=<corpus libraries> TSFUSE_LIB=build/lib/libtsfuse.so \\
        python tests/gpu/cuda_corpus_check.py [--size test|bench] [--grad] [--out F.md] [NAME_REGEX]

Comparison as tests/gpu/cuda_models_check.py (`exact`, `close`, or MISMATCH); a fused result
that is not exact passes when the entry says its reduction is reordered (entries.Entry.reorders)
or when unfused TorchScript differs from eager as much (TorchScript's own CUDA fuser). An entry
that raises in eager and in TorchScript alike on CUDA is reported, not failed. `--device cpu`
is a dry run of this script without a GPU. Exit status 1 on a mismatch.

--grad trains instead (as test_corpus.py's test_training_gradients on the CPU): the float inputs
and the module's parameters require grad, and the gradients of the fused module's second call
for fixed incoming gradients must equal eager CUDA's within 1e-4 of the largest (worker.py's
same_gradient), or unfused TorchScript's; a fused op must run with grad where the entry fuses.
"""
import argparse
import io
import os
import pathlib
import re
import statistics
import sys
import time
import traceback
import warnings

import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "corpus"))
sys.path.insert(0, str(ROOT / "tests" / "gpu"))
import entries  # noqa: E402
from cuda_models_check import LAUNCH, StderrCapture, compare, flat  # noqa: E402
from worker import fused_ops, gradients, parameters, same_gradient, slug  # noqa: E402

SEEDS = (0, 1)


def to(x, device):
    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, (tuple, list)):
        return type(x)(to(v, device) for v in x)
    return x


def loader(module):
    """A function returning a fresh copy of `module` (its own graph executors). Each tensor comes
    back on the device it was saved from: a map_location would also move what eager keeps on the
    CPU (torchvision's DefaultBoxGenerator holds its box sizes in a plain list, not a buffer)."""
    buf = io.BytesIO()
    torch.jit.save(module, buf)

    def load():
        buf.seek(0)
        return torch.jit.load(buf)
    return load


def synced_ms(fn, args, device, reps):
    """Median ms per call, one call at a time (wall clock around call + synchronize)."""
    def once():
        out = fn(*args)
        if device.type == "cuda":
            torch.cuda.synchronize()
        return out
    for _ in range(2):
        once()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        once()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def peak_mib(fn, args, device):
    """Peak allocator memory above what was allocated before one call, in MiB (CUDA only)."""
    if device.type != "cuda":
        return float("nan")
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    out = fn(*args)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    del out
    return peak / 2**20


def verdict_of(e, eager, fused, script, reorders):
    """The row's comparison: the fused run against eager, excused where the entry reorders a
    reduction, where `reorders` and the values are close (a fused reduction on CUDA: eager CUDA's
    order is its launch's tree, the generated kernels fold in index order, docs/cuda.md) or where
    unfused TorchScript is as far from eager."""
    worst = "exact"
    for ref, got, plain in zip(eager, fused, script):
        v = compare(ref, got)
        if v == "exact":
            continue
        unfused = compare(ref, plain)  # TorchScript's own distance from eager
        if v.startswith("MISMATCH"):
            if unfused != "exact" and compare(plain, got) == "exact":
                v = "as unfused TorchScript (" + unfused[:60] + ")"
            elif e.reorders is None:
                return v
        elif e.reorders is None and not reorders and unfused == "exact":
            return "MISMATCH not bit-exact: " + v
        worst = v
    return worst


def run_entry(e, device, size, reps, dump):
    fn = entries.make(e)
    if isinstance(fn, torch.nn.Module):
        fn = fn.to(device)
    ins = [to(entries.inputs(e, size, s), device) for s in SEEDS]
    with torch.no_grad():
        with phase("eager"):
            eager = [fn(*i) for i in ins]
        with phase("export"):
            load = loader(entries.export(e, fn, ins[0]))
        with pass_enabled(False), phase("unfused TorchScript"):
            plain = load()
            script = [plain(*i) for i in ins]
        fused_mod = load()
        with StderrCapture() as cap, phase("tsfuse"):
            fused = [fused_mod(*i) for i in ins]
            if device.type == "cuda":
                torch.cuda.synchronize()
        fused_graph = torch.jit.last_executed_optimized_graph()
        ops = fused_ops(fused_graph)
        if dump:
            plain(*ins[0])
            (dump / f"{slug(e.name)}.script.txt").write_text(str(torch.jit.last_executed_optimized_graph()))
            (dump / f"{slug(e.name)}.fused.txt").write_text(str(fused_graph))
        row = {"name": e.name, "mode": e.mode, "ops": ops,
               "launches": len(set(LAUNCH.findall(cap.text))),
               "verdict": verdict_of(e, eager, fused, script,
                                     device.type == "cuda" and any(k.startswith("reduce") for k in ops))}
        if size == "bench":
            args = ins[0]
            row["ms"] = [synced_ms(f, args, device, reps) for f in (fn, plain, fused_mod)]
            row["mib"] = [peak_mib(f, args, device) for f in (fn, plain, fused_mod)]
    return row


def grad_entry(e, device, size):
    """One row of --grad: eager's gradients against the fused module's and unfused TorchScript's."""
    if e.needs_torchvision_ops:
        return None  # (the detectors' training paths are not TorchScript's)
    fn = entries.make(e)
    if isinstance(fn, torch.nn.Module):
        fn = fn.to(device)
    xs = to(entries.inputs(e, size, SEEDS[0]), device)
    with torch.no_grad(), phase("export"):
        load = loader(entries.export(e, fn, xs))
    own = parameters(fn, load())[0]
    with phase("eager"):
        eager = gradients(fn, own, xs)
    if eager is None:
        return {"name": e.name, "mode": e.mode, "ops": {}, "launches": 0, "verdict": "no output requires grad"}
    runs = {}
    for on in (False, True):
        module = load()
        with pass_enabled(on), StderrCapture() as cap, phase("tsfuse" if on else "unfused TorchScript"):
            for _ in range(2):  # the profiling run, then the optimized graph
                runs[on] = gradients(module, parameters(fn, module)[1], xs)
            if device.type == "cuda":
                torch.cuda.synchronize()
    ops = fused_ops(torch.jit.last_executed_optimized_graph())
    verdict = "within 1e-4"
    for k, (want, got, plain) in enumerate(zip(eager, runs[True], runs[False])):
        if not same_gradient(got, want):
            if not same_gradient(got, plain):
                diff = float((got - want).abs().nan_to_num(0).max())
                return {"name": e.name, "mode": e.mode, "ops": ops, "launches": 0,
                        "verdict": f"MISMATCH gradient {k}: max |fused - eager| {diff:.3g}"}
            verdict = "as unfused TorchScript"
    if e.fused and not ops:
        verdict = "MISMATCH no fused op ran with grad"
    return {"name": e.name, "mode": e.mode, "ops": ops, "launches": len(set(LAUNCH.findall(cap.text))),
            "verdict": verdict}


class phase:
    """Names the step that raised in the exception's message; the traceback goes to stderr."""

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if exc is not None:
            traceback.print_exception(kind, exc, tb)
            raise RuntimeError(f"{self.name}: {str(exc).strip().splitlines()[-1]}") from None


class pass_enabled:
    """tsfuse's executor pass off (or on) for the block: graphs first optimized inside keep their
    plan (torch.ops.tsfuse.set_enabled, what tsfuse.enabled() wraps)."""

    def __init__(self, on):
        self.on = on

    def __enter__(self):
        self.previous = torch.ops.tsfuse.set_enabled(self.on)

    def __exit__(self, *exc):
        torch.ops.tsfuse.set_enabled(self.previous)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--size", choices=("test", "bench"), default="bench")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--grad", action="store_true", help="gradients instead of forward values")
    ap.add_argument("--out")
    ap.add_argument("--dump", type=pathlib.Path, help="folder for each entry's executed graphs, "
                    "unfused (<slug>.script.txt) and fused (<slug>.fused.txt)")
    ap.add_argument("only", nargs="?", help="regex of entry names")
    a = ap.parse_args()
    warnings.filterwarnings("ignore")
    os.environ["TSFUSE_LOG_LEVEL"] = "debug"  # read when the library loads: the launches
    torch.ops.load_library(os.environ.get("TSFUSE_LIB", str(ROOT / "build" / "lib" / "libtsfuse.so")))
    device = torch.device(a.device)
    if a.dump:
        a.dump.mkdir(parents=True, exist_ok=True)
    name_dev = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"
    lines = [f"## The corpus{' trained' if a.grad else ''} on {name_dev}, torch {torch.__version__}, size {a.size}", "",
             "| entry | mode | fused ops | kernels launched | vs eager | ms eager / TorchScript / tsfuse "
             "| peak MiB eager / TorchScript / tsfuse |",
             "| --- | --- | --- | ---: | --- | --- | --- |"]
    failures = 0
    for e in entries.ENTRIES:
        if a.only and not re.search(a.only, e.name):
            continue
        try:
            row = grad_entry(e, device, a.size) if a.grad else run_entry(e, device, a.size, a.reps, a.dump)
            if row is None:
                continue
        except Exception as exc:  # noqa: BLE001 - an entry's error is a row, not the end of the run
            row = {"name": e.name, "mode": e.mode, "ops": {}, "launches": 0,
                   "verdict": f"MISMATCH error {str(exc).strip().splitlines()[-1][:200]!r}"}
        failures += row["verdict"].startswith("MISMATCH")
        ops = ", ".join(f"{k} {v}" for k, v in sorted(row["ops"].items())) or "-"
        ms = " / ".join("%.3f" % t for t in row["ms"]) if "ms" in row else ""
        mib = " / ".join("%.1f" % m for m in row["mib"]) if "mib" in row else ""
        lines.append(f"| {e.name} | {e.mode} | {ops} | {row['launches']} | {row['verdict']} | {ms} | {mib} |")
        print(lines[-1], flush=True)
    lines += ["", f"{failures} mismatches"]
    if a.out:
        pathlib.Path(a.out).write_text("\n".join(lines) + "\n")
    print(lines[-1])
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
