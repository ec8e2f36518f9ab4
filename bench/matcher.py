"""torchvision's proposal Matcher, as the ROI heads of its two-stage detectors run it:
box_iou(gt, proposals), then Matcher(0.5, 0.4, allow_low_quality_matches=False), frozen for
deployment. Steady-state time (median) and first-call peak RSS growth, each implementation in a
fresh process: eager, TorchScript (frozen), tsfuse (optimize-ts of the frozen module: one fused
op) and torch.compile (default mode, of the eager module).

    python bench/matcher.py BUILD [--sizes 64x4000 200x100000] [--reps 50]

torchvision is the tests' PyPI copy (BUILD/test-deps, tests/python/pypi_deps.py)."""
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
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests" / "python"))
IMPLS = ["eager", "torchscript", "tsfuse", "compile"]


def module():
    import torch
    import torchvision
    from torchvision.models.detection._utils import Matcher

    class MatchProposals(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.matcher = Matcher(0.5, 0.4, allow_low_quality_matches=False)

        def forward(self, gt, proposals):
            return self.matcher(torchvision.ops.box_iou(gt, proposals))
    return MatchProposals().eval()


def inputs(n, m):
    import torch
    g = torch.Generator().manual_seed(0)

    def boxes(k):
        xy = torch.rand(k, 2, generator=g) * 800
        return torch.cat([xy, xy + 8 + torch.rand(k, 2, generator=g) * 120], 1)
    gt, proposals = boxes(n), boxes(m)
    proposals[: n // 2] = gt[: n // 2]
    return gt, proposals


def child(a):
    import torch
    from measure_memory import rss_peak_begin, rss_peak_bytes
    torch.set_grad_enabled(False)
    if a.impl == "tsfuse":
        torch.ops.load_library(str(pathlib.Path(a.build) / "lib" / "libtsfuse.so"))
    fn = {"eager": lambda: module(), "compile": lambda: torch.compile(module()),
          "torchscript": lambda: torch.jit.load(a.model), "tsfuse": lambda: torch.jit.load(a.opt)}[a.impl]()
    n, m = (int(s) for s in a.size.split("x"))
    args = inputs(n, m)
    before = rss_peak_begin()
    out = fn(*args)
    peak = rss_peak_bytes(before)
    for _ in range(3):
        fn(*args)
    times = []
    for _ in range(a.reps):
        t0 = time.perf_counter()
        fn(*args)
        times.append((time.perf_counter() - t0) * 1e3)
    same = torch.equal(out, module()(*args))
    print(json.dumps({"impl": a.impl, "size": a.size, "time_ms": statistics.median(times),
                      "first_call_peak_mib": peak / 2 ** 20, "same_as_eager": same}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--sizes", nargs="+", default=["64x4000", "200x100000"])
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--child", dest="impl")
    ap.add_argument("--size")
    ap.add_argument("--model")
    ap.add_argument("--opt")
    a = ap.parse_args()
    os.environ.setdefault("TSFUSE_BUILD", str(pathlib.Path(a.build).resolve()))
    from pypi_deps import torchvision_dir
    sys.path.insert(0, str(torchvision_dir()))
    if a.impl:
        return child(a)
    import torch
    from measure_memory import optimize_ts
    with tempfile.TemporaryDirectory() as tmp:
        model, opt = pathlib.Path(tmp) / "m.pt", pathlib.Path(tmp) / "m.opt.pt"
        torch.jit.freeze(torch.jit.script(module())).save(str(model))
        optimize_ts(a.build, model, opt)
        env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", TSFUSE_BUILD=str(pathlib.Path(a.build).resolve()))
        print("| size (gt x proposals) | impl | time (ms) | first-call peak (MiB) | same as eager |")
        print("| --- | --- | ---: | ---: | --- |")
        for size in a.sizes:
            for impl in IMPLS:
                p = subprocess.run([sys.executable, __file__, a.build, "--child", impl, "--size", size, "--model",
                                    str(model), "--opt", str(opt), "--reps", str(a.reps)],
                                   capture_output=True, text=True, env=env, check=True)
                r = json.loads(p.stdout.strip().splitlines()[-1])
                print(f"| {size} | {impl} | {r['time_ms']:.3g} | {r['first_call_peak_mib']:.1f} | {r['same_as_eager']} |")


if __name__ == "__main__":
    sys.exit(main())
