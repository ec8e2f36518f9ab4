"""The real-model corpus (entries.py) at realistic sizes: what fuses, first-call peak memory and
steady-state time of eager / TorchScript / tsfuse / torch.compile; writes the table of docs/corpus.md.

    .venv/bin/python bench/corpus/bench.py [--build build] [--only NAME...] [--json FILE] [--doc docs/corpus.md]

Steps: worker.py export --size bench (the scripted/traced modules, eager's outputs); optimize-ts
--report on each (what fused, what was rejected and why); then one fresh process per (entry,
implementation) that
  1. builds the callable (eager: the library code; torchscript: the saved .pt, no libtsfuse in
     the process; tsfuse: libtsfuse loaded, the optimize-ts output; compile: torch.compile of the
     eager callable) and the seed-0 inputs;
  2. measures the FIRST call's peak RSS growth (bench/measure_memory.py's method: clear_refs,
     VmHWM - VmRSS before; the output is part of the peak) and the CPU allocator's peak over it
     (bench/memprobe.cpp: tensors and tsfuse's scratch, without TorchScript's graphs, code pages
     and thread stacks) - not for compile, whose first call compiles;
  3. times the steady state: 2 warm-up calls, then the median of up to 10 calls (at least 3, stop
     after 5 s), wall time and process CPU time (all threads; the machine is shared, CPU time is
     the steadier number);
  4. compares its output with eager's (0 = torch.equal).
"""
import argparse
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests" / "python"))

IMPLS = ("eager", "torchscript", "tsfuse", "compile")
MIB = 1024.0 * 1024.0


def child(a) -> int:
    import warnings
    warnings.filterwarnings("ignore")
    import torch
    import entries
    import worker
    from measure_memory import rss_peak_begin, rss_peak_bytes

    torch.set_grad_enabled(False)
    e = entries.BY_NAME[a.entry]
    stem = pathlib.Path(a.dir) / worker.slug(e.name)
    if e.needs_torchvision_ops:
        import torchvision  # noqa: F401  torchvision::nms for the saved detectors
    if a.impl == "tsfuse":
        torch.ops.load_library(a.lib)
    if a.impl in ("eager", "compile"):
        fn = entries.make(e)
        if a.impl == "compile":
            fn = torch.compile(fn)
    else:
        fn = torch.jit.load(f"{stem}.opt.pt" if a.impl == "tsfuse" else f"{stem}.pt")
    inputs = entries.inputs(e, "bench", 0)

    row = {"name": e.name, "impl": a.impl}
    probe = pathlib.Path(a.lib).with_name("libtsfuse_memprobe.so")
    counting = a.impl != "compile" and probe.exists()
    if counting:  # the allocator's count besides the resident set's (bench/memprobe.cpp)
        torch.ops.load_library(str(probe))
        torch.ops.tsfuse_memprobe.begin()
    before = rss_peak_begin()
    t0 = time.perf_counter()
    out = fn(*inputs)
    row["first_call_ms"] = (time.perf_counter() - t0) * 1e3
    if a.impl != "compile":
        row["peak_mib"] = rss_peak_bytes(before) / MIB
    if counting:
        row["alloc_peak_mib"] = torch.ops.tsfuse_memprobe.peak() / MIB
    for _ in range(2):
        fn(*inputs)
    walls, cpus = [], []
    start = time.perf_counter()
    while len(walls) < 10 and (len(walls) < 3 or time.perf_counter() - start < 5.0):
        w0, c0 = time.perf_counter(), time.process_time()
        fn(*inputs)
        walls.append((time.perf_counter() - w0) * 1e3)
        cpus.append((time.process_time() - c0) * 1e3)
    row.update(time_ms=statistics.median(walls), cpu_ms=statistics.median(cpus), calls=len(walls))
    ref = torch.load(f"{stem}.ref.pt", weights_only=False)
    row["diff_vs_eager"] = worker.max_diff(ref["eager"][0], out)
    row["out_mib"] = sum(t.numel() * t.element_size() for t in worker.tensors(out)) / MIB
    row["in_mib"] = sum(t.numel() * t.element_size() for t in inputs) / MIB
    print(json.dumps(row), flush=True)
    return 0


def run_child(env, impl, name, folder, lib, timeout):
    cmd = [sys.executable, __file__, "--child", impl, "--entry", name, "--dir", str(folder), "--lib", str(lib)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"name": name, "impl": impl, "error": f"timeout ({timeout} s)"}
    lines = [line for line in p.stdout.splitlines() if line.startswith("{")]
    if p.returncode != 0 or not lines:
        last = (p.stderr.strip().splitlines() or ["?"])[-1]
        return {"name": name, "impl": impl, "error": last[:160]}
    return json.loads(lines[-1])


def optimize(build, env, folder, e, worker):
    stem = folder / worker.slug(e.name)
    cmd = [str(build / "bin" / "optimize-ts"), "-q", "--report", f"{stem}.json", f"{stem}.pt", f"{stem}.opt.pt"]
    if e.needs_torchvision_ops:
        cmd[1:1] = ["--library", str(pathlib.Path(env["PYTHONPATH"].split(os.pathsep)[0]) / "torchvision" / "_C.so")]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)
    if p.returncode != 0:
        return {"error": (p.stderr.strip().splitlines() or ["?"])[-1]}
    return summarize(pathlib.Path(f"{stem}.json"))


