"""Every example model on a CUDA device: eager CUDA against the scripted model with libtsfuse
loaded, once on the generated CUDA kernels (the default) and once on the chunked path
(TSFUSE_CUDA_KERNELS=0), at the examples' small sizes and at a larger size. Prints one row per model, mode
and size: whether the graph fused, how many generated kernels launched (from tsfuse's debug log),
the comparison with eager and, at the larger size, CUDA-event times. Exit status 1 on a mismatch.

    TSFUSE_LIB=build/lib/libtsfuse.so python tests/gpu/cuda_models_check.py [--device cuda] [--out F.md]

A comparison is `exact` (same dtype, shape, strides and bits, NaN where eager has NaN), `close`
(float values within rtol 1e-4 / atol 1e-5: a reduction whose order differs from eager's), else a
mismatch. `--device cpu` runs the same rows on the CPU (a dry run of this script without a GPU).
"""
import argparse
import math
import os
import pathlib
import re
import statistics
import sys
import tempfile

import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "tests" / "fuzz"))
import detection_models  # noqa: E402
import reduce_models  # noqa: E402
import seed_models  # noqa: E402
from compare import compare_tensor  # noqa: E402

LAUNCH = re.compile(r"cuda: (tsf_\w+)")
DECLINE = re.compile(r"native path declined \((.*?)\); chunked")


def boxes(n, seed):
    return detection_models.xyxy_boxes(n, seed)


def sized_inputs(key, size):
    """Inputs of a detection_models INPUTS key at `size`: "medium" reaches the tiled skeletons
    (pair2 at >= 32 columns, redblock for few outputs of many elements) at sizes a sanitizer runs
    quickly; "large" is where memory and time matter."""
    n, m = {"medium": (40, 3000), "large": (4096, 2048)}[size]
    nb, mb = {"medium": (200, 300), "large": (4000, 500)}[size]
    g = lambda s: torch.Generator().manual_seed(s)  # noqa: E731
    return {
        "xyxy": lambda: (boxes(nb, 1), boxes(mb, 2)),
        "batched_xyxy": lambda: (boxes(2 * nb, 3).reshape(2, nb, 4), boxes(2 * mb, 4).reshape(2, mb, 4)),
        "xywh": lambda: (detection_models.xywh_boxes(nb, 5), detection_models.xywh_boxes(mb, 6)),
        "points2": lambda: (detection_models.points(n, 2, 7), detection_models.points(m, 2, 8), torch.rand(m, generator=g(9))),
        "points3": lambda: (detection_models.points(n, 3, 10), detection_models.points(m, 3, 11)),
        "points8": lambda: (detection_models.points(n, 8, 12), detection_models.points(m, 8, 13)),
    }[key]()


def cases():
    """(name, eager function, {size: inputs})."""
    out = []
    for name, (fn, key) in detection_models.FUNCTIONS.items():
        sizes = {"small": detection_models.INPUTS[key]}
        sizes.update({s: (lambda k=key, s=s: sized_inputs(k, s)) for s in ("medium", "large")})
        out.append((name, fn, sizes))
    for name, (cls, _) in reduce_models.MODELS.items():  # (the module: its numbers are attributes)
        out.append(("reduce." + name, cls(), {"small": lambda c=cls: tuple(c().example_inputs())}))
    g = lambda: torch.Generator().manual_seed(0)  # noqa: E731
    out.append(("seed.intersection", seed_models.intersection, {
        "small": lambda: tuple(seed_models.Intersection().example_inputs()),
        "medium": lambda: (seed_models.random_boxes(300, g()), seed_models.random_boxes(200, g())),
        "large": lambda: (seed_models.random_boxes(242991, g()), seed_models.random_boxes(500, g()))}))
    out.append(("seed.similarity", seed_models.similarity, {
        "small": lambda: tuple(seed_models.Similarity().example_inputs()),
        "medium": lambda: (torch.randn(64, 200, generator=g()), torch.randn(64, 200, generator=g())),
        "large": lambda: (torch.randn(256, 2000, generator=g()), torch.randn(256, 2000, generator=g()))}))
    return out


def flat(x):
    return list(x) if isinstance(x, (tuple, list)) else [x]


