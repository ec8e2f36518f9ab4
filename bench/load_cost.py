#!/usr/bin/env python3
"""What loading libtsfuse costs models with (almost) nothing to fuse: first-call and steady-state
time of large scripted torchvision models with and without the library in the process.

    .venv/bin/python bench/load_cost.py [--build build] [--runs 5] [--calls 5] [--threads N]
                                        [--cells off,on] [--driver python|cpp] [--grad] [--json FILE]
                                        [--markdown] [MODEL ...]

Loading the library changes every TorchScript model in the process (an executor pre-pass, and
the profiled-run count set to 0 so that fused models are fused at their first call), so its cost
on models it cannot help is measured here: every cell is a fresh process (the executor keeps its
plans for the process's life), the cells of a model alternate (off on, on off, ...) so that load
from other processes on the machine falls on both alike, torch's thread count is fixed, and each
cell reports wall and process CPU time (all threads; the steadier one on a shared machine).

Per cell: the first call (the executor builds its plan there: without the library the profiling
plan; with it, for a model with something to fuse, the optimized plan and the pre-pass), the second
call (the optimized plan is built there otherwise), then the median of --calls further calls (steady
state). Inputs are fixed (saved with the model), run under torch.no_grad() (--grad: with autograd
on). --driver cpp calls the model from a LibTorch app (torch::jit::Module::forward), where the
library gives a model with nothing to fuse PyTorch's profiled first call; called from Python, the
package's hook does (cell import); the library alone leaves every model in first-call mode
(registration/first_call.h says why).

Cells: off = no libtsfuse; on = torch.ops.load_library(libtsfuse.so), defaults; import = what
`import tsfuse` does (the library, and the package's first-call hook, python/tsfuse/_first_call.py,
taken from this source tree: a scripted method with nothing to fuse keeps PyTorch's profiled first
call; Python driver only); the diagnostic cells on-profiled (TSFUSE_FIRST_CALL=0: PyTorch's profiled run kept), on-disabled (TSFUSE_DISABLE=1:
the library loaded, no pre-pass, no executor change). The executor pass's own time is read from
the library's info log in one more, untimed, process per model.

torchvision is not a project requirement: it is taken from BUILD/bench-deps or
BUILD/test-deps/torchvision-* (tests/python/pypi_deps.py installs it there), or --deps DIR.
Not part of `make test` (no timing assertions in tests): `make bench-load-cost`.
"""
import argparse
import functools
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import sysconfig
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent

# name -> (constructor, example input); detection models take a list of 3xHxW images and resize
# them to min_size..max_size themselves, so the size is set there (IMAGE: smaller than the
# torchvision default of 800 so a steady-state call takes seconds, not tens, on 2 cores).
IMAGE = 320
MODELS = {
    "resnet50": (lambda tv: tv.models.resnet50(weights=None), lambda: torch_randn(1, 3, 224, 224)),
    # Classifiers whose elementwise ops stand alone (GELU, residual adds, hardswish): nothing fuses.
    "vit_b_16": (lambda tv: tv.models.vit_b_16(weights=None), lambda: torch_randn(1, 3, 224, 224)),
    "mobilenet_v3_large": (lambda tv: tv.models.mobilenet_v3_large(weights=None), lambda: torch_randn(1, 3, 224, 224)),
    "ssdlite320_mobilenet_v3_large": (
        lambda tv: tv.models.detection.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None),
        lambda: [torch_rand(3, IMAGE, IMAGE)]),
    "retinanet_resnet50_fpn": (
        lambda tv: tv.models.detection.retinanet_resnet50_fpn(weights=None, weights_backbone=None,
                                                               min_size=IMAGE, max_size=IMAGE),
        lambda: [torch_rand(3, IMAGE, IMAGE)]),
    "maskrcnn_resnet50_fpn": (
        lambda tv: tv.models.detection.maskrcnn_resnet50_fpn(weights=None, weights_backbone=None,
                                                              min_size=IMAGE, max_size=IMAGE),
        lambda: [torch_rand(3, IMAGE, IMAGE)]),
}

# cell -> (libtsfuse loaded, environment, the package's first-call hook installed)
CELLS = {
    "off": (False, {}, False),
    "on": (True, {}, False),
    "import": (True, {}, True),
    "on-profiled": (True, {"TSFUSE_FIRST_CALL": "0"}, False),
    "on-disabled": (True, {"TSFUSE_DISABLE": "1"}, False),
}


def torch_randn(*shape):
    import torch
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0))


def torch_rand(*shape):
    import torch
    return torch.rand(*shape, generator=torch.Generator().manual_seed(0))


def find_torchvision(build, deps):
    if deps:
        return pathlib.Path(deps)
    for d in [build / "bench-deps", *sorted((build / "test-deps").glob("torchvision-*"))]:
        if (d / "torchvision").is_dir():
            return d
    sys.exit(f"torchvision not found in {build}/bench-deps or {build}/test-deps/torchvision-*: "
             f".venv/bin/pip install --no-deps --target {build}/bench-deps torchvision==<the release "
             f"matching torch> (tests/python/pypi_deps.py: TORCHVISION_FOR_TORCH)")


