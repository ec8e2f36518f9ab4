"""Eager with the signed-zero ties of min/max-family ops decided each way.

minimum(0., -0.), clamp(-0., min=0.) and an amax over a slice holding both zeros are ties: the two
candidates compare equal, and which zero eager returns depends on its kernel (vectorized lanes vs
the scalar tail, the reduction's order), not on a rule. A mismatch is a tie's consequence when
every element that differs from eager's changes with the ties' outcomes: `tie_sensitive` reruns
the program under `ZeroTies` with each op call's ties decided +0.0 or -0.0 (every combination
over up to MAX_DECIDED_CALLS calls; up to MAX_KEEP_CALLS calls, also each tied element keeping its
first operand's own zero, as a kernel that returns x on a tie does), with and without
TorchScript's rewrites of x + 0 and 0 - x, and compares the runs. Non-tie zeros
(minimum(-0., 5.)) keep their sign, so a wrong sign there is still a mismatch.
"""
import itertools

import torch
from torch.overrides import TorchFunctionMode

BINARY = {"minimum", "maximum", "fmin", "fmax"}
EXTREMA = {"min", "max"}  # binary with a tensor `other`, else a reduction
REDUCTIONS = {"amax", "amin"}
CLAMPS = {"clamp", "clip", "clamp_min", "clamp_max", "relu"}


def _slice_has_both_zeros(x, dim, keepdim):
    zero = x == 0
    neg, pos = zero & torch.signbit(x), zero & ~torch.signbit(x)
    if dim is None or dim == () or dim == []:
        return (neg.any() & pos.any()).reshape([1] * x.dim() if keepdim else [])
    return neg.any(dim=dim, keepdim=keepdim) & pos.any(dim=dim, keepdim=keepdim)


def _arg(args, kwargs, i, name, default=None):
    return args[i] if len(args) > i else kwargs.get(name, default)


def tie_mask(name, args, kwargs, elementwise=True):
    """Where the op `name` (out-of-place spelling) sees a signed-zero tie, from its inputs; None
    when it is not a min/max-family op (or, with elementwise=False, an elementwise one)."""
    x = args[0] if args else kwargs.get("input")
    other = _arg(args, kwargs, 1, "other")
    # (a bool or integer x against a float `other` or clamp bound computes in float:
    # maximum(False, -0.) and clamp(False, min=-0.) tie)
    operands = [x, other, kwargs.get("min"), kwargs.get("max"), *args[1:3]]
    if not isinstance(x, torch.Tensor) or not any(
            isinstance(t, torch.Tensor) and t.dtype.is_floating_point for t in operands):
        return None
    if name in BINARY or (name in EXTREMA and isinstance(other, torch.Tensor)):
        return (x == 0) & (other == 0) if elementwise else None
    if name in EXTREMA or name in REDUCTIONS:
        dim = _arg(args, kwargs, 1, "dim", None if name in EXTREMA else ())
        return _slice_has_both_zeros(x, dim, bool(_arg(args, kwargs, 2, "keepdim", False)))
    if name in CLAMPS and elementwise:
        if name == "relu":
            bounds = [0.0]
        elif name in ("clamp_min", "clamp_max"):
            bounds = [_arg(args, kwargs, 1, name[-3:])]
        else:
            bounds = [_arg(args, kwargs, 1, "min"), _arg(args, kwargs, 2, "max")]
        zeros = [b == 0 if isinstance(b, torch.Tensor) else torch.tensor(b == 0) for b in bounds if b is not None]
        if zeros:
            return (x == 0) & torch.stack(torch.broadcast_tensors(*zeros)).any(0)
    return None


# A decision that leaves each tied element its first operand's own zero (an elementwise op's).
KEEP = "keep"


