"""Regenerates docs/benchmarks.md (+ PNG plots in docs/benchmarks/) from the suite's results.

    .venv/bin/python bench/report.py [--results build/bench/results.json]
                                     [--micro build/bench/microbench.json] [--micro-baseline FILE]
                                     [--out docs/benchmarks.md] [--notes bench/notes.md]

The hand-written analysis (why tsfuse wins or loses where it does) lives in bench/notes.md and is
copied into the page verbatim; everything else is generated.
"""
import argparse
import json
import pathlib
import platform
import sys

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from suite import IMPLS  # noqa: E402
from workloads import BY_NAME, WORKLOADS  # noqa: E402

MIB = 2.0 ** 20


def fmt_ms(v):
    if v is None:
        return "—"
    return f"{v:.3g}" if v < 100 else f"{v:.0f}"


def fmt_mib(b):
    return "—" if b is None else f"{b / MIB:.1f}"


def size_key(s):
    n = 1
    for x in s.split("x"):
        n *= int(x)
    return n


def acceptance(rows, device):
    """Per seed workload and size: tsfuse (optimize-ts) against torch.compile."""
    out = []
    by = {(r["workload"], r["size"], r["impl"]): r for r in rows if r["device"] == device}
    for w in WORKLOADS:
        if not w.seed:
            continue
        for size in sorted({r["size"] for r in rows if r["workload"] == w.name}, key=size_key):
            t = by.get((w.name, size, "tsfuse-optimize-ts"))
            c = by.get((w.name, size, "compile"))
            if not t or not c or t.get("time_ms") is None or c.get("time_ms") is None:
                continue
            out.append((w.name, size, t["time_ms"] / c["time_ms"],
                        (t.get("cpu_ms") or 0) / (c.get("cpu_ms") or 1),
                        t["first_call_ms"] / c["first_call_ms"], t["peak_bytes"] / max(1, t["output_bytes"])))
    return out


