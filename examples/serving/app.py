"""A Ray Serve application serving the anchor matcher (matcher.py) over HTTP.

    serve run examples.serving.app:build_app model=/models/matcher.opt.pt   # from the repo root
    # or, from Python: serve.run(app.build_app({"model": ..., "tsfuse": True}), route_prefix="/match")

Each replica is an actor in its own worker process: it imports tsfuse itself (before loading the
model), so the `optimize-ts` / `tsfuse.optimize` output's fused ops are registered there, and a
plain model is fused at its first call by the load-time pass. Arguments (strings, as `serve run`
passes them):

    model     path of the TorchScript file, readable from every node
    tsfuse    "1" (default) to import tsfuse in the replica, "0" to serve plain TorchScript
    replicas  number of replicas (default 2), one CPU each
    threads   torch intra-op threads per replica (default 1)

Protocol (protocol.py): POST the ground-truth boxes as float32 bytes [G, 4]; the response body is
the matched IoUs (float32 [A]) then the matches (int64 [A]); headers name the replica's pid, the
call's peak memory, the replica's private memory and whether the call ran a fused graph.
"""
import os
import re
from typing import Dict, Optional

import torch
from ray import serve
from starlette.requests import Request
from starlette.responses import Response

try:
    from . import protocol
except ImportError:  # run as a top-level module
    import protocol


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        return int(re.search(field + r":\s+(\d+)", f.read()).group(1))


def _reset_peak() -> Optional[int]:
    """Resets the process's peak RSS (Linux: /proc/self/clear_refs) and returns the RSS now, or
    None where that is not possible. A call's peak is then VmHWM less this: what the call itself
    held at its highest, whatever the process held before (Ray's shared object-store pages, which
    a replica's responses pass through, included)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return _status_kb("VmRSS")
    except OSError:
        return None


@serve.deployment(ray_actor_options={"num_cpus": 1}, max_ongoing_requests=4, health_check_period_s=2,
                  health_check_timeout_s=20)
class Matcher:
    def __init__(self, model: str, use_tsfuse: bool, threads: int):
        if use_tsfuse:
            import tsfuse  # noqa: F401  (registers the fused ops and the load-time pass in this process)
        torch.set_num_threads(threads)
        self.model = torch.jit.load(model)
        self.model.eval()

    async def __call__(self, request: Request) -> Response:
        gt = protocol.decode_request(await request.body())
        before = _reset_peak()
        with torch.no_grad():
            vals, matches = self.model(gt)
        headers = {
            protocol.PID: str(os.getpid()),
            protocol.PRIVATE_RSS_KB: str(_status_kb("RssAnon")),
            protocol.FUSED: "1" if "tsfuse::" in str(torch.jit.last_executed_optimized_graph()) else "0",
        }
        if before is not None:
            headers[protocol.CALL_PEAK_KB] = str(_status_kb("VmHWM") - before)
        return Response(protocol.encode_response(vals, matches), media_type="application/octet-stream",
                        headers=headers)


def build_app(args: Dict[str, str]) -> serve.Application:
    """The application for `serve run ...:build_app key=value ...` or serve.run."""
    replicas = int(args.get("replicas", 2))
    return Matcher.options(num_replicas=replicas).bind(
        str(args["model"]), str(args.get("tsfuse", "1")) not in ("0", "False", "false"), int(args.get("threads", 1)))
