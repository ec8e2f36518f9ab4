"""Differential fuzzer: random programs, scripted (and sometimes traced, or saved and run
through optimize-ts), executed with libtsfuse loaded, compared with eager PyTorch.

    python tests/fuzz/run.py                      # TSFUSE_FUZZ_PROGRAMS (default 2000) programs
    python tests/fuzz/run.py --programs 100000    # longer (or TSFUSE_FUZZ_PROGRAMS=100000, make fuzz N=...)
    python tests/fuzz/run.py --only 1234          # re-run one program, print its source and reproducer
    TSFUSE_FUZZ_DEVICE=cuda python tests/fuzz/run.py   # inputs on the GPU: eager CUDA vs tsfuse's kernels
    python tests/fuzz/run.py --grad               # gradient mode too (or TSFUSE_FUZZ_GRAD=1): grad.py

Comparison rules (per output, plus every input tensor after the call, since programs may write
through views of their inputs): same dtype, shape and strides; values bit-exact where the
generator's error bound is 0 (all integer/bool outputs, float elementwise chains), NaN positions
equal and finite values within the bound elsewhere (reductions, transcendental ops). When eager
raises, the optimized program must raise an error of the same class. A disagreement with eager
that the unoptimized TorchScript program shows identically is TorchScript's own divergence, not
tsfuse's; it is reported separately. Exit status 1 on any mismatch.

Gradient mode (--grad): every program with a float32/float64 input also runs with those inputs
requiring grad, eagerly and through a fresh compilation of each path, and the gradients of its
floating outputs for a fixed incoming gradient are compared within grad_bound.py's summation-order
bound (the rules are grad.py's docstring). Its mismatches are triaged, minimized and counted like
the others; the report adds how many programs had gradients compared and how many of those ran a
tsfuse:: op with grad enabled.
"""
import argparse
import collections
import copy
import dataclasses
import importlib.util
import json
import math
import multiprocessing
import os
import pathlib
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

HERE = pathlib.Path(__file__).resolve().parent
SOURCE = pathlib.Path(os.environ.get("TSFUSE_SOURCE", HERE.parents[1]))
BUILD = pathlib.Path(os.environ.get("TSFUSE_BUILD", SOURCE / "build"))
LIB = pathlib.Path(os.environ.get("TSFUSE_LIB", BUILD / "lib" / "libtsfuse.so"))
OPTIMIZE_TS = BUILD / "bin" / "optimize-ts"
# The generated programs are small: unless told otherwise, they run through the fused kernels rather
# than as the ATen ops a small call runs as (kernels/runtime/small_call.h; ctest's fuzz_small_calls
# runs them that way).
os.environ.setdefault("TSFUSE_SMALL_CALL_VALUES", "0")
sys.path.insert(0, str(HERE))

import torch  # noqa: E402

import gen  # noqa: E402
import grad  # noqa: E402
from compare import BOUND_CONTRACTS, KNOWN_DIVERGENCES, MINMAX_RE, compare_results  # noqa: E402

# Forms whose own op can be checked in the executed graph: the form counts as fused in a program
# only when no such ATen node is left (it was absorbed into a tsfuse:: op).
FORM_OPS = {
    "reduce:sum": r"aten::sum\(", "reduce:mean": r"aten::mean\(", "reduce:prod": r"aten::prod\(",
    "reduce:amax": r"aten::amax\(", "reduce:amin": r"aten::amin\(", "reduce:argmax": r"aten::argmax\(",
    "reduce:argmin": r"aten::argmin\(", "reduce:any": r"aten::any\(", "reduce:all": r"aten::all\(",
    "reduce:max_dim": r"aten::max\(%[\w.]+, %[\w.]+, %[\w.]+\)",
    "reduce:min_dim": r"aten::min\(%[\w.]+, %[\w.]+, %[\w.]+\)",
    "reduce:max_idx": r"aten::(max|min)\(%[\w.]+, %[\w.]+, %[\w.]+\)",
    "reduce:max_match": r"aten::(max|min)\(%[\w.]+, %[\w.]+, %[\w.]+\)|aten::full_like\(",
    "reduce:logsumexp": r"aten::logsumexp\(", "reduce:norm": r"aten::norm\(",
    "reduce:vector_norm": r"aten::linalg_vector_norm\(",
    "reduce:var": r"aten::var\(", "reduce:std": r"aten::std\(",
    "reduce:softmax": r"aten::softmax\(", "reduce:log_softmax": r"aten::log_softmax\(",
    "reduce:div_sum": r"aten::sum\(",
    "inplace": r"aten::\w+_\(", "where": r"aten::where\(",
    "repeat": r"aten::repeat\(", "mask_write": r"aten::index_put_\(", "triangle": r"aten::tri[ul]_?\(",
    "transposed_reduce": r"aten::(transpose|t)\(",
}

