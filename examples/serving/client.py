"""Runs the matcher service on a local Ray instance and talks to it over loopback HTTP.

    python examples/serving/client.py MODEL.pt [--plain] [--requests N] [--cpus 2]

starts Ray (no dashboard), serves MODEL.pt with 2 replicas (app.py), sends N requests of random
ground-truth boxes, checks every response against eager PyTorch and prints what each replica
reported. The test (tests/python/test_ray_serve.py) and the bench (bench/serving.py) use the same
functions.
"""
import argparse
import os
import pathlib
import socket
import sys
import time
import urllib.error
import urllib.request
from typing import Dict, Optional, Tuple

import torch

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import protocol  # noqa: E402

ROUTE = "/match"
# Serve's proxy and replica checks have second-scale defaults that a loaded 2-core machine can miss
# while Python and torch import; a missed check kills the actor and restarts it.
SERVE_ENV = {"RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S": "60", "RAY_SERVE_PROXY_HEALTH_CHECK_TIMEOUT_S": "30",
             "RAY_USAGE_STATS_ENABLED": "0"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_local(cpus: int = 2, pythonpath: Tuple[str, ...] = (), env: Optional[Dict[str, str]] = None) -> str:
    """A local Ray instance with `cpus` CPUs and Serve's HTTP proxy on a free loopback port; returns
    the service URL. `pythonpath` (and this folder) reach every worker: the replicas import tsfuse
    and app.py from there. `env`: more environment for the workers."""
    os.environ.update(SERVE_ENV)
    import ray
    from ray import serve

    path = os.pathsep.join([str(HERE), *pythonpath, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    ray.init(num_cpus=cpus, include_dashboard=False, object_store_memory=128 << 20, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": path, **SERVE_ENV, **(env or {})}})
    port = _free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    return f"http://127.0.0.1:{port}{ROUTE}"


def deploy(model: str, use_tsfuse: bool = True, replicas: int = 2, threads: int = 1) -> None:
    """Serves `model` at ROUTE (replacing what was there) and returns when every replica is up."""
    from ray import serve

    import app

    serve.run(app.build_app({"model": model, "tsfuse": "1" if use_tsfuse else "0", "replicas": str(replicas),
                             "threads": str(threads)}), route_prefix=ROUTE, name="matcher")


def stop() -> None:
    import ray
    from ray import serve

    try:
        serve.shutdown()
    finally:
        ray.shutdown()


def post(url: str, gt: torch.Tensor, timeout: float = 60.0) -> Tuple[torch.Tensor, torch.Tensor, Dict[str, str]]:
    """One request; raises urllib.error.URLError (HTTPError included) when it is not answered."""
    req = urllib.request.Request(url, data=protocol.encode_request(gt), method="POST",
                                 headers={"Content-Type": "application/octet-stream"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        vals, matches = protocol.decode_response(resp.read())
        return vals, matches, {k.lower(): v for k, v in resp.headers.items()}


def post_retrying(url: str, gt: torch.Tensor, deadline: float,
                  errors: Optional[list] = None) -> Tuple[torch.Tensor, torch.Tensor, Dict[str, str]]:
    """post until it is answered or time.monotonic() passes `deadline`: a request that reached a
    replica as it died fails (5xx or a dropped connection), and is sent again."""
    while True:
        try:
            return post(url, gt, timeout=max(1.0, deadline - time.monotonic()))
        except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
            if errors is not None:
                errors.append(repr(e))
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model")
    parser.add_argument("--plain", action="store_true", help="replicas do not import tsfuse")
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--cpus", type=int, default=2)
    args = parser.parse_args()
    import matcher

    if not args.plain:
        import tsfuse  # noqa: F401  (an optimized model's file names tsfuse ops)
    anchors = torch.jit.load(args.model).anchors
    url = start_local(args.cpus)
    try:
        deploy(str(pathlib.Path(args.model).resolve()), use_tsfuse=not args.plain)
        replicas = {}
        for i in range(args.requests):
            gt = matcher.random_gt(50, seed=i)
            vals, matches, headers = post(url, gt)
            want_vals, want_matches = matcher.reference(anchors, gt)
            assert torch.equal(vals, want_vals) and torch.equal(matches, want_matches), f"request {i} differs from eager"
            replicas[headers[protocol.PID]] = headers
        print(f"{args.requests} requests, every response equal to eager's")
        for pid, h in sorted(replicas.items()):
            peak = h.get(protocol.CALL_PEAK_KB)
            peak_text = f", last call's peak {int(peak) / 1024:.1f} MiB" if peak else ""
            print(f"replica pid {pid}: fused {h[protocol.FUSED]}, private RSS {int(h[protocol.PRIVATE_RSS_KB]) / 1024:.0f} MiB{peak_text}")
    finally:
        stop()


if __name__ == "__main__":
    main()