def summarize(report: pathlib.Path) -> dict:
    """What an optimize-ts --report says of the forward graph: fused ops and rejection reasons."""
    import entries
    doc = json.loads(report.read_text())
    fused, rejected = {}, {}
    for ev in doc["events"]:
        if ev.get("graph") != "forward":
            continue
        if ev["kind"] == "rewrite":
            op = ev["fused_op"]
            # tsfuse's fused ops only: not the passes' helpers, not canonicalize's rewrites
            if op.startswith("tsfuse::") and entries.is_fused_op(op[len("tsfuse::"):]):
                fused[op[len("tsfuse::"):]] = fused.get(op[len("tsfuse::"):], 0) + 1
            # a rewrite that consumes an earlier fused op (nest_reductions) replaces it
            for node in ev["nodes"]:
                kind = node.split(" @ ")[0]
                if kind.startswith("tsfuse::") and kind[len("tsfuse::"):] in fused:
                    fused[kind[len("tsfuse::"):]] -= 1
        elif ev["kind"] == "reject":
            # the reason without value names and source locations, so equal reasons count together
            why = re.sub(r"%[\w.]+", "%v", ev["reason"].split(" (at ")[0])
            rejected[why] = rejected.get(why, 0) + 1
    return {"fused": {k: v for k, v in fused.items() if v}, "rejected": rejected}


def _fmt(v, digits=1):
    if v is None:
        return "-"
    if v >= 100:
        return f"{v:.0f}"
    return f"{v:.{digits}f}"


def table(results, alloc: bool = False) -> str:
    """The rows of `results`; alloc: with the allocator's peaks and the second corpus's bar."""
    head = ("| entry | mode | fused | peak MiB eager / TS / tsfuse | "
            + ("allocator peak MiB eager / TS / tsfuse (bar) | " if alloc else "")
            + "time ms eager / TS / tsfuse / compile "
            "| CPU ms eager / TS / tsfuse / compile | tsfuse vs compile (CPU) | max diff to eager TS / tsfuse |")
    lines = [head, "|" + " --- |" * (9 if alloc else 8)]
    for r in results:
        cells = {i: r["cells"].get(i, {}) for i in IMPLS}

        def get(impl, key):
            return cells[impl].get(key)

        fused = ", ".join(f"{v} {k}" for k, v in sorted(r["optimize"].get("fused", {}).items())) or "-"
        peaks = " / ".join(_fmt(get(i, "peak_mib")) for i in IMPLS[:3])
        times = " / ".join(_fmt(get(i, "time_ms"), 2) if "error" not in cells[i] else "err" for i in IMPLS)
        cpus = " / ".join(_fmt(get(i, "cpu_ms"), 2) if "error" not in cells[i] else "err" for i in IMPLS)
        ratio = "-"
        if get("tsfuse", "cpu_ms") and get("compile", "cpu_ms"):
            ratio = f"{get('tsfuse', 'cpu_ms') / get('compile', 'cpu_ms'):.2f}x"
        diffs = " / ".join("-" if get(i, "diff_vs_eager") is None else f"{get(i, 'diff_vs_eager'):.2g}"
                           for i in ("torchscript", "tsfuse"))
        allocs = ""
        if alloc:
            bar = peak_budget(r)
            allocs = " / ".join(_fmt(get(i, "alloc_peak_mib")) for i in IMPLS[:3]) + (f" ({_fmt(bar)})" if bar else "") + " | "
        lines.append(f"| {r['name']} | {r['mode']} | {fused} | {peaks} | {allocs}{times} | {cpus} | {ratio} | {diffs} |")
    return "\n".join(lines)


def peak_budget(r):
    """The second corpus's memory bar for the allocator's first-call peak: output + inputs + 2 MiB
    (None where not measured)."""
    cell = r["cells"].get("tsfuse", {})
    if cell.get("out_mib") is None:
        return None
    return cell["out_mib"] + cell["in_mib"] + 2.0


def summary(results) -> str:
    """Issue 50's bars over a corpus: the tsfuse / compile CPU-time ratios (median, worst) and the
    first-call peak against output + inputs + 2 MiB and against plain TorchScript's."""
    ratios, over_budget, over_ts = [], [], []
    for r in results:
        c = {i: r["cells"].get(i, {}) for i in IMPLS}
        if c["tsfuse"].get("cpu_ms") and c["compile"].get("cpu_ms"):
            ratios.append((c["tsfuse"]["cpu_ms"] / c["compile"]["cpu_ms"], r["name"]))
        alloc, budget = c["tsfuse"].get("alloc_peak_mib"), peak_budget(r)
        if alloc is not None and budget is not None and alloc > budget:
            over_budget.append(f"{r['name']} ({alloc:.1f} > {budget:.1f} MiB)")
        peak, ts = c["tsfuse"].get("peak_mib"), c["torchscript"].get("peak_mib")
        if peak is not None and ts is not None and peak > ts:
            over_ts.append(f"{r['name']} ({peak:.1f} > {ts:.1f} MiB)")
    if not ratios:
        return "no measurements"
    worst = max(ratios)
    lines = [f"- tsfuse / compile CPU time over {len(ratios)} entries: median "
             f"{statistics.median(r for r, _ in ratios):.2f}x, worst {worst[0]:.2f}x ({worst[1]}); above 1.5x: "
             + (", ".join(f"{n} {x:.2f}x" for x, n in sorted(ratios, reverse=True) if x > 1.5) or "none"),
             "- first-call allocator peak above output + inputs + 2 MiB: " + (", ".join(over_budget) or "none"),
             "- first-call resident peak above plain TorchScript's: " + (", ".join(over_ts) or "none")]
    return "\n".join(lines)