# Forms whose own fused op must appear in the optimized graph.
FORM_FUSED_OPS = {"nested_reduce": r"tsfuse::reduce_(chain|sweep)", "nested_multi": r"tsfuse::reduce_sweep",
                  "fused_stage": r"fused\(v1: ", "fused_multi": r"tsfuse::reduce_sweep"}


def form_fused(form, fused, graph):
    """Whether `form` was fused in a program: its op absorbed (FORM_OPS) or its fused op present
    (FORM_FUSED_OPS), else the program fused."""
    if form in FORM_FUSED_OPS:
        return fused and re.search(FORM_FUSED_OPS[form], graph) is not None
    pattern = FORM_OPS.get(form)
    return fused and (pattern is None or re.search(pattern, graph) is None)


def call(fn, args):
    try:
        with torch.no_grad():
            out = fn(*args)
        return out, None
    except Exception as exc:  # noqa: BLE001 - any error is a result to compare
        return None, exc


def run_eager(program, fn):
    args = program.make_inputs()
    out, exc = call(fn, args)
    return out, exc, args


def run_script(program, fn, graph_out=None):
    args = program.make_inputs()
    out, exc = call(fn, args)
    graph = str(torch.jit.last_executed_optimized_graph())
    if graph_out is not None:
        graph_out.append(graph)
    return (out, exc, args), "tsfuse::" in graph


def check_one(program, mode="script"):
    """Runs one program through one path; returns (problem, known, fused, eager_result)."""
    fn = program.eager_fn()
    eager = run_eager(program, fn)
    if mode == "trace":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            traced = torch.jit.trace(fn, tuple(program.make_inputs()), check_trace=False)
        opt, fused = run_script(program, traced)
    else:
        cu = torch.jit.CompilationUnit(program.source())
        opt, fused = run_script(program, getattr(cu, program.name))
    problem, known = compare_results(program, eager, opt)
    return problem, known, fused, eager


def compiled(program, mode):
    """A fresh compilation of the program for `mode` ("script" or "trace"; optimize-ts programs
    are minimized and rerun as scripted ones)."""
    if mode == "trace":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return torch.jit.trace(program.eager_fn(), tuple(program.make_inputs()), check_trace=False)
    return getattr(torch.jit.CompilationUnit(program.source()), program.name)


def check_grad_one(program, mode="script"):
    """check_one for gradient mode: (problem, known, fused, (eager outputs, eager error, inputs))."""
    problem, known, eager, opt = grad.check(program, program.eager_fn(), compiled(program, mode))
    return problem, known, "tsfuse::" in opt.graph, (eager.outputs, eager.error, eager.inputs)