def plot(rows, w, device, outdir):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for impl in IMPLS:
        pts = sorted(((size_key(r["size"]), r) for r in rows if r["workload"] == w.name and r["impl"] == impl
                      and r["device"] == device and r.get("time_ms") is not None), key=lambda p: p[0])
        if not pts:
            continue
        xs = [p[0] for p in pts]
        axes[0].plot(xs, [p[1]["time_ms"] for p in pts], marker="o", label=impl)
        axes[1].plot(xs, [max(p[1]["peak_bytes"], 1) / MIB for p in pts], marker="o", label=impl)
    for ax, title in zip(axes, ("steady-state time (ms, median)", "peak memory of a call (MiB)")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel(f"problem size ({w.size_label}, product)")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle(f"{w.title} — {device}")
    fig.tight_layout()
    outdir.mkdir(parents=True, exist_ok=True)
    path = outdir / f"{w.name}_{device}.png"
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


def micro_table(micro, baseline):
    if not micro:
        return []
    base = {b["name"]: b for b in (baseline or {}).get("benchmarks", [])}
    lines = ["| benchmark | CPU time | items/s (M) | SSE2 loops: CPU time | AVX2 speed-up |", "| --- | ---: | ---: | ---: | ---: |"]
    for b in micro.get("benchmarks", []):
        unit = b.get("time_unit", "ns")
        o = base.get(b["name"])
        sse = f"{o['cpu_time']:.3g} {unit}" if o else "—"
        up = f"{o['cpu_time'] / b['cpu_time']:.2f}x" if o else "—"
        lines.append(f"| {b['name']} | {b['cpu_time']:.3g} {unit} | {b.get('items_per_second', 0) / 1e6:.0f} | {sse} | {up} |")
    ctx = micro.get("context", {})
    lines.append("")
    lines.append(f"One thread; {ctx.get('num_cpus', '?')} CPUs at {ctx.get('mhz_per_cpu', '?')} MHz, load average "
                 f"{', '.join(f'{x:.1f}' for x in ctx.get('load_avg', []))} while it ran.")
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", default=str(ROOT / "build" / "bench" / "results.json"))
    ap.add_argument("--micro", default=str(ROOT / "build" / "bench" / "microbench.json"))
    ap.add_argument("--micro-baseline", default=str(ROOT / "build" / "bench" / "microbench_baseline.json"))
    ap.add_argument("--notes", default=str(HERE / "notes.md"))
    ap.add_argument("--out", default=str(ROOT / "docs" / "benchmarks.md"))
    a = ap.parse_args(argv)
    rows = json.loads(pathlib.Path(a.results).read_text())
    load = lambda p: json.loads(pathlib.Path(p).read_text()) if pathlib.Path(p).exists() else None  # noqa: E731
    micro, micro_base = load(a.micro), load(a.micro_baseline)
    out = pathlib.Path(a.out)
    imgdir = out.parent / "benchmarks"
    devices = sorted({r["device"] for r in rows})
    threads = sorted({r.get("threads") for r in rows if r.get("threads")})

    L = ["# Benchmarks", "",
         "Generated by `make bench` (`bench/suite.py` then `bench/report.py`; the analysis section is "
         "`bench/notes.md`). Raw cells: `build/bench/results.json`.", "",
         f"Machine: {platform.machine()}, {platform.processor() or 'CPU'}, torch threads {threads}. "
         "Every cell is a fresh process. time = median wall time of a steady-state call; cpu = median "
         "process CPU time of a call (all threads); first = the first call in the process (torch.compile: "
         "includes compiling from an empty inductor cache; TorchScript: the profiling run); peak = peak "
         "memory growth during one steady-state call (CPU: RSS; CUDA: allocator), first-peak = the same "
         "for the first call; tsfuse ops = fused `tsfuse::` nodes in the executed optimized graph (0 = not fused; the `tsfuse::broadcast_*` view helpers are not counted).",
         ""]
    if pathlib.Path(a.notes).exists():
        L += [pathlib.Path(a.notes).read_text().rstrip(), ""]
    for device in devices:
        acc = acceptance(rows, device)
        if acc:
            L += [f"## Acceptance ({device}): tsfuse (optimize-ts) vs torch.compile on the seed workloads", "",
                  "| workload | size | time ratio (≤ 0.75) | cpu ratio | first-call ratio (≤ 0.1) | peak / output (≤ 1.1) |",
                  "| --- | --- | ---: | ---: | ---: | ---: |"]
            for name, size, tr, cr, fr, pr in acc:
                ok = lambda v, lim: f"{v:.2f} {'✓' if v <= lim else '✗'}"  # noqa: E731
                L.append(f"| {name} | {size} | {ok(tr, 0.75)} | {cr:.2f} | {ok(fr, 0.1)} | {ok(pr, 1.1)} |")
            L.append("")
        for w in WORKLOADS:
            wr = [r for r in rows if r["workload"] == w.name and r["device"] == device]
            if not wr:
                continue
            L += [f"## {w.title} ({device})", "", f"`{w.name}`, size = {w.size_label}.", ""]
            png = plot(rows, w, device, imgdir)
            if png:
                L += [f"![{w.name}](benchmarks/{png.name})", ""]
            L += ["| size | impl | time ms | cpu ms | first ms | compile ms | peak MiB | first-peak MiB | output MiB | tsfuse ops | result |",
                  "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
            for size in sorted({r["size"] for r in wr}, key=size_key):
                for impl in IMPLS:
                    r = next((x for x in wr if x["size"] == size and x["impl"] == impl), None)
                    if r is None:
                        continue
                    if r.get("time_ms") is None:
                        L.append(f"| {size} | {impl} | {r.get('status')}: {r.get('reason', '')} | | | | | | | | |")
                        continue
                    fused = r.get("tsfuse_ops")
                    fused_s = "—" if fused is None else (str(fused) if fused else "0 (not fused)")
                    L.append(f"| {size} | {impl} | {fmt_ms(r['time_ms'])} | {fmt_ms(r.get('cpu_ms'))} | "
                             f"{fmt_ms(r['first_call_ms'])} | {fmt_ms(r.get('compile_ms'))} | {fmt_mib(r['peak_bytes'])} | "
                             f"{fmt_mib(r.get('first_call_peak_bytes'))} | {fmt_mib(r.get('output_bytes'))} | {fused_s} | "
                             f"{r.get('matches', '')} |")
            L.append("")
    mt = micro_table(micro, micro_base)
    if mt:
        L += ["## Kernel micro-benchmarks (Google Benchmark, `build/bin/tsfuse_microbench`)", "",
              "tsfuse's fused op against the same expression run op by op with eager ATen, one thread. "
              "The SSE2 column is the same binary with `TSFUSE_CPU_ISA=baseline`; the eager rows do not depend "
              "on that switch, so their ratio shows the run-to-run noise of this machine.", ""] + mt + [""]
    out.write_text("\n".join(L) + "\n")
    print(f"wrote {out}" + (f" and plots in {imgdir}" if imgdir.exists() else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