def prepare(names, outdir, tv_dir):
    """Scripts and saves each model (fixed weights) and its input, once; returns {name: dir}."""
    outdir.mkdir(parents=True, exist_ok=True)
    missing = [n for n in names if not (outdir / f"{n}.pt").exists()]
    if missing:
        code = (f"import sys, torch; sys.path.insert(0, {str(tv_dir)!r}); sys.path.insert(0, {str(ROOT / 'bench')!r})\n"
                f"import torchvision, load_cost\n"
                f"for n in {missing!r}:\n"
                f"    torch.manual_seed(0)\n"
                f"    make, example = load_cost.MODELS[n]\n"
                f"    torch.jit.script(make(torchvision).eval()).save(str({str(outdir)!r} + '/' + n + '.pt'))\n"
                f"    torch.save(example(), str({str(outdir)!r} + '/' + n + '.input.pt'))\n")
        subprocess.run([sys.executable, "-c", code], check=True)


def child(a):
    """One cell: prints a JSON line."""
    import torch
    torch.set_num_threads(a.threads)
    sys.path.insert(0, a.tv_dir)
    import torchvision  # noqa: F401  (registers torchvision::nms, roi_align, ... for the models)
    out = {"threads": torch.get_num_threads()}
    if a.lib:
        t0 = time.perf_counter()
        torch.ops.load_library(a.lib)
        if a.hook:
            import importlib.util
            spec = importlib.util.spec_from_file_location("tsfuse_first_call", ROOT / "python/tsfuse/_first_call.py")
            hook = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(hook)
            hook.install()
        out["load_ms"] = (time.perf_counter() - t0) * 1e3
    m = torch.jit.load(a.model)
    x = torch.load(a.input)
    args = (x,)

    def call():
        t0, c0 = time.perf_counter(), time.process_time()
        m(*args)
        return (time.perf_counter() - t0) * 1e3, (time.process_time() - c0) * 1e3

    ctx = torch.enable_grad() if a.grad else torch.no_grad()
    with ctx:
        out["first"] = call()
        out["second"] = call()
        steady = [call() for _ in range(a.calls)]
    out["steady"] = [statistics.median(w for w, _ in steady), statistics.median(c for _, c in steady)]
    g = str(torch.jit.last_executed_optimized_graph())
    out["tsfuse_ops"] = len(re.findall(r"tsfuse::(?:pairwise|reduce|reduce_with_indices|softmax)\(", g))
    out["graph_nodes"] = g.count("\n")
    print("RESULT " + json.dumps(out))


@functools.lru_cache(maxsize=None)
def torch_dir():
    p = subprocess.run([sys.executable, "-c", "import os, torch; print(os.path.dirname(torch.__file__))"],
                       check=True, capture_output=True, text=True)
    return p.stdout.strip()


def run_cell(a, name, cell, paths, tv_dir, log=False):
    lib, env_extra, hook = CELLS[cell]
    env = dict(os.environ)
    env.update(env_extra)
    # Every cell sees the same library-independent environment.
    for k in ("TSFUSE_FIRST_CALL", "TSFUSE_DISABLE", "TSFUSE_PASSES", "TSFUSE_LOG_LEVEL"):
        if k not in env_extra:
            env.pop(k, None)
    if log:
        env["TSFUSE_LOG_LEVEL"] = "info"
    model, inputs, tsfuse_so = paths / f"{name}.pt", paths / f"{name}.input.pt", a.build / "lib" / "libtsfuse.so"
    if a.driver == "cpp":
        # torchvision's _C.so links libtorch_python, which needs libpython's symbols (its ops do not
        # call Python); the app loads both first, with torch's lib folder on the search path.
        libpython = pathlib.Path(sysconfig.get_config_var("LIBDIR")) / sysconfig.get_config_var("INSTSONAME")
        env["LD_LIBRARY_PATH"] = str(pathlib.Path(torch_dir()) / "lib")
        cmd = [str(a.build / "bin" / "tsfuse_load_cost_app"), str(model), str(inputs), str(a.threads), str(a.calls),
               "--lib", str(libpython), "--lib", str(tv_dir / "torchvision" / "_C.so")]
        cmd += ["--lib", str(tsfuse_so)] if lib else []
    else:
        cmd = [sys.executable, __file__, "--child", "--threads", str(a.threads), "--calls", str(a.calls),
               "--model", str(model), "--input", str(inputs), "--tv-dir", str(tv_dir)]
        if lib:
            cmd += ["--lib", str(tsfuse_so)]
        if hook:
            cmd.append("--hook")
    if a.grad:
        cmd.append("--grad")
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{name} [{cell}] failed:\n{p.stderr[-3000:]}")
    r = json.loads(next(line[7:] for line in p.stdout.splitlines() if line.startswith("RESULT ")))
    if log:
        r["pass_ms"] = [float(v) for v in re.findall(r"executor pass on .*?: ([0-9.]+) ms", p.stderr)]
    return r


