"""The fuzzer's comparison rules: eager's result vs the optimized program's (see run.py)."""
import re

import torch
from zero_ties import tie_sensitive

# Known divergences: (name, why). Each is a documented gap, classified by `known_divergence`
# below from the data of the mismatch itself (never by program shape alone); the runner counts and
# prints them, and they do not fail the run. Keep this list short and every entry explained.
KNOWN_DIVERGENCES = {
    # Open gap, see tests/ops/pairwise_special_test.cpp PairwiseSpecial.SignedZeroTiesInMinimumMaximum:
    # which zero minimum(0., -0.) (and max/clamp with tensor bounds, an amax/amin over a slice
    # holding both zeros) returns depends on eager's kernel (vectorized lanes vs the scalar loop,
    # the reduction's order), not on a rule; tsfuse follows the vectorized one. Classified by
    # rerunning eager with every tie decided each way (zero_ties.py).
    "signed_zero_tie": "a signed-zero tie of minimum/maximum/clamp/relu or amax/amin (on CUDA only of a "
                       "reduction), or what later ops made of it: eager's own result changes with the tie",
    # Gradient mode (grad.py). Eager's backward fails when an in-place op overwrote a value its
    # autograd graph saved (x = a.exp(); x.add_(1)); a fused op that absorbed the in-place op saved
    # its operands only, so its backward runs. Classified only when the optimized program's
    # forward and gradients equal eager's run with the saved values kept as saved (grad.py: cloned
    # when saved, else allow_mutation_on_saved_tensors).
    "inplace_saved_tensor": "eager's backward fails (a saved value, or the base of a split/chunk/unbind view, was "
                            "overwritten in place); the fused program's gradients equal eager's with the saved "
                            "values kept as saved",
    # Gradient mode. A fused op's output requires grad when any operand does, also when the
    # operand reaches it through comparisons or a creation alone (`(x > 0).float()`, ones_like(x)),
    # where eager's output does not. Classified only when the gradient through those outputs is
    # zero (None) and everything else matched.
    "requires_grad_without_gradient": "a floating output requires grad in the optimized program only; the "
                                      "gradient through it is zero",
    # Gradient mode. Eager's backward evaluates every local derivative on whole tensors, also where
    # the incoming gradient is zero (elements a slice, a max/min(dim) or a mask cut away, the zero
    # gradient of a rounded division), and 0 * inf, 0 * NaN, 0 / 0 there make its gradient NaN;
    # a fused backward that computes only the elements it needs gives the finite value. Classified
    # per element: eager's gradient NaN, the optimized one within twice the bound of eager's
    # gradient recomputed with 0 * inf = 0 (grad_bound.py's G), or G's infinity itself, everything
    # else matched.
    "nan_from_zero_gradient": "eager's gradient is NaN where its backward multiplied a zero gradient by an "
                              "infinite or NaN derivative; the fused gradient is the value without it",
    # Gradient mode. Where a value narrower than the space (log(x) of x [N, 1] in a [N, M] program)
    # has an infinite local derivative (1/x at x = 0), eager first sums the incoming gradient over
    # the broadcast dims and then multiplies (sum(g) * inf: +-inf); a fused backward multiplies each
    # element and sums over the whole space (g_i * inf of both signs: NaN). Classified per element:
    # eager's gradient infinite, the optimized one NaN, everything else matched.
    "infinite_gradient_summed_late": "eager's gradient is +-inf where the fused backward's is NaN: an infinite "
                                     "local derivative of a narrow value, multiplied before the sum",
    # Gradient mode. A gradient element whose terms are finite but whose absolute values sum past
    # the dtype's largest value (float32 terms near 1e38 summed over a broadcast dim): whether a
    # partial sum overflows depends on the order, which the sum bound leaves free. Classified per
    # element: +-inf on one side, a finite value on the other, where grad_bound.py's scaled
    # absolute sum is finite and the unscaled one is not; everything else matched.
    "sum_overflow_order": "a gradient's terms are finite but their absolute sum exceeds the dtype's range; one "
                          "summation order overflows, the other does not",
}
# Contracts the generator's error bounds apply (not classifications: the bound is part of the
# comparison, see gen.py). Listed so the report states every place that is not bit-exact.
BOUND_CONTRACTS = {
    # tests/ops/pairwise_special_test.cpp transcendental(): tsfuse runs ATen's vectorized kernel on
    # contiguous tiles; eager takes its scalar loop on some layouts (std::exp & co.). Each loop is
    # within 1 ulp of the exact value, so they differ by up to 2 (seed 8110, program 4833: float64
    # sigmoid(1.655), eager's strided and contiguous loops 2 ulps apart).
    "aten_on_tile_2ulp": "exp/log/sigmoid/pow/atan/sin/cos/tanh/rsqrt/log1p/hypot/acos/asin/tan/log2/log10/erf/erfc/sinh/cosh/asinh/acosh/atanh/expm1 (ATen on tiles, docs/ops.md): 2 ulps of the result",
    # Found by this fuzzer (seed 1, programs 1795, 2460): eager's vectorized add/sub with alpha
    # computes a + alpha*b with one rounding (fmadd), its broadcasting loop with two; tsfuse (ATen
    # on contiguous tiles) matches the vectorized one. Same contract class as above.
    "alpha_fma": "add/sub with alpha != 1: 1 ulp of the result and of alpha*b",
    "reductions": "float sum/mean/prod/logsumexp/norm: summation-order bound n*eps*sum|x| (gen.py)",
}