class _Decided(torch.autograd.Function):
    """The decided values, whose gradient is the op's own: a tie decided either way is still the
    op's result, which eager's backward differentiates."""

    @staticmethod
    def forward(ctx, values, decided):
        return decided

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class ZeroTies(TorchFunctionMode):
    """Decides every signed-zero tie: the k-th op call that has one (in execution order) makes its
    tied zeros -0.0 where decide(k) is True, each element's first operand's zero where it is KEEP,
    else +0.0. On CUDA, where eager's elementwise min/max are one formula, only reductions are
    decided. peephole: x + 0 returns x and 0 - x is neg(x), as TorchScript's optimized graph
    computes them (so a tie's sign survives them there, not in eager)."""

    def __init__(self, decide, peephole=False):
        super().__init__()
        self.decide, self.peephole, self.calls = decide, peephole, 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if self.peephole and name in ("add", "__add__", "__radd__") and len(args) == 2 and not kwargs:
            x, n = (args[0], args[1]) if isinstance(args[0], torch.Tensor) else (args[1], args[0])
            if isinstance(x, torch.Tensor) and isinstance(n, (int, float)) and n == 0:
                return x
        if (self.peephole and name == "__rsub__" and len(args) == 2 and not kwargs and isinstance(args[1], (int, float))
                and args[1] == 0 and isinstance(args[0], torch.Tensor)):
            return torch.neg(args[0])  # 0 - x, which TorchScript's optimized graph computes as neg(x)
        inplace = name.endswith("_") and not name.endswith("__")
        x = args[0] if args else kwargs.get("input")
        tie = None
        if isinstance(x, torch.Tensor):
            tie = tie_mask(name[:-1] if inplace else name, args, kwargs, elementwise=not x.is_cuda)
        out = func(*args, **kwargs)
        if tie is None:
            return out
        values = out[0] if isinstance(out, tuple) else out
        if not isinstance(values, torch.Tensor) or values.shape != torch.broadcast_shapes(values.shape, tie.shape):
            return out
        tied = tie & (values == 0)
        if not bool(tied.any()):
            return out
        decision = self.decide(self.calls)
        self.calls += 1
        if decision is KEEP and torch.broadcast_shapes(x.shape, values.shape) == values.shape:
            # each tied element keeps its first operand's own zero (clamp(-0., 0) -0., clamp(0., 0) 0.)
            decided = torch.where(tied, x.broadcast_to(values.shape).to(values.dtype), values)
        else:
            zero = -0.0 if decision is True else 0.0
            decided = torch.where(tied, torch.tensor(zero, dtype=values.dtype), values)
        if values.requires_grad:  # (the op's own gradient, through the decided zeros too)
            decided = _Decided.apply(values, decided.detach())
        if inplace:
            return values.copy_(decided)
        if isinstance(out, tuple):
            return type(out)((decided, *out[1:])) if hasattr(out, "_fields") else (decided, *out[1:])
        return decided


def _differs(a, b):
    an, bn = torch.isnan(a), torch.isnan(b)
    bits = {torch.float32: torch.int32, torch.float64: torch.int64, torch.float16: torch.int16,
            torch.bfloat16: torch.int16}[a.dtype]
    return (an != bn) | (a.masked_fill(an, 0).contiguous().view(bits) != b.masked_fill(bn, 0).contiguous().view(bits))


def run_decided(program, decide, peephole=False):
    """(outputs, inputs after the call, op calls with a tie) of eager under ZeroTies; None if it
    raised."""
    fn, args = program.eager_fn(), program.make_inputs()
    mode = ZeroTies(decide, peephole)
    try:
        with torch.no_grad(), mode:
            out = fn(*args)
    except Exception:  # noqa: BLE001 - a program that raises has no tie to blame
        return None
    return out, args, mode.calls


MAX_DECIDED_CALLS = 8  # every combination of up to 2^8 runs; past it, all +0.0 against all -0.0
MAX_KEEP_CALLS = 4  # up to this many calls, also KEEP for each (3^4 runs)


def tie_sensitive(program, which, e, o):
    """Whether every element where `o` differs from eager's `e` (output or input `which` =
    ("output" | "input", index)) changes with the ties' outcomes: eager rerun with each op call's
    ties decided either way (every combination), with and without TorchScript's x + 0 peephole."""
    if not hasattr(program, "eager_fn"):
        return False
    pick = (lambda r: r[0][which[1]]) if which[0] == "output" else (lambda r: r[1][which[1]])
    return changes_with_ties(lambda decide, peephole: run_decided(program, decide, peephole), pick, e, o)


def changes_with_ties(run, pick, e, o):
    """tie_sensitive over any eager rerun: run(decide, peephole) -> a result whose [2] counts the op
    calls with a tie (None if it raised); pick(result) -> the tensor compared with e and o."""
    if e.shape != o.shape or e.dtype != o.dtype:
        return False
    diff = _differs(e, o)
    if not bool(diff.any()):
        return False
    for peephole in (False, True):
        base, negative = run(lambda c: False, peephole), run(lambda c: True, peephole)
        if base is None or negative is None or max(base[2], negative[2]) == 0:
            continue
        # (A decision can make or remove later ties: calls past the k-th follow the k-th's.)
        k = max(base[2], negative[2])
        decisions = ([lambda c, bits=bits: bool(bits >> min(c, k - 1) & 1) for bits in range(1, 1 << k)]
                     if k <= MAX_DECIDED_CALLS else [lambda c: True])
        if k <= MAX_KEEP_CALLS:  # (an op's kernel may also keep each element's own zero)
            decisions += [lambda c, a=a: a[min(c, k - 1)] for a in itertools.product((False, True, KEEP), repeat=k)
                          if KEEP in a]
        sensitive = torch.zeros_like(diff)
        # (With TorchScript's rewrites an element may differ from eager's by them alone, 0 - x as
        # neg(x): it is explained where some decided run gives o's value itself.)
        reached = ~_differs(pick(base), o) | ~_differs(pick(negative), o) if peephole else torch.zeros_like(diff)
        for decide in decisions:
            r = run(decide, peephole)
            if r is not None:
                sensitive |= _differs(pick(base), pick(r))
                if peephole:
                    reached |= ~_differs(pick(r), o)
        if bool((sensitive | ~diff).all()) or (peephole and bool(sensitive.any()) and bool((reached | ~diff).all())):
            return True
    return False