def med(rs, key, i):
    return statistics.median(r[key][i] for r in rs)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=str(ROOT / "build"))
    ap.add_argument("--deps", default=None, help="folder holding torchvision")
    ap.add_argument("--runs", type=int, default=5, help="fresh processes per cell and model")
    ap.add_argument("--calls", type=int, default=5, help="steady-state calls per process (after two)")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--cells", default="off,on", help=f"comma-separated, of {', '.join(CELLS)}")
    ap.add_argument("--grad", action="store_true", help="run with autograd on instead of torch.no_grad()")
    ap.add_argument("--driver", choices=["python", "cpp"], default="python",
                    help="python: the model is called from Python (ScriptModule.__call__); cpp: from a LibTorch "
                         "app through torch::jit::Module::forward (bench/load_cost_app.cpp, built here)")
    ap.add_argument("--json", default=None, help="write the raw cells here")
    ap.add_argument("--markdown", action="store_true", help="print the summary as a markdown table")
    ap.add_argument("models", nargs="*", default=list(MODELS))
    # the child's arguments
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--lib", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--hook", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--input", help=argparse.SUPPRESS)
    ap.add_argument("--tv-dir", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child(a)

    a.build = pathlib.Path(a.build).resolve()
    cells = a.cells.split(",")
    for c in cells:
        if c not in CELLS:
            sys.exit(f"unknown cell {c!r}: {', '.join(CELLS)}")
        if CELLS[c][2] and a.driver == "cpp":
            sys.exit(f"cell {c!r} is the Python package's hook: --driver python only")
    tv_dir = find_torchvision(a.build, a.deps)
    if a.driver == "cpp":
        subprocess.run(["cmake", "--build", str(a.build), "--target", "tsfuse_load_cost_app"], check=True)
    paths = a.build / "bench" / "load_cost_models"
    prepare(a.models, paths, tv_dir)

    results = {n: {c: [] for c in cells} for n in a.models}
    pass_ms = {}
    for n in a.models:
        if "on" in cells:  # untimed: the pass's own time, from the info log
            r = run_cell(a, n, "on", paths, tv_dir, log=True)
            pass_ms[n] = sum(r["pass_ms"])
    for run in range(a.runs):
        for n in a.models:
            order = cells if run % 2 == 0 else cells[::-1]
            for c in order:
                r = run_cell(a, n, c, paths, tv_dir)
                results[n][c].append(r)
                print(f"run {run} {n:32} {c:12} first {r['first'][0]:8.0f} ms  second {r['second'][0]:8.0f} ms  "
                      f"steady {r['steady'][0]:8.0f} ms (cpu {r['steady'][1]:.0f})  tsfuse ops {r['tsfuse_ops']}",
                      flush=True)
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps({"args": {k: str(v) for k, v in vars(a).items()},
                                                    "pass_ms": pass_ms, "cells": results}, indent=1))

    base = cells[0]
    print(f"\n{a.driver} driver; medians of {a.runs} fresh processes per cell, {a.threads} threads, "
          f"{'autograd on' if a.grad else 'no_grad'}; ratios against '{base}'")
    hdr = ["model", "cell", "first ms", "first cpu ms", "second ms", "steady ms", "steady cpu ms",
           "first ratio", "paired first ratio", "first cpu ratio", "steady ratio", "steady cpu ratio", "tsfuse ops",
           "pass ms"]
    rows = []
    for n in a.models:
        b = results[n][base]
        for c in cells:
            rs = results[n][c]
            ratio = lambda key, i: med(rs, key, i) / med(b, key, i)  # noqa: E731
            # A round's cells ran back to back, so its ratio shares the machine's state of the
            # moment; on a host whose speed drifts by tens of percent, the median of those is the
            # steadier comparison.
            paired = statistics.median(r["first"][0] / q["first"][0] for r, q in zip(rs, b))
            rows.append([n, c, f"{med(rs, 'first', 0):.0f}", f"{med(rs, 'first', 1):.0f}", f"{med(rs, 'second', 0):.0f}",
                         f"{med(rs, 'steady', 0):.0f}", f"{med(rs, 'steady', 1):.0f}",
                         f"{ratio('first', 0):.3f}", f"{paired:.3f}", f"{ratio('first', 1):.3f}", f"{ratio('steady', 0):.3f}",
                         f"{ratio('steady', 1):.3f}", str(rs[0]["tsfuse_ops"]),
                         f"{pass_ms[n]:.0f}" if c == "on" and n in pass_ms else ""])
    if a.markdown:
        print("| " + " | ".join(hdr) + " |")
        print("| --- | --- |" + " ---: |" * (len(hdr) - 2))
        for r in rows:
            print("| " + " | ".join(r) + " |")
    else:
        w = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(hdr)]
        print("  ".join(h.rjust(w[i]) for i, h in enumerate(hdr)))
        for r in rows:
            print("  ".join(v.rjust(w[i]) for i, v in enumerate(r)))
    if "on" in cells:
        load = [r["load_ms"] for n in a.models for r in results[n]["on"]]
        print(f"\nload_library(libtsfuse.so): median {statistics.median(load):.1f} ms")


if __name__ == "__main__":
    main()
