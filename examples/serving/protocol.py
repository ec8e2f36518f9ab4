"""The matcher service's wire format, shared by the replica (app.py), the client and the tests:
raw little-endian bytes, no JSON (a response holds 12 bytes per anchor)."""
from typing import Tuple

import numpy as np
import torch
from torch import Tensor

PID = "x-replica-pid"
CALL_PEAK_KB = "x-call-peak-kb"  # the model call's peak RSS growth (absent where not measurable)
PRIVATE_RSS_KB = "x-private-rss-kb"  # the replica's private (anonymous) RSS after the call
FUSED = "x-fused"                # "1" when the call ran a graph with tsfuse ops


def encode_request(gt: Tensor) -> bytes:
    return gt.to(torch.float32).contiguous().numpy().tobytes()


def decode_request(body: bytes) -> Tensor:
    if len(body) % 16:
        raise ValueError(f"request body of {len(body)} bytes is not float32 [G, 4]")
    return torch.from_numpy(np.frombuffer(body, dtype=np.float32).copy()).view(-1, 4)


def encode_response(vals: Tensor, matches: Tensor) -> bytes:
    return vals.to(torch.float32).contiguous().numpy().tobytes() + matches.to(torch.int64).contiguous().numpy().tobytes()


def decode_response(body: bytes) -> Tuple[Tensor, Tensor]:
    if len(body) % 12:
        raise ValueError(f"response body of {len(body)} bytes is not float32 [A] + int64 [A]")
    a = len(body) // 12
    vals = torch.from_numpy(np.frombuffer(body, dtype=np.float32, count=a).copy())
    matches = torch.from_numpy(np.frombuffer(body, dtype=np.int64, offset=4 * a).copy())
    return vals, matches
