"""The Ray Serve example (examples/serving) under load: throughput, p50/p99 latency and peak memory
per replica, serving the anchor matcher as plain TorchScript and as tsfuse's optimized model.

    .venv/bin/python bench/serving.py [--stride 8] [--gt 50] [--requests 200] [--clients 4] [--build build]

One local Ray instance (2 CPUs, no dashboard), 2 replicas of one CPU and one torch thread each;
each configuration is deployed afresh (new replica processes), warmed up, then `--requests`
requests are sent by `--clients` threads over loopback HTTP. Every response is checked against
eager PyTorch. Memory per replica: the largest peak RSS growth of one model call (the replica
resets its peak before each call, app.py), and the replica's private (anonymous) RSS between
calls: torch, Ray and the model, not the shared object-store pages its responses pass through
(MALLOC_MMAP_THRESHOLD_=65536 in the replicas, so that freed buffers leave the RSS). A replica's
peak is about the sum of the two.
"""
import argparse
import importlib.util
import pathlib
import sys
import tempfile
import threading
import time
import warnings

warnings.simplefilter("ignore", DeprecationWarning)  # torch.jit.script / load in torch >= 2.11
ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples" / "serving"))

import torch  # noqa: E402

import client  # noqa: E402
import matcher  # noqa: E402
import protocol  # noqa: E402

CONFIGS = [("TorchScript, no tsfuse", "matcher.pt", False),
           ("tsfuse, ahead of time (tsfuse.optimize'd model)", "matcher.opt.pt", True),
           ("tsfuse, load-time pass (plain model, replica imports tsfuse)", "matcher.pt", True)]


def run_config(url, model, use_tsfuse, anchors, args):
    client.deploy(str(model), use_tsfuse=use_tsfuse, replicas=2)
    inputs = [matcher.random_gt(args.gt, seed=i) for i in range(16)]
    wants = [matcher.reference(anchors, gt) for gt in inputs]
    for i in range(8):  # warm-up: first calls (the executor's profiling runs) on both replicas
        client.post(url, inputs[i % len(inputs)], timeout=600)
    latencies, peaks, rss, fused, wrong = [], {}, {}, set(), []
    lock = threading.Lock()

    def worker(k):
        for i in range(k, args.requests, args.clients):
            gt = inputs[i % len(inputs)]
            t0 = time.perf_counter()
            vals, matches, h = client.post(url, gt, timeout=600)
            dt = time.perf_counter() - t0
            want_vals, want_matches = wants[i % len(inputs)]
            with lock:
                latencies.append(dt)
                pid = int(h[protocol.PID])
                peaks[pid] = max(peaks.get(pid, 0), int(h[protocol.CALL_PEAK_KB]))
                rss[pid] = max(rss.get(pid, 0), int(h[protocol.PRIVATE_RSS_KB]))
                fused.add(h[protocol.FUSED])
                if not (torch.equal(vals, want_vals) and torch.equal(matches, want_matches)):
                    wrong.append(i)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(args.clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    latencies.sort()
    return {
        "throughput": args.requests / wall,
        "p50_ms": 1e3 * latencies[len(latencies) // 2],
        "p99_ms": 1e3 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
        "call_peak_mib": [round(v / 1024, 1) for _, v in sorted(peaks.items())],
        "rss_mib": [round(v / 1024) for _, v in sorted(rss.items())],
        "fused": sorted(fused),
        "wrong": len(wrong),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stride", type=int, default=8, help="anchor grid stride (8: 150,300 anchors)")
    parser.add_argument("--gt", type=int, default=50, help="ground-truth boxes per request")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--package", default=None,
                        help="folder holding the tsfuse package (default: the installed one, else the source "
                        "tree's over --build's libraries)")
    parser.add_argument("--build", default=str(ROOT / "build"))
    args = parser.parse_args()

    out = pathlib.Path(tempfile.mkdtemp(prefix="tsfuse-serving-"))
    if not args.package and importlib.util.find_spec("tsfuse") is None:
        sys.path.insert(0, str(ROOT / "scripts"))
        import source_package

        args.package = str(source_package.make(pathlib.Path(args.build) / "lib", out / "package"))
    if args.package:
        sys.path.insert(0, args.package)
    matcher.build(out, args.stride)
    anchors = torch.jit.load(str(out / "matcher.pt")).anchors
    url = client.start_local(cpus=2, pythonpath=(args.package,) if args.package else (),
                             env={"MALLOC_MMAP_THRESHOLD_": "65536"})
    rows = []
    try:
        for name, file, use_tsfuse in CONFIGS:
            r = run_config(url, out / file, use_tsfuse, anchors, args)
            rows.append((name, r))
            print(f"{name}: {r}", file=sys.stderr, flush=True)
    finally:
        client.stop()
    a, g = anchors.shape[0], args.gt
    print(f"anchor matcher, {a} anchors x {g} boxes per request ([G, A] IoU matrix: "
          f"{g * a * 4 / 2**20:.0f} MiB in float32); 2 replicas x 1 CPU, 1 thread; {args.requests} requests "
          f"from {args.clients} clients over loopback HTTP")
    print()
    print("| served model | requests/s | p50 ms | p99 ms | peak per call, each replica (MiB) | private RSS between calls (MiB) "
          "| fused | wrong |")
    print("| --- | ---: | ---: | ---: | --- | --- | --- | ---: |")
    for name, r in rows:
        print(f"| {name} | {r['throughput']:.1f} | {r['p50_ms']:.0f} | {r['p99_ms']:.0f} | "
              f"{', '.join(map(str, r['call_peak_mib']))} | {', '.join(map(str, r['rss_mib']))} | "
              f"{'yes' if r['fused'] == ['1'] else 'no'} | {r['wrong']} |")


if __name__ == "__main__":
    main()