MINMAX_RE = re.compile(r"torch\.(min|max|minimum|maximum|clamp|amax|amin|relu)\(|clamp_min\(|clamp_max\(|\.clamp_?\(|"
                       r"\.(amax|amin|max|min|relu_?)\(")
# On a CUDA device eager's elementwise minimum/maximum/clamp/relu are one formula (the device's
# min/max), which tsfuse reproduces bit for bit; only a reduction's zero depends on its order there.
MINMAX_REDUCE_RE = re.compile(r"\.(amax|amin)\(|torch\.(amax|amin)\(|torch\.(max|min)\(\w+, -?\d|\.(max|min)\(dim=")


def float_bits(t):
    return t.view({torch.float32: torch.int32, torch.float64: torch.int64, torch.float16: torch.int16,
                   torch.bfloat16: torch.int16}[t.dtype])


def layout(t):
    """The strides that address memory: those of dims with more than one element, in a non-empty
    tensor. The stride of a size-1 dim and every stride of an empty tensor address nothing (as in
    PyTorch's own contiguity checks), and TorchScript's executors already vary them."""
    if t.numel() == 0:
        return ()
    return tuple((d, s) for d, (n, s) in enumerate(zip(t.shape, t.stride())) if n > 1)


def compare_tensor(e, o, err):
    """None when `o` matches eager's `e` under the bound `err`, else a description."""
    if not isinstance(e, torch.Tensor) or not isinstance(o, torch.Tensor):
        return None if type(e) is type(o) and e == o else f"non-tensor {e!r} vs {o!r}"
    if e.dtype != o.dtype:
        return f"dtype {e.dtype} vs {o.dtype}"
    if e.shape != o.shape:
        return f"shape {tuple(e.shape)} vs {tuple(o.shape)}"
    if layout(e) != layout(o):
        return f"strides {e.stride()} vs {o.stride()} (shape {tuple(e.shape)})"
    if e.numel() == 0:
        return None
    if not e.dtype.is_floating_point:
        if torch.equal(e, o):
            return None
        bad = (e != o).nonzero()[0].tolist()
        return f"values differ at {bad}: {e[tuple(bad)].item()} vs {o[tuple(bad)].item()}"
    en, on = torch.isnan(e), torch.isnan(o)
    if not torch.equal(en, on):
        bad = (en != on).nonzero()[0].tolist()
        return f"NaN mask differs at {bad}: {e[tuple(bad)].item()} vs {o[tuple(bad)].item()}"
    ec, oc = e.masked_fill(en, 0).contiguous(), o.masked_fill(on, 0).contiguous()
    if err == 0:
        if torch.equal(float_bits(ec), float_bits(oc)):
            return None
        bad = (float_bits(ec) != float_bits(oc)).nonzero()[0].tolist()
        return (f"not bit-exact at {bad}: {e[tuple(bad)].item()!r} vs {o[tuple(bad)].item()!r} "
                f"(max abs diff {float((ec.double() - oc.double()).abs().max())})")
    ei, oi = torch.isinf(ec), torch.isinf(oc)
    if not torch.equal(ei, oi) or not torch.equal(ec[ei], oc[oi]):
        return "infinities differ"
    d = float((ec.double() - oc.double()).abs().max())
    if d > err:
        return f"max abs diff {d} exceeds the bound {err}"
    return None


def known_divergence(program, e, o, which):
    """The KNOWN_DIVERGENCES entry a value mismatch of output or input `which` (("output" |
    "input", index)) falls under, or None: a signed-zero tie when every element that differs
    changes in eager itself with the tie's outcome (zero_ties.py; a zero, the infinity a later 1/x
    makes of it, a softmax or max over that infinity)."""
    if (isinstance(e, torch.Tensor) and e.dtype.is_floating_point
            and (MINMAX_REDUCE_RE if e.is_cuda else MINMAX_RE).search(program.source())
            and tie_sensitive(program, which, e, o)):
        return "signed_zero_tie"
    return None


def error_class(exc):
    """The error class a call raised: the TorchScript interpreter wraps errors in a RuntimeError
    whose last line names the original class."""
    last = str(exc).strip().splitlines()[-1] if str(exc).strip() else ""
    m = re.match(r"^([A-Za-z_][\w.]*(Error|Exception)):", last)
    if m and "TorchScript interpreter" in str(exc):
        return m.group(1).split(".")[-1]
    return type(exc).__name__


def compare_results(program, eager, opt):
    """eager/opt: (outputs, exception, inputs after the call). Returns (problem, known) strings."""
    (eo, ee, ei), (oo, oe, oi) = eager, opt
    if ee is not None or oe is not None:
        if ee is None:
            return f"optimized raised {error_class(oe)}: {str(oe).strip().splitlines()[-1]}", None
        if oe is None:
            return f"eager raised {type(ee).__name__} ({str(ee).splitlines()[0][:200]}) but optimized did not", None
        if error_class(ee) != error_class(oe):
            return f"error class {error_class(ee)} vs {error_class(oe)}", None
        return None, None
    if len(eo) != len(oo):
        return f"{len(eo)} outputs vs {len(oo)}", None
    for k, (e, o, err) in enumerate(zip(eo, oo, program.errs)):
        why = compare_tensor(e, o, err)
        if why:
            known = known_divergence(program, e, o, ("output", k))
            return f"output {k} ({program.outputs[k]}): {why}", known
    for k, (e, o) in enumerate(zip(ei, oi)):
        why = compare_tensor(e, o, 0.0) if isinstance(e, torch.Tensor) else None
        if why:
            return f"input {program.params[k][0]} after the call: {why}", known_divergence(program, e, o, ("input", k))
    return None, None
