"""Shared by the program generator's parts: dtypes, rounding units, error-bound helpers."""
import torch

FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
DTYPE_WEIGHTS = [(torch.float32, 34), (torch.float64, 9), (torch.float16, 7), (torch.bfloat16, 7),
                 (torch.int32, 8), (torch.int64, 12), (torch.uint8, 6), (torch.bool, 10)]
DTYPE_NAME = {torch.float32: "torch.float32", torch.float64: "torch.float64", torch.float16: "torch.float16",
              torch.bfloat16: "torch.bfloat16", torch.int32: "torch.int32", torch.int64: "torch.int64",
              torch.uint8: "torch.uint8", torch.bool: "torch.bool"}
# Relative rounding unit (1 ulp at the value's magnitude, as a fraction of it).
ULP = {torch.float32: 2.0 ** -23, torch.float64: 2.0 ** -52, torch.float16: 2.0 ** -10, torch.bfloat16: 2.0 ** -7}


class Reject(Exception):
    pass


class StopProgram(Exception):
    """The program ends at the line just added (one eager rejects: the program expects its error)."""


def _finite_max(t):
    """max |t| over finite elements (0 when none), as a float."""
    if not isinstance(t, torch.Tensor):
        t = torch.tensor(t)
    if t.dtype == torch.bool or t.numel() == 0:
        return 0.0
    d = t.detach().double().abs()
    d = d[torch.isfinite(d)]
    return float(d.max()) if d.numel() else 0.0


def _is_float(t):
    return isinstance(t, float) or (isinstance(t, torch.Tensor) and t.dtype.is_floating_point)


class Val:
    def __init__(self, name, t, err=0.0, param=False, root=None):
        self.name, self.t, self.err, self.param = name, t, err, param
        self.root = root  # the param this value may alias (views of params), else None
