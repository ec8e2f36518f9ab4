"""Module attributes and arguments that pow, clamp and where read by value, end to end.

A scripted module keeps a float attribute as prim::GetAttr, not a constant, so
`torch.clamp(d, min=self.eps)` reads a number known only at run time. Each model here goes through
`optimize-ts --check`, must become ONE fused op with no broadcast-sized op left, and must return
eager's bits for every value of its numbers, changed between calls (an attribute set after
loading, an argument), through the saved optimized model and through the load-time hook.
"""
from typing import Tuple

import pytest
import torch
from torch import Tensor

from optimize_ts_util import run_tool

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _boxes(n: int, g: torch.Generator) -> Tensor:
    xy = torch.rand(n, 2, generator=g) * 50
    return torch.cat([xy, xy + torch.rand(n, 2, generator=g) * 20 + 0.5], 1)


class IntersectionOverEps(torch.nn.Module):
    """Pairwise box intersection clamped at self.eps, kept where above self.thr, else self.fill."""

    def __init__(self):
        super().__init__()
        self.eps = 1e-6
        self.thr = 10.0
        self.fill = -1.0

    def forward(self, a: Tensor, b: Tensor) -> Tensor:
        lt = torch.max(a[:, None, :2], b[None, :, :2])
        rb = torch.min(a[:, None, 2:], b[None, :, 2:])
        wh = torch.clamp(rb - lt, min=self.eps)
        inter = wh[:, :, 0] * wh[:, :, 1]
        return torch.where(inter > self.thr, inter, self.fill)

    @torch.jit.export
    def example_inputs(self) -> Tuple[Tensor, Tensor]:
        g = torch.Generator().manual_seed(1)
        return _boxes(13, g), _boxes(9, g)


class FocalDistance(torch.nn.Module):
    """A distance raised to a runtime power and clamped to [lo, 1] (lo an argument)."""

    def __init__(self):
        super().__init__()
        self.gamma = 2.0

    def forward(self, x: Tensor, y: Tensor, lo: float) -> Tensor:
        d = (x[:, None] - y[None]).abs().sum(-1)
        return torch.clamp(torch.exp(-d).pow(self.gamma), lo, 1.0)

    @torch.jit.export
    def example_inputs(self) -> Tuple[Tensor, Tensor, float]:
        return torch.linspace(-1.0, 1.0, 24).view(6, 4), torch.linspace(-0.5, 2.0, 20).view(5, 4), 0.1


MODELS = {"intersection_over_eps": (IntersectionOverEps, "tsfuse::pairwise", ["aten::clamp", "aten::where", "aten::mul"]),
          "focal_distance": (FocalDistance, "tsfuse::reduce", ["aten::clamp", "aten::pow", "aten::exp"])}


def _calls(name, g) -> Tuple[list, list]:
    """(inputs per call, attribute settings per call) for a model."""
    if name == "intersection_over_eps":
        ins = [(_boxes(n, g), _boxes(m, g)) for n, m in ((40, 30), (40, 30), (7, 1), (0, 3), (40, 30))]
        attrs = [{}, {"eps": 0.5, "thr": 30.0}, {"fill": float("nan")}, {}, {"eps": -0.0, "thr": 0.0, "fill": -0.0}]
        return ins, attrs
    x, y = torch.randn(30, 4, generator=g), torch.randn(20, 4, generator=g)
    ins = [(x, y, 0.1), (x, y, 0.1), (x, y, 0.0), (x, y, float("nan")), (x[:5], y, 0.3)]
    attrs = [{}, {"gamma": 0.5}, {"gamma": 3.0}, {}, {"gamma": 2.0}]
    return ins, attrs


def _same(expected, actual, exact):
    assert expected.dtype == actual.dtype and expected.shape == actual.shape
    if exact:
        assert torch.equal(expected.view(torch.int32), actual.view(torch.int32)), (expected, actual)
    else:
        torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-6, equal_nan=True)


@pytest.fixture(scope="module")
def saved(tmp_path_factory, optimize_ts):
    d = tmp_path_factory.mktemp("bound_numbers")
    out = {}
    for name, (cls, _, _) in MODELS.items():
        src, dst = d / f"{name}.pt", d / f"{name}.opt.pt"
        torch.jit.script(cls()).save(str(src))
        proc = run_tool(optimize_ts, "--check", src, dst)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        out[name] = (src, dst)
    return out


def _graph_ops(m):
    return [n.kind() for n in m.graph.nodes()]


@pytest.mark.parametrize("name", sorted(MODELS))
def test_one_fused_op_and_eagers_results_for_every_value(saved, tsfuse_lib, name):
    cls, op, gone = MODELS[name]
    src, dst = saved[name]
    fused = torch.jit.load(str(dst))
    kinds = _graph_ops(fused)
    assert kinds.count(op) == 1 and "tsfuse::wrapped_number" in kinds, kinds
    for k in gone:
        assert k not in kinds, (k, kinds)
    hooked = torch.jit.load(str(src))  # the load-time hook fuses it at its first call
    eager = cls()
    ins, attrs = _calls(name, torch.Generator().manual_seed(3))
    for args, setting in zip(ins, attrs):
        for key, value in setting.items():
            for m in (fused, hooked, eager):
                setattr(m, key, value)
        want = eager(*args)
        exact = name != "focal_distance"  # a sum over the last dim: the reduction's tolerance
        with torch.no_grad():
            _same(want, fused(*args), exact)
            _same(want, hooked(*args), exact)
