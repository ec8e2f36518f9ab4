#!/usr/bin/env python3
"""The pass pipeline's own time (tsfuse::optimize on every method) on large real graphs: scripted
torchvision ResNet-50 and detection models. Not part of `make test` (no timing in CI).

    .venv/bin/python bench/pipeline_time.py [--build build] [--runs 7] [--dump DIR] [MODEL ...]

torchvision is not a project requirement: it is found as bench/load_cost.py finds it
(BUILD/bench-deps, BUILD/test-deps/torchvision-*, or --deps DIR); the torch in .venv stays as pinned.

The timing itself is C++ (bench/pipeline_time.cpp, built here as the target tsfuse_pipeline_time
and loaded with ctypes): this process imports torchvision so its ops (nms, roi_align, ...) are
registered when the C++ side loads the scripted detection models. Prints, per model, the median
pipeline time over the runs and each pass's median; --dump DIR writes each model's events and final
graphs (compare two builds with diff -r).
"""
import argparse
import ctypes
import json
import pathlib
import statistics
import subprocess
import sys

from load_cost import find_torchvision

ROOT = pathlib.Path(__file__).resolve().parent.parent

MODELS = {
    "resnet50": lambda tv: tv.models.resnet50(weights=None),
    "ssdlite320_mobilenet_v3_large": lambda tv: tv.models.detection.ssdlite320_mobilenet_v3_large(
        weights=None, weights_backbone=None),
    "retinanet_resnet50_fpn": lambda tv: tv.models.detection.retinanet_resnet50_fpn(
        weights=None, weights_backbone=None),
    "maskrcnn_resnet50_fpn": lambda tv: tv.models.detection.maskrcnn_resnet50_fpn(
        weights=None, weights_backbone=None),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=str(ROOT / "build"))
    ap.add_argument("--deps", default=None, help="folder holding torchvision (default: as bench/load_cost.py finds it)")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--dump", default=None)
    ap.add_argument("--json", default=None, help="write the raw results here")
    ap.add_argument("models", nargs="*", default=list(MODELS), help="names above, or saved .pt files")
    a = ap.parse_args()
    build = pathlib.Path(a.build).resolve()
    sys.path.insert(0, str(find_torchvision(build, a.deps)))
    import torch
    import torchvision

    subprocess.run(["cmake", "--build", str(build), "--target", "tsfuse_pipeline_time"], check=True,
                   stdout=subprocess.DEVNULL)
    lib = ctypes.CDLL(str(build / "lib" / "libtsfuse_pipeline_time.so"))
    lib.tsfuse_pipeline_time.restype = ctypes.c_char_p
    lib.tsfuse_pipeline_time.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p]

    models_dir = build / "bench" / "pipeline_models"
    models_dir.mkdir(parents=True, exist_ok=True)
    if a.dump:
        pathlib.Path(a.dump).mkdir(parents=True, exist_ok=True)
    results = {}
    print(f"torch {torch.__version__}, torchvision {torchvision.__version__}, {a.runs} runs per model")
    print(f"{'model':32} {'nodes':>6} {'events':>6} {'median ms':>10}  per pass (median ms)")
    for name in a.models:
        path = pathlib.Path(name) if name.endswith(".pt") else models_dir / f"{name}.pt"
        name = path.stem
        if not path.exists():
            torch.jit.save(torch.jit.script(MODELS[name](torchvision).eval()), str(path))
        dump = str(pathlib.Path(a.dump) / f"{name}.txt") if a.dump else ""
        r = json.loads(lib.tsfuse_pipeline_time(str(path).encode(), a.runs, dump.encode()))
        if "error" in r:
            sys.exit(f"{name}: {r['error']}")
        results[name] = r
        passes = ", ".join(f"{p} {statistics.median(v):.1f}" for p, v in r["passes_ms"].items())
        print(f"{name:32} {r['nodes_after']:>6} {r['events']:>6} {statistics.median(r['runs_ms']):>10.1f}  {passes}")
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