def triage(program, opt, mode, seed, eager=None):
    """A mismatch that TorchScript without tsfuse shows identically (same executor settings, the
    library loaded with TSFUSE_DISABLE=1, in a fresh process) is TorchScript's own divergence from
    eager (its peephole/constant folding or its error mapping), not tsfuse's. With `eager` (a
    grad.GradResult), `opt` is one too and the reference is a gradient run."""
    ref = reference_run(program, mode, seed, grad_mode=eager is not None)
    if ref is None:
        return None
    if eager is not None:
        fn = program.eager_fn()
        bound = lambda: grad.bound_for(program, fn, eager)  # noqa: E731
        # (agreeing up to a known divergence of their own, a signed-zero tie, is agreeing)
        agrees = lambda problem_known: problem_known[0] is None or bool(problem_known[1])  # noqa: E731
        # The optimized gradients are eager's, its forward outputs taken as they are.
        eagers_gradients = lambda: grad.compare_grad(  # noqa: E731
            program, dataclasses.replace(eager, outputs=opt.outputs), opt, bound)[0] is None
        if agrees(grad.compare_grad(program, ref, opt, bound)):
            return "torchscript_vs_eager"
        # Forward outputs TorchScript's own graph computes as the optimized one does (its rewrites
        # at the first call, 0 - x as neg), where TorchScript's gradient differs from eager's: the
        # outputs are TorchScript's divergence, and the gradients must still be eager's. (A backward
        # TorchScript's own graph fails in has computed its forward outputs.)
        if (eager.error is None and opt.error is None and (ref.error is None or ref.stage == "backward")
                and agrees(compare_results(program, (ref.outputs, None, ref.inputs), (opt.outputs, None, opt.inputs)))
                and eagers_gradients()):
            return "torchscript_vs_eager"
        # TorchScript's own graph raising in the forward under grad mode where eager does not (an
        # in-place write to what its matmul returned as a view of an empty leaf): the forward
        # outputs are TorchScript's without grad, and the gradients must still be eager's.
        if eager.error is None and opt.error is None and ref.error is not None and ref.stage == "forward":
            plain = reference_run(program, mode, seed)
            if (plain is not None and any(agrees(compare_results(program, r, (opt.outputs, None, opt.inputs)))
                                          for r in plain) and eagers_gradients()):
                return "torchscript_vs_eager"
        # An error eager raises in the forward that TorchScript without grad drops too (its dead
        # code elimination removes an in-place op nothing reads, with the op's broadcast error):
        # under grad mode TorchScript's own graph keeps the op, the fused one, whose fusion took
        # the op's last reader, does not.
        if eager.error is not None and eager.stage == "forward" and opt.error is None:
            plain = reference_run(program, mode, seed)
            if plain is not None and any(r[1] is None for r in plain):
                return "torchscript_vs_eager"
        return None
    # TorchScript's first call (its profiling run) or its optimized graph (the second call) computes
    # what the optimized program does, or differs from it only by a known divergence, or (both
    # away from eager) only by the signs of zeros that min/max ties pick.
    for r in ref:
        problem, known = compare_results(program, r, opt)
        if problem is None or known or (MINMAX_RE.search(program.source()) and zero_signs_only(r, opt)):
            return "torchscript_vs_eager"
    return None


def zero_signs_only(a, b):
    """Whether two results' outputs hold the same values but for the signs of zeros (NaN where NaN)."""
    (ao, ae, _), (bo, be, _) = a, b
    if ae is not None or be is not None or ao is None or bo is None or len(ao) != len(bo):
        return False
    for x, y in zip(ao, bo):
        if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor):
            if x != y:
                return False
            continue
        if x.dtype != y.dtype or x.shape != y.shape:
            return False
        if x.is_floating_point() and not bool(((x == y) | (x.isnan() & y.isnan())).all()):
            return False
        if not x.is_floating_point() and not torch.equal(x, y):
            return False
    return True


def reference_run(program, mode, seed, grad_mode=False):
    with tempfile.TemporaryDirectory() as d:
        out = pathlib.Path(d) / "ref.pt"
        env = dict(os.environ, TSFUSE_DISABLE="1")
        r = subprocess.run([sys.executable, str(HERE / "run.py"), "--seed", str(seed), "--only", program.name[1:],
                            "--reference", "trace" if mode == "trace" else "script", "--out", str(out)]
                           + (["--grad"] if grad_mode else []),
                           env=env, capture_output=True, text=True)
        if r.returncode != 0 or not out.exists():
            return None
        res = torch.load(str(out), weights_only=False)
    exc = RuntimeError(res["error"]) if res["error"] is not None else None
    if grad_mode:
        return grad.GradResult(res["outputs"], exc, res["stage"], res["inputs"], res["needs"], res["grads"])
    out2, err2, args2 = res["optimized"]
    optimized = (out2, RuntimeError(err2) if err2 is not None else None, args2)
    return (res["outputs"], exc, res["inputs"]), optimized


def _error_text(exc):
    """An error as the TorchScript interpreter reports it (error_class reads its last line)."""
    if exc is None:
        return None
    err = f"The following operation failed in the TorchScript interpreter.\n{exc}"
    if "TorchScript interpreter" not in str(exc):
        err += f"\n{type(exc).__name__}: {exc}"
    return err


def write_reference(program, mode, path, grad_mode=False):
    """--reference: runs one program with the pre-pass disabled and saves what it returned (with
    --grad: its gradient run)."""
    fn = compiled(program, mode)
    if grad_mode:
        res = grad.run_grad(program, fn, grad.CALLS)
        assert "tsfuse::" not in res.graph
        torch.save({"outputs": res.outputs, "error": _error_text(res.error), "stage": res.stage,
                    "inputs": res.inputs, "needs": res.needs, "grads": res.grads}, path)
        return
    (out, exc, args), fused = run_script(program, fn)
    assert not fused
    # The second call runs the graph TorchScript optimized after profiling (its dead code
    # elimination, its peepholes), which the fused path's first call already runs.
    (out2, exc2, args2), _ = run_script(program, fn)
    torch.save({"outputs": out, "error": _error_text(exc), "inputs": args,
                "optimized": (out2, _error_text(exc2), args2)}, path)