def compare(eager, got):
    """'exact', 'close (max rel err)', or a mismatch description starting with 'MISMATCH'. The
    fuzzer's rules (tests/fuzz/compare.py) decide dtype, shape, layout, NaN and infinity positions
    and bit-exactness; what is left is how far float values are apart."""
    worst = "exact"
    for e, o in zip(flat(eager), flat(got), strict=True):
        problem = compare_tensor(e, o, math.inf)  # everything but the finite values' distance
        if problem:
            return "MISMATCH " + problem
        if e.numel() > 1 and e.stride() != o.stride():  # every stride, size-1 dims' too
            return f"MISMATCH strides {e.stride()} vs {o.stride()}"
        if compare_tensor(e, o, 0.0) is None:
            continue
        if not torch.allclose(o, e, rtol=1e-4, atol=1e-5, equal_nan=True):
            bad = ~(torch.isclose(o.double(), e.double(), rtol=1e-4, atol=1e-5, equal_nan=True))
            i = int(bad.flatten().nonzero()[0])
            return f"MISMATCH at {i}: eager {e.flatten()[i].item()!r} tsfuse {o.flatten()[i].item()!r}"
        finite = torch.isfinite(e) & torch.isfinite(o)
        rel = ((o.double() - e.double()).abs() / e.double().abs().clamp_min(1e-30))[finite]
        worst = "close (max rel %.1e)" % (rel.max().item() if rel.numel() else 0.0)
    return worst


class StderrCapture:
    """tsfuse logs through spdlog on fd 2: point fd 2 at a file around a call and read it back."""

    def __enter__(self):
        sys.stderr.flush()
        self.file = tempfile.TemporaryFile(mode="w+")
        self.saved = os.dup(2)
        os.dup2(self.file.fileno(), 2)
        return self

    def __exit__(self, *exc):
        sys.stderr.flush()
        os.dup2(self.saved, 2)
        os.close(self.saved)
        self.file.seek(0)
        self.text = self.file.read()
        self.file.close()


def cuda_ms(fn, args, reps=10):
    for _ in range(2):
        fn(*args)
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*args)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def run_case(name, fn, args, device, kernels, timed):
    os.environ["TSFUSE_CUDA_KERNELS"] = "1" if kernels else "0"
    args = tuple(a.to(device) for a in args)
    with torch.no_grad():
        ref = fn(*args)
        scripted = torch.jit.script(fn)
        with StderrCapture() as cap:
            for _ in range(3):  # the profiling executor optimizes on a later call
                got = scripted(*args)
            if device.type == "cuda":
                torch.cuda.synchronize()
        graph = str(torch.jit.last_executed_optimized_graph())
        fused = "tsfuse::" in graph
        launches = sorted(set(LAUNCH.findall(cap.text)))
        declines = sorted(set(DECLINE.findall(cap.text)))
        verdict = compare(ref, got)
        times = ""
        if timed and device.type == "cuda":
            times = "%.3f / %.3f" % (cuda_ms(fn, args), cuda_ms(scripted, args))
    return fused, launches, declines, verdict, times


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out")
    ap.add_argument("--only", help="regex of case names")
    ap.add_argument("--sizes", default="small,large", help="comma-separated: small, medium, large")
    a = ap.parse_args()
    os.environ["TSFUSE_LOG_LEVEL"] = "debug"  # read when the library loads
    torch.ops.load_library(os.environ.get("TSFUSE_LIB", str(ROOT / "build" / "lib" / "libtsfuse.so")))
    device = torch.device(a.device)
    name_dev = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"
    lines = [f"## Example models on {name_dev}, torch {torch.__version__}", "",
             "| model | size | path | fused | kernels launched | vs eager | eager / tsfuse ms |",
             "| --- | --- | --- | --- | ---: | --- | --- |"]
    failures, declined = 0, {}
    for name, fn, sizes in cases():
        if a.only and not re.search(a.only, name):
            continue
        for size in [s for s in a.sizes.split(",") if s in sizes]:
            args = sizes[size]()
            for kernels in (True, False):
                try:
                    fused, launches, declines, verdict, times = run_case(name, fn, args, device, kernels,
                                                                         size == "large")
                except Exception as exc:  # noqa: BLE001 - an error is a row, not the end of the run
                    fused, launches, declines, verdict, times = False, [], [], f"MISMATCH error {exc!r:.200}", ""
                failures += verdict.startswith("MISMATCH")
                for d in declines:
                    declined.setdefault(d, set()).add(name)
                path = "kernels" if kernels else "chunked"
                shape = "x".join(str(tuple(t.shape)) for t in args)
                lines.append(f"| {name} | {size} {shape} | {path} | {fused} | {len(launches)} | {verdict} | {times} |")
                print(lines[-1], flush=True)
    lines += ["", "Declined to the chunked path (reason: models):", ""]
    lines += [f"- {why}: {', '.join(sorted(names))}" for why, names in sorted(declined.items())]
    lines += ["", f"{failures} mismatches"]
    text = "\n".join(lines) + "\n"
    print("\n".join(lines[-len(declined) - 4:]))
    if a.out:
        pathlib.Path(a.out).write_text(text)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