def rejections(results) -> str:
    out = []
    for r in results:
        rej = r["optimize"].get("rejected", {})
        if rej:
            top = sorted(rej.items(), key=lambda kv: -kv[1])[:3]
            out.append(f"- **{r['name']}**: " + "; ".join(f"{n}x {why}" for why, n in top))
    return "\n".join(out)


def write_doc(doc, results, meta):
    """Replaces the generated parts of `doc` (between the BEGIN/END markers), keeping the prose."""
    import entries
    parts = {"meta": meta}
    for corpus, prefix in (("first", ""), ("second", "second-")):
        rows = [r for r in results if r["name"] in entries.BY_NAME and entries.BY_NAME[r["name"]].corpus == corpus]
        parts.update({prefix + "table": table(rows, alloc=corpus == "second"), prefix + "rejections": rejections(rows),
                      prefix + "summary": summary(rows),
                      prefix + "notes": "\n".join(f"- **{r['name']}** ({r['library']}): {r['note']}" for r in rows)})
    text = doc.read_text()
    for key, body in parts.items():
        text = re.sub(rf"(<!-- BEGIN {key} -->\n).*?(<!-- END {key} -->)", lambda m: m.group(1) + body + "\n" + m.group(2),
                      text, flags=re.S)
    doc.write_text(text)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.environ.get("TSFUSE_BUILD", str(ROOT / "build")))
    ap.add_argument("--only", nargs="*", help="entry names (default: all)")
    ap.add_argument("--impls", nargs="*", default=list(IMPLS), choices=IMPLS)
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--doc", help="update the generated sections of this markdown file (docs/corpus.md)")
    ap.add_argument("--workdir", help="keep the models here (default: a temporary folder)")
    ap.add_argument("--compile-timeout", type=int, default=600)
    ap.add_argument("--from-json", help="no measuring: render --doc / the table from a --json file")
    ap.add_argument("--child", choices=IMPLS, help=argparse.SUPPRESS)
    ap.add_argument("--entry", help=argparse.SUPPRESS)
    ap.add_argument("--dir", help=argparse.SUPPRESS)
    ap.add_argument("--lib", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        a.impl = a.child
        return child(a)

    if a.from_json:
        doc = json.loads(pathlib.Path(a.from_json).read_text())
        if a.doc:
            write_doc(pathlib.Path(a.doc), doc["results"], doc["meta"])
        print(table(doc["results"], alloc=True))
        return 0

    import pypi_deps
    import torch
    build = pathlib.Path(a.build).resolve()
    os.environ["TSFUSE_BUILD"] = str(build)
    lib = pathlib.Path(os.environ.get("TSFUSE_LIB", build / "lib" / "libtsfuse.so"))
    env = pypi_deps.torchvision_env(pypi_deps.torchvision_dir(), pypi_deps.corpus_dir())
    sys.path[:0] = env["PYTHONPATH"].split(os.pathsep)[:2]
    import entries
    import worker
    chosen = [entries.BY_NAME[n] for n in a.only] if a.only else entries.ENTRIES
    with tempfile.TemporaryDirectory(prefix="tsfuse-corpus-") as tmp:
        folder = pathlib.Path(a.workdir or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, str(HERE / "worker.py"), "export", "--size", "bench", str(folder),
                        *[e.name for e in chosen]], check=True, env=env, stdout=subprocess.DEVNULL)
        results = []
        for e in chosen:
            r = {"name": e.name, "library": e.library, "mode": e.mode, "note": e.note,
                 "optimize": optimize(build, env, folder, e, worker), "cells": {}}
            for impl in a.impls:
                timeout = a.compile_timeout if impl == "compile" else 900
                r["cells"][impl] = run_child(env, impl, e.name, folder, lib, timeout)
            print(json.dumps(r), flush=True)
            results.append(r)
    meta = (f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} CPUs; "
            f"measured {time.strftime('%Y-%m-%d')}; libraries: "
            + ", ".join(f"{k} {v}" for k, v in pypi_deps.CORPUS_PACKAGES.items())
            + f", torchvision {pypi_deps.TORCHVISION_FOR_TORCH.get('.'.join(torch.__version__.split('.')[:2]))}")
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps({"meta": meta, "results": results}, indent=1) + "\n")
    if a.doc:
        write_doc(pathlib.Path(a.doc), results, meta)
    print(table(results, alloc=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