def minimize(program, mode, problem, check=None):
    """Drops statements (and all outputs but the failing one) while the mismatch persists and the
    kept outputs' eager values are unchanged (so their error bounds still apply). `check` is
    check_one (default) or check_grad_one."""
    check = check or check_one
    best = copy.deepcopy(program)
    m = re.match(r"output (\d+)", problem)
    base = check(best, mode)[3]
    if m:
        k = int(m.group(1))
        cand = copy.deepcopy(best)
        cand.outputs, cand.errs = [best.outputs[k]], [best.errs[k]]
        if _still_fails(cand, mode, base, [k], check):
            best = cand
            base = check(best, mode)[3]
    i = len(best.lines) - 1
    while i >= 0:
        cand = copy.deepcopy(best)
        del cand.lines[i]
        if _still_fails(cand, mode, base, list(range(len(cand.outputs))), check):
            best = cand
        i -= 1
    return best


def _still_fails(cand, mode, base, keep, check=None):
    try:
        problem, known, _, eager = (check or check_one)(cand, mode)
    except Exception:  # noqa: BLE001 - a candidate that no longer compiles
        return False
    if problem is None or known:
        return False
    eo, ee = eager[0], eager[1]
    if (ee is None) != (base[1] is None):
        return False
    if ee is None:
        for j, k in enumerate(keep):
            e, b = eo[j], base[0][k]
            if e.shape != b.shape or e.dtype != b.dtype or not torch.equal(e.nan_to_num(0.5), b.nan_to_num(0.5)):
                return False
    return True


# ---------------------------------------------------------------------------------------------
# Workers
# ---------------------------------------------------------------------------------------------
def optimize_ts_batch(programs, tmp):
    """Scripts the programs as methods of one module, saves it, runs optimize-ts, loads the result."""
    src = ["import torch", "from torch import Tensor", "class FuzzBatch(torch.nn.Module):",
           "    def forward(self, x: Tensor) -> Tensor:", "        return x"]
    for p in programs:
        src += ["    @torch.jit.export", p.source(indent="    ", self_arg=True)]
    path = tmp / f"fuzzbatch_{os.getpid()}_{programs[0].name}.py"
    path.write_text("\n".join(src) + "\n")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    scripted = torch.jit.script(mod.FuzzBatch())
    scripted.save(str(tmp / "in.pt"))
    r = subprocess.run([str(OPTIMIZE_TS), "-q", str(tmp / "in.pt"), str(tmp / "out.pt")],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"optimize-ts failed ({r.returncode}): {r.stderr[-2000:]}")
    return torch.jit.load(str(tmp / "out.pt"))


