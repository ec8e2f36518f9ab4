"""Regression tests for what probing real models' code through the load-time hook found, minimized."""
import types

import pytest
import torch


def _error(fn, *args):
    """The message fn(*args) raises (its last line: TorchScript prefixes a graph excerpt), or None."""
    try:
        with torch.no_grad():
            fn(*args)
    except RuntimeError as e:  # IndexError and the interpreter's errors both derive from it
        return str(e).strip().splitlines()[-1]
    return None


def batched_square_distance(src, dst):
    # PointNet++'s broadcast form for [B, N, C] x [B, M, C], here called with unbatched [N, C] clouds
    return torch.sum((src[:, :, None, :] - dst[:, None, :, :]) ** 2, -1)


def kernel_sum(x, y):
    return torch.exp(-((x[:, None, :] - y[None, :, :, :]) ** 2).sum(-1)).sum(1)


def pairwise_scaled(x, y):
    return (x[:, None, :, :] - y[None]).abs() * 2


@pytest.mark.parametrize("fn", [batched_square_distance, kernel_sum, pairwise_scaled])
def test_a_full_slice_of_a_dim_the_input_lacks_raises_as_unfused(tsfuse_lib, fn):
    # Canonicalize dropped every identity slice x[:, ...]; on an input of too low a rank that
    # slice is what raises ("Dimension out of range"), so the fused op returned a tensor of the
    # wrong shape instead. Such a slice now stays unless its rank is proven or a later slice
    # raises the same error.
    x, y = torch.randn(6, 3), torch.randn(5, 3)
    # A copy of fn: torch.jit.script caches per function, and the executor keeps the plan it made
    unfused = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__ + "_unfused")
    previous = torch.ops.tsfuse.set_enabled(False)
    try:
        want = _error(torch.jit.script(unfused), x, y)
    finally:
        torch.ops.tsfuse.set_enabled(previous)
    assert want is not None and "Dimension out of range" in want
    scripted = torch.jit.script(fn)
    for _ in range(2):  # the first call and the optimized one
        assert _error(scripted, x, y) == want


def test_the_same_functions_fuse_on_inputs_of_their_rank(tsfuse_lib):
    x, y = torch.randn(2, 6, 3), torch.randn(2, 5, 3)
    scripted = torch.jit.script(batched_square_distance)
    with torch.no_grad():
        for _ in range(2):
            got = scripted(x, y)
    assert "tsfuse::" in str(torch.jit.last_executed_optimized_graph())
    assert torch.equal(got, batched_square_distance(x, y))