def worker(task):
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="tsfuse-fuzz-"))
    try:
        return _worker(task, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _worker(task, tmp):
    seed, indices, opts = task
    progress = opts.get("progress")
    torch.set_num_threads(opts["threads"])
    torch.ops.load_library(str(LIB))
    warnings.simplefilter("ignore")
    stats = collections.Counter()
    per_form = collections.defaultdict(lambda: [0, 0, 0])
    failures, knowns, ts_divergences, unscriptable = [], [], [], []

    # A pass that throws leaves the model unoptimized (the executor hook's "pipeline failed"), so its
    # results stay right: the library counts such runs, and each is a failure here.
    threw = [torch.ops.tsfuse._pipeline_failures()]

    def check_threw(p, mode, grad_mode=False):
        now = torch.ops.tsfuse._pipeline_failures()
        if now != threw[0]:
            threw[0] = now
            failures.append({"index": int(p.name[1:]), "mode": mode, "source": p.source(), "grad": grad_mode,
                             "problem": "a pass threw: the executor hook left the graph unoptimized (see the "
                                        "worker's stderr for the error)"})

    def file_problem(entry, known):
        """A problem as unoptimized TorchScript's own divergence, a known divergence, or a failure."""
        if known == "torchscript_vs_eager":
            ts_divergences.append(entry)
        elif known:
            knowns.append(dict(entry, known=known))
        else:
            failures.append(entry)

    def record(p, mode, eager, opt, fused):
        check_threw(p, mode)
        problem, known = compare_results(p, eager, opt)
        stats["runs"] += 1
        stats[f"runs_{mode}"] += 1
        stats[f"fused_{mode}"] += fused
        if problem and not known:
            known = triage(p, opt, mode, seed)
        if problem is None:
            return fused
        file_problem({"index": int(p.name[1:]), "mode": mode, "problem": problem, "source": p.source()}, known)
        return fused

    def record_grad(p, mode, fn, eager_fn):
        """Gradient mode: p's gradient run through `fn` (a fresh compilation) vs eager's."""
        if not grad.leaves_of(p):
            stats["grad_no_leaf"] += 1
            return
        gstats = {}
        problem, known, eager, opt = grad.check(p, eager_fn, fn, gstats)
        check_threw(p, mode, True)
        for k, v in gstats.items():
            if k == "grad_no_bound_why":
                no_bound.extend(v)
            elif k == "grad_ratios":
                ratios.extend((r, int(p.name[1:]), mode) for r in v)
            else:
                stats[k] += v
        stats[f"grad_runs_{mode}"] += 1
        fused = "tsfuse::" in opt.graph
        if eager.error is not None:
            stats["grad_error_runs"] += 1
        elif not any(eager.needs):
            stats["grad_no_output"] += 1
        else:
            stats["grad_compared"] += 1
            stats[f"grad_compared_{mode}"] += 1
            stats["grad_fused"] += fused
            stats[f"grad_fused_{mode}"] += fused
        if problem and not known:
            known = triage(p, opt, mode, seed, eager)
        if problem is None:
            return
        file_problem({"index": int(p.name[1:]), "mode": mode, "grad": True, "problem": problem,
                      "source": p.source()}, known)

    def compile_unit(programs, report):
        try:
            cu = torch.jit.CompilationUnit("\n".join(p.source() for p in programs))
            return {p.name: getattr(cu, p.name) for p in programs}
        except Exception:  # noqa: BLE001 - find the program(s) TorchScript rejects
            fns = {}
            for p in programs:
                try:
                    fns[p.name] = getattr(torch.jit.CompilationUnit(p.source()), p.name)
                except Exception as exc:  # noqa: BLE001
                    if report:
                        unscriptable.append({"index": int(p.name[1:]), "error": str(exc).splitlines()[0]})
            return fns

    no_bound, ratios = [], []
    B = opts["batch"]
    for start in range(0, len(indices), B):
        progs = [gen.generate(seed, i) for i in indices[start:start + B]]
        via_ts = [p for p in progs if opts["optimize_ts"] and p.seed % 20 == 7 and not p.expect_error]
        via_cu = [p for p in progs if p not in via_ts]
        scope = {"torch": torch, "Tensor": torch.Tensor, "__name__": "tsfuse_fuzz_programs"}
        exec("\n".join(p.source() for p in progs), scope)  # noqa: S102
        fns = compile_unit(via_cu, True)
        # Gradient mode: fresh compilations, whose executors see only calls with grad enabled.
        grad_fns = compile_unit(via_cu, False) if opts["grad"] else {}
        module = grad_module = None
        if via_ts:
            module = optimize_ts_batch(via_ts, tmp)
            if opts["grad"]:
                grad_module = torch.jit.load(str(tmp / "out.pt"))
        for p in progs:
            if progress:  # which program this worker is on, should it die (see run_tasks)
                pathlib.Path(progress).write_text(p.name[1:])
            if p in via_ts:
                fn, mode = getattr(module, p.name), "optimize_ts"
                fused_static = "tsfuse::" in str(fn.graph)
            elif p.name in fns:
                fn, mode = fns[p.name], "script"
            else:
                continue
            eager = run_eager(p, scope[p.name])
            graphs = []
            opt, fused = run_script(p, fn, graphs)
            graph = graphs[0]
            if mode == "optimize_ts":
                fused, graph = fused_static, str(fn.graph)
            stats["programs"] += 1
            fused_any = record(p, mode, eager, opt, fused)
            if opts["grad"]:
                gfn = getattr(grad_module, p.name) if mode == "optimize_ts" else grad_fns.get(p.name)
                if gfn is not None:
                    record_grad(p, mode, gfn, scope[p.name])
            if p.trace:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    try:
                        traced = torch.jit.trace(scope[p.name], tuple(p.make_inputs()), check_trace=False)
                        gtraced = (torch.jit.trace(scope[p.name], tuple(p.make_inputs()), check_trace=False)
                                   if opts["grad"] else None)
                    except Exception:  # noqa: BLE001 - not traceable (e.g. data-dependent): skip
                        traced = None
                if traced is not None:
                    topt, tfused = run_script(p, traced)
                    fused_any |= record(p, "trace", eager, topt, tfused)
                    if gtraced is not None:
                        record_grad(p, "trace", gtraced, scope[p.name])
            stats["fused_programs"] += bool(fused_any)
            stats["error_programs"] += eager[1] is not None
            for f in p.forms | {"all"}:
                per_form[f][0] += 1
                per_form[f][1] += bool(fused_any)
                per_form[f][2] += form_fused(f, fused, graph)
    return {"stats": dict(stats), "per_form": dict(per_form), "failures": failures, "known": knowns,
            "ts_divergences": ts_divergences, "unscriptable": unscriptable, "no_bound": no_bound,
            "grad_ratios": ratios}


def run_tasks(tasks, jobs, seed, grad_mode=False):
    """Runs the tasks on `jobs` worker processes. A worker that dies (a crash in native code)
    breaks the pool: the program each unfinished task was on is then re-run alone in a fresh
    process; one that dies there is a failure ("crash"), and the tasks are resubmitted without it."""
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool
    results, crashes, seen = [], [], {}
    progress_dir = pathlib.Path(tempfile.mkdtemp(prefix="tsfuse-fuzz-progress-"))
    pending = {k: (sd, list(idx), dict(o, progress=str(progress_dir / f"task{k}"))) for k, (sd, idx, o) in enumerate(tasks)}
    while pending:
        broken = False
        with ProcessPoolExecutor(max(1, jobs), mp_context=multiprocessing.get_context("spawn")) as ex:
            futures = {ex.submit(worker, t): k for k, t in pending.items()}
            for f in as_completed(futures):
                k = futures[f]
                try:
                    results.append(f.result())
                    del pending[k]
                except BrokenProcessPool:
                    broken = True
        if not broken:
            break
        for k, (sd, idx, o) in list(pending.items()):
            where = pathlib.Path(o["progress"])
            if not where.exists():
                continue
            i = int(where.read_text())
            where.unlink()
            r = subprocess.run([sys.executable, str(HERE / "run.py"), "--seed", str(seed), "--only", str(i)]
                               + (["--grad"] if grad_mode else []), capture_output=True, text=True)
            again = seen.get((k, i), 0)
            seen[(k, i)] = again + 1
            died = r.returncode < 0 or r.returncode > 128
            if died or again:  # twice in the middle of a broken pool: not reproducible alone
                p = gen.generate(seed, i)
                why = (f"the process died (signal {-r.returncode if r.returncode < 0 else r.returncode - 128})" if died
                       else "a worker died on it twice (does not reproduce alone)")
                crashes.append({"index": i, "mode": "script", "source": p.source(), "problem": why})
                pending[k] = (sd, [j for j in idx if j != i], o)
    shutil.rmtree(progress_dir, ignore_errors=True)
    return results, crashes


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--programs", type=int, default=int(os.environ.get("TSFUSE_FUZZ_PROGRAMS", 2000)))
    ap.add_argument("--seed", type=int, default=int(os.environ.get("TSFUSE_FUZZ_SEED", 0)))
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("TSFUSE_FUZZ_JOBS", 2)))
    ap.add_argument("--threads", type=int, default=int(os.environ.get("TSFUSE_FUZZ_THREADS", 1)),
                    help="intra-op threads per worker")
    ap.add_argument("--batch", type=int, default=100, help="programs per scripted compilation unit")
    ap.add_argument("--no-optimize-ts", action="store_true", help="skip the optimize-ts share (5%%)")
    ap.add_argument("--only", type=int, help="run program INDEX alone and print it")
    ap.add_argument("--json", help="write the report as JSON here")
    ap.add_argument("--reference", choices=["script", "trace"], help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--max-minimize", type=int, default=5, help="minimize at most this many failures")
    ap.add_argument("--grad", action="store_true", default=os.environ.get("TSFUSE_FUZZ_GRAD", "") not in ("", "0"),
                    help="gradient mode too: float32/float64 inputs require grad, gradients compared (grad.py)")
    a = ap.parse_args()

    if a.reference:
        torch.ops.load_library(str(LIB))
        write_reference(gen.generate(a.seed, a.only), a.reference, a.out, a.grad)
        return 0
    if a.only is not None:
        torch.ops.load_library(str(LIB))
        p = gen.generate(a.seed, a.only)
        print(p.source())
        print("inputs:", [s.code() if isinstance(s, gen.InputSpec) else s for s in p.inputs])
        print("forms:", sorted(p.forms), "errs:", p.errs)
        for mode in ["script"] + (["trace"] if p.trace else []):
            problem, known, fused, _ = check_one(p, mode)
            if problem and not known:
                cu = torch.jit.CompilationUnit(p.source())
                opt = run_script(p, getattr(cu, p.name))[0] if mode == "script" else None
                known = triage(p, opt, mode, a.seed) if opt else None
            print(f"{mode}: fused={fused} problem={problem} known={known}")
            if a.grad:
                problem, known, fused, _ = check_grad_one(p, mode)
                if problem and not known:
                    _, _, eager, opt = grad.check(p, p.eager_fn(), compiled(p, mode))
                    known = triage(p, opt, mode, a.seed, eager)
                print(f"{mode} with grad (inputs {[p.params[i][0] for i in grad.leaves_of(p)]}): "
                      f"fused={fused} problem={problem} known={known}")
        return 0

    t0 = time.time()
    opts = {"threads": a.threads, "batch": a.batch, "optimize_ts": not a.no_optimize_ts, "grad": a.grad}
    jobs = max(1, a.jobs)
    chunks = [list(range(w, a.programs, jobs)) for w in range(jobs)]
    # Smaller tasks than one chunk per worker keep both workers busy until the end.
    tasks = [(a.seed, c[s:s + a.batch * 2], opts) for c in chunks for s in range(0, len(c), a.batch * 2)]
    # Every other task runs with 2 intra-op threads, so ATen's and tsfuse's parallel paths are hit too.
    tasks = [(sd, idx, dict(o, threads=o["threads"] + (k % 2))) for k, (sd, idx, o) in enumerate(tasks)]
    results, crashes = run_tasks(tasks, jobs, a.seed, a.grad)
    stats = collections.Counter()
    per_form = collections.defaultdict(lambda: [0, 0, 0])
    failures, knowns, tsd, unscriptable, no_bound, ratios = [], [], [], [], [], []
    for r in results:
        no_bound += r["no_bound"]
        ratios += r["grad_ratios"]
        stats.update(r["stats"])
        for f, counts in r["per_form"].items():
            for j, c in enumerate(counts):
                per_form[f][j] += c
        failures += r["failures"]
        knowns += r["known"]
        tsd += r["ts_divergences"]
        unscriptable += r["unscriptable"]
    failures += crashes
    elapsed = time.time() - t0
    ru_self, ru_child = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = ru_self.ru_utime + ru_self.ru_stime + ru_child.ru_utime + ru_child.ru_stime

    n = stats["programs"]
    print(f"tsfuse differential fuzzer: seed {a.seed}, {n} programs ({stats['runs']} runs: "
          f"{stats['runs_script']} scripted, {stats['runs_trace']} traced, {stats['runs_optimize_ts']} via optimize-ts), "
          f"{elapsed:.1f} s wall, {cpu:.1f} s CPU, {jobs} workers")
    print(f"fused: {stats['fused_programs']}/{n} programs ({100 * stats['fused_programs'] / max(n, 1):.1f}%); "
          f"by path: script {stats['fused_script']}/{stats['runs_script']}, trace {stats['fused_trace']}/{stats['runs_trace']}, "
          f"optimize-ts {stats['fused_optimize_ts']}/{stats['runs_optimize_ts']}; "
          f"{stats['error_programs']} programs raise in eager (and must raise optimized)")
    print("fused share per form: programs containing the form / with any tsfuse op / with the form's own op fused")
    print("  (own op: for reductions, in-place ops and where, no such ATen node left in the scripted graph)")
    for f in sorted(per_form, key=lambda f: (f != "all", f)):
        tot, fu, own = per_form[f]
        own_s = f"{own:6d} {100 * own / max(tot, 1):5.1f}%" if f in FORM_OPS or f in FORM_FUSED_OPS else ""
        print(f"  {f:28s} {tot:6d} {fu:6d} {100 * fu / max(tot, 1):5.1f}%  {own_s}")
    if a.grad:
        runs = sum(stats[f"grad_runs_{m}"] for m in ("script", "trace", "optimize_ts"))
        gc, gf = stats["grad_compared"], stats["grad_fused"]
        print(f"gradient mode: {runs} gradient runs ({stats['grad_runs_script']} scripted, {stats['grad_runs_trace']} "
              f"traced, {stats['grad_runs_optimize_ts']} via optimize-ts); {stats['grad_no_leaf']} programs without a "
              f"float32/float64 input")
        print(f"  gradients compared: {gc} runs; with a tsfuse:: op executed with grad enabled: {gf} "
              f"({100 * gf / max(gc, 1):.1f}%; script {stats['grad_fused_script']}/{stats['grad_compared_script']}, "
              f"trace {stats['grad_fused_trace']}/{stats['grad_compared_trace']}, optimize-ts "
              f"{stats['grad_fused_optimize_ts']}/{stats['grad_compared_optimize_ts']})")
        print(f"  {stats['grad_error_runs']} runs raise in eager with grad (forward or backward; must raise optimized), "
              f"{stats['grad_no_output']} with no output requiring grad")
        print(f"  {stats['grad_bounds']} runs needed the bound (gradients not bit-identical); "
              f"{stats['grad_unbounded_elements']} differing elements had no finite bound; {stats['grad_unknown_op']} runs "
              f"had no bound (compared bit-exactly); {stats['grad_none_vs_zeros']} gradients None on one side, zeros on "
              f"the other")
        if ratios:
            rs = sorted(ratios)
            print(f"  differing gradients (within the bound): {len(rs)} leaves, |eager - optimized| / bound at most "
                  f"{rs[-1][0]:.2g} (program {rs[-1][1]}, {rs[-1][2]}; median of the per-leaf maxima "
                  f"{rs[len(rs) // 2][0]:.2g})")
        for why, cnt in collections.Counter(no_bound).most_common(5):
            print(f"    no bound: {cnt} x {why}")
    if unscriptable:
        print(f"{len(unscriptable)} generated programs TorchScript does not compile (generator bug; not run):")
        for u in unscriptable[:5]:
            print(f"  program {u['index']}: {u['error']}")
    if tsd:
        print(f"{len(tsd)} runs where unoptimized TorchScript itself differs from eager (not tsfuse):")
        for t in tsd[:5]:
            print(f"  program {t['index']} [{t['mode']}]: {t['problem']}")
    if knowns:
        c = collections.Counter(k["known"] for k in knowns)
        print(f"known divergences ({len(knowns)} runs):")
        for k, cnt in c.items():
            print(f"  {k}: {cnt} — {KNOWN_DIVERGENCES[k]}")
    print("comparison contracts (not bit-exact): " + "; ".join(f"{k}: {v}" for k, v in BOUND_CONTRACTS.items()))
    print(f"mismatches: {len(failures)}")
    for f in failures[:a.max_minimize]:
        p = gen.generate(a.seed, f["index"])
        print("=" * 100)
        print(f"MISMATCH program {f['index']} (seed {a.seed}) [{f['mode']}{', grad' if f.get('grad') else ''}]: "
              f"{f['problem']}")
        torch.ops.load_library(str(LIB)) if not getattr(main, "_loaded", False) else None
        main._loaded = True
        mode = "trace" if f["mode"] == "trace" else "script"
        check = check_grad_one if f.get("grad") else check_one
        try:
            small = p if "died" in f["problem"] else minimize(p, mode, f["problem"], check)
        except Exception as exc:  # noqa: BLE001
            print(f"(minimization failed: {exc})")
            small = p
        again = f"{sys.argv[0]} --seed {a.seed} --only {f['index']}" + (" --grad" if f.get("grad") else "")
        print(f"minimized reproducer (python; rerun the original with: {again}):")
        print(grad.reproducer(small, str(LIB), str(HERE)) if f.get("grad") else small.reproducer(str(LIB), str(HERE)))
    for f in failures[a.max_minimize:]:
        print(f"MISMATCH program {f['index']} [{f['mode']}{', grad' if f.get('grad') else ''}]: {f['problem']}")
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps({
            "seed": a.seed, "programs": n, "grad": a.grad, "seconds": elapsed, "cpu_seconds": cpu, "stats": dict(stats),
            "per_form": {f: {"programs": t, "fused": k, "own_op_fused": o} for f, (t, k, o) in per_form.items()},
            "mismatches": failures, "known": knowns, "torchscript_divergences": tsd,
            "unscriptable": unscriptable, "grad_no_bound": no_bound, "grad_bound_ratios": sorted(ratios)}, indent=1))
    return 1 if failures or unscriptable else 0


if __name__ == "__main__":
    sys.exit(main())
