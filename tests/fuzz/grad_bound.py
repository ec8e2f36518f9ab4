"""Error bounds for the fuzzer's gradient mode (grad.py): how far a correct fused backward's
gradient may be from eager's, per element, for one program and one incoming gradient.

A gradient element is a sum over paths of products of local derivatives (a broadcast operand's
gradient sums its value's gradient over the broadcast dims), so its rounding error is bounded the
way a sum's is (gen.py's `2 n eps sum|x|`): by the same sum taken over the absolute values of its
terms. `Bound` reruns the program eagerly under a TorchFunctionMode that replaces every op's
backward by its absolute-value form: each Jacobian entry D by C >= |D| (for elementwise ops and
reductions, where an input element feeds one output element, C acts elementwise; softmax has its
own). The mode's forward values are eager's own (every op runs on the real values), so masks,
ties and control flow are eager's. Backpropagating |incoming gradient| gives, per input element,

    T = sum over paths of |terms|.

Two sets of coefficients are propagated, with one forward:
  * C1 = |D|;
  * C2 = |D| + Delta, Delta the uncertainty of the entry itself: how much D may change when its
    operands change by their forward discrepancy delta (both sides compute the same program, but a
    fused sum or a transcendental op on tiles differs from eager's by up to gen.py's bound; delta is
    tracked here per tensor with the same rules), found by evaluating D with the operands moved by
    +-delta (so a tie that delta can break, a max/min/clamp/abs/relu kink within delta of an
    operand, makes Delta the jump), plus the op's own rounding where a derivative reads a
    transcendental op's result (sigmoid, tanh, exp, ... recomputed on tiles, 2 ulps).

The bound is then

    B = 2 * N * eps * T2 + (T2 - T1)

with N the number of roundings any path can meet (4 per op, plus the length of every sum a
backward takes: broadcast and reduction fan-ins) and eps the largest rounding unit among the
program's floating values that carry gradient. T2 - T1 is (to first order) the gradient's change
from the coefficients' uncertainties. Elements where B is not finite (a NaN or infinite
coefficient on a path) are not bounded; grad.py compares them only for NaN/inf positions and counts
them. Ops the mode does not know raise `UnknownOp`: a program using one gets no bound (grad.py then
requires bit-exact gradients and says so).
"""
import math

import torch
from torch.overrides import TorchFunctionMode

from gen_common import ULP


class UnknownOp(Exception):
    """A differentiable op this module has no absolute-value backward for."""


# Ops whose backward is linear with constant non-negative coefficients (copies, selections, sums):
# autograd's own backward is already the absolute-value one.
PASS = {"__getitem__", "__setitem__", "view", "reshape", "expand", "expand_as", "permute", "transpose", "t",
        "unsqueeze", "squeeze", "select", "narrow", "chunk", "split", "unbind", "contiguous", "clone", "repeat",
        "flatten", "cat", "stack", "to", "type", "type_as", "float", "double", "half", "bfloat16", "sum", "mean", "copy_",
        "index_put_", "index_put", "view_as", "reshape_as", "movedim", "squeeze_", "unsqueeze_", "detach",
        "__iand__", "__ior__", "__ixor__", "triu", "tril", "triu_", "tril_"}
# Elementwise ops (after broadcasting, output element i reads input elements i only).
ELEMENTWISE = {"add", "sub", "mul", "div", "true_divide", "__rsub__", "rsub", "__radd__", "__rmul__", "__truediv__",
               "__rtruediv__", "__rdiv__", "__mul__", "__add__", "__sub__", "__pow__", "__rpow__", "__neg__",
               "__abs__", "neg", "negative", "abs", "relu", "sqrt", "exp", "log", "sigmoid", "atan", "sin", "cos",
               "tanh", "rsqrt", "log1p", "square", "hypot", "pow", "reciprocal", "minimum", "maximum", "fmin",
               "fmax", "clamp", "clip", "clamp_min", "clamp_max", "where", "masked_fill", "floor_divide",
               "__floordiv__", "__rfloordiv__", "acos", "asin", "tan", "log2", "log10", "erf", "erfc",
               "special_erf", "special_erfc", "sinh", "cosh", "expm1", "floor", "ceil", "trunc", "round",
               "sign", "remainder", "fmod", "__mod__", "asinh", "acosh", "atanh"}
# Derivatives that read the result of an op tsfuse evaluates with ATen's kernel on tiles (2 ulps,
# compare.py's aten_on_tile_2ulp): the derivative both sides compute may differ by a few ulps of
# its terms.
TRANSCENDENTAL = {"sqrt", "exp", "log", "sigmoid", "atan", "sin", "cos", "tanh", "rsqrt", "log1p", "square",
                  "hypot", "pow", "__pow__", "__rpow__", "reciprocal", "acos", "asin", "tan", "log2", "log10",
                  "erf", "erfc", "special_erf", "special_erfc", "sinh", "cosh", "expm1", "asinh", "acosh",
                  "atanh"}
# Reductions where each input element feeds one output element: (index of dim, index of keepdim)
# among the positional arguments.
REDUCE = {"prod": (1, 2), "amax": (1, 2), "amin": (1, 2), "max": (1, 2), "min": (1, 2), "logsumexp": (1, 2),
          "norm": (2, 3), "linalg_vector_norm": (2, 3), "vector_norm": (2, 3), "var": (1, 3), "std": (1, 3),
          "pairwise_distance": (None, 4)}
SELECT = {"amax", "amin", "max", "min"}  # their derivative is an indicator of the extreme element(s)
DENSE = {"softmax", "log_softmax", "_softmax", "_log_softmax"}
# Ops whose float output carries no gradient (creations from a tensor's metadata).
CREATE = {"zeros_like", "ones_like", "full_like", "empty_like", "zeros", "ones", "full", "empty", "tensor",
          "arange", "rand_like", "randn_like"}
SCALE = 2.0 ** -64  # bounds()' overflow test: far below any float32 term's overflow, far above underflow
MAX_CORNERS = 3  # operands moved by +-delta together: every sign combination over at most 3 of them


def _name(func):
    return getattr(func, "__name__", str(func))


def _tensors(x):
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for a in x for t in _tensors(a)]
    return []


def _fmax(t):
    """max |t| over finite elements (0 when none)."""
    if not isinstance(t, torch.Tensor) or not t.dtype.is_floating_point or t.numel() == 0:
        return 0.0
    a = t.detach().double().abs()
    a = a[torch.isfinite(a)]
    return float(a.max()) if a.numel() else 0.0


def _is_float(t):
    return isinstance(t, torch.Tensor) and t.dtype.is_floating_point


def _maxdiff(a, b):
    """max |a - b| over elements; inf where one is finite and the other is not (or NaN differs)."""
    if a.numel() == 0:
        return 0.0
    a, b = a.detach().double(), b.detach().double()
    fa, fb = torch.isfinite(a), torch.isfinite(b)
    if not torch.equal(fa, fb) or not torch.equal(a[~fa].nan_to_num(0.0), b[~fb].nan_to_num(0.0)):
        return math.inf
    return float((a[fa] - b[fb]).abs().max()) if bool(fa.any()) else 0.0


def _coef_diff(d, dc):
    """|d - dc| elementwise, inf where they differ in finiteness."""
    d, dc = d.double(), dc.double()
    out = (d - dc).abs()
    same = (torch.isfinite(d) == torch.isfinite(dc)) & ((d == dc) | torch.isfinite(d))
    return torch.where(same, out.nan_to_num(0.0, posinf=0.0), torch.full_like(out, math.inf))


def _safe_mul(c, g):
    """c * g with 0 * inf = 0 * NaN = 0, whichever factor is the zero: a path with a zero factor
    contributes nothing (eager's selecting backwards, clamp/max/where/relu, mask the same way)."""
    return torch.where((g == 0) | (c == 0), torch.zeros((), dtype=g.dtype), c * g)


def _reduced_dims(name, args, kwargs, rank):
    """(dims, keepdim) of a REDUCE op's call; dims None = all."""
    di, ki = REDUCE[name]
    if name == "pairwise_distance":
        return [rank - 1] if rank else [], bool(kwargs.get("keepdim", args[ki] if len(args) > ki else False))
    dim = kwargs.get("dim", args[di] if len(args) > di else None)
    keep = kwargs.get("keepdim", args[ki] if len(args) > ki else False)
    if isinstance(dim, torch.Tensor):
        dim = int(dim)
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return None, bool(keep)
    dims = [dim] if isinstance(dim, int) else list(dim)
    return sorted({d % rank for d in dims}) if rank else [], bool(keep)


def _bcast_grad(g, shape, dims, keepdim):
    """The gradient `g` of a reduction's output, broadcast back over the input's `shape`."""
    rank = len(shape)
    dims = list(range(rank)) if dims is None else dims
    if not keepdim:
        view = [1 if d in dims else s for d, s in enumerate(shape)]
        g = g.reshape(view)
    return g.expand(shape)


class _Surrogate(torch.autograd.Function):
    """Forward: the op's value (computed outside, on the real operands). Backward: `bw(g)`, one
    gradient (or None) per tensor operand: the absolute-value backward."""

    @staticmethod
    def forward(ctx, value, bw, *operands):
        ctx.bw = bw
        return value.clone()

    @staticmethod
    def backward(ctx, g):
        return (None, None) + tuple(ctx.bw(g))


class Bound(TorchFunctionMode):
    """Runs a program eagerly with absolute-value backwards (see the module docstring). After the
    forward, `channel` 0 backpropagates C1, 1 backpropagates C2, 2 the derivatives D themselves
    (eager's gradient, NaN-safe), 3 C1 again (for a scaled incoming gradient); `rounds` is N, `eps` the largest rounding unit met."""

    def __init__(self):
        super().__init__()
        self.channel = 0
        self.rounds = 0
        self.eps = 0.0
        # forward discrepancy per storage (views share it), holding the storage so its address is
        # not reused while the program runs
        self.deltas = {}

    # -- forward discrepancy (delta), per storage --------------------------------------------------
    def delta(self, t):
        if not _is_float(t) or t.numel() == 0:
            return 0.0
        return self.deltas.get(t.untyped_storage().data_ptr(), (0.0, None))[0]

    def set_delta(self, t, d, grow=False):
        if not _is_float(t) or t.numel() == 0:
            return
        s = t.untyped_storage()
        old = self.deltas.get(s.data_ptr(), (0.0, None))[0] if grow else 0.0
        d = max(old, d)
        if d > 0 or grow:
            self.deltas[s.data_ptr()] = (d, s)

    def note(self, out, fan=1):
        """Counts the roundings of an op carrying gradient and the rounding unit of its dtype."""
        for t in _tensors(out):
            if _is_float(t) and t.requires_grad:
                self.eps = max(self.eps, ULP.get(t.dtype, 0.0))
        self.rounds += 4 + fan

    # -- the mode ----------------------------------------------------------------------------------
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = _name(func)
        ins = _tensors(list(args)) + _tensors(list(kwargs.values()))
        grads = [t for t in ins if _is_float(t) and t.requires_grad]
        if name in CREATE or not ins:
            return func(*args, **kwargs)
        if name in ("matmul", "__matmul__") and len(ins) == 2 and min(t.dim() for t in ins) >= 2:
            # its sum of products (tsfuse's form of a matrix-vector product over an expanded
            # operand), through the mode: the sum's fan-in and reordering bound it
            a, b = args[0], args[1] if len(args) > 1 else kwargs["other"]
            T = (torch.Tensor,)
            products = self.__torch_function__(torch.Tensor.mul, T, (self.__torch_function__(
                torch.Tensor.unsqueeze, T, (a, -1)), self.__torch_function__(torch.Tensor.unsqueeze, T, (b, -3))))
            return self.__torch_function__(torch.Tensor.sum, T, (products, -2))
        if not grads or not torch.is_grad_enabled():
            base = name[:-1] if name.endswith("_") and not name.endswith("__") else name
            if base != name and name not in PASS and base in ELEMENTWISE and _is_float(args[0]):
                # in-place arithmetic: its delta from the operands as they are before the write
                op = getattr(torch.Tensor, base)
                with torch.no_grad():
                    d = self.op_delta(base, "elementwise", op, args, kwargs, op(*args, **kwargs))
                    out = func(*args, **kwargs)
                self.set_delta(args[0], d, grow=True)
                return out
            with torch.no_grad():
                out = func(*args, **kwargs)
            return self.forward_delta(name, func, args, kwargs, out)
        if name in PASS:
            out = func(*args, **kwargs)
            if name in ("__setitem__", "copy_", "index_put_"):  # the target carries the gradient now
                self.note(args[0], 0)
            fan = max([1] + [max(1, o.numel()) // max(1, t.numel()) for o in _tensors(out) for t in grads
                             if name in ("expand", "expand_as", "repeat")] +
                      [max(1, t.numel()) // max(1, o.numel()) for o in _tensors(out) for t in grads
                       if name in ("sum", "mean")])
            self.note(out, fan)
            return self.forward_delta(name, func, args, kwargs, out)
        base = name[:-1] if name.endswith("_") and not name.endswith("__") else name
        inplace = base != name
        if base == "max" or base == "min":  # binary forms are elementwise
            kind = "elementwise" if len(args) > 1 and isinstance(args[1], torch.Tensor) else "reduce"
        elif base in ELEMENTWISE:
            kind = "elementwise"
        elif base in REDUCE:
            kind = "reduce"
        elif base in DENSE:
            kind = "dense"
        else:
            out = func(*args, **kwargs)
            if any(_is_float(o) and o.requires_grad for o in _tensors(out)):
                raise UnknownOp(name)
            return out
        op = getattr(torch.Tensor, base) if inplace else func
        with torch.no_grad():
            value = op(*args, **kwargs)
        if kind == "dense":
            out = self.dense(base, args, kwargs, value)
        else:
            out = self.surrogate(base, kind, op, args, kwargs, value)
        if inplace:
            target = args[0]
            target.copy_(out)
            self.note(target, 0)
            self.set_delta(target, self.delta(out), grow=True)
            return target
        return out

    def forward_delta(self, name, func, args, kwargs, out):
        """Out-of-gradient ops (and PASS ops): their outputs' delta from their operands'."""
        ins = [t for t in _tensors(list(args)) + _tensors(list(kwargs.values())) if _is_float(t)]
        d_in = max([self.delta(t) for t in ins] + [0.0])
        base = name[:-1] if name.endswith("_") and not name.endswith("__") else name
        outs = _tensors(out)
        if name in ("__setitem__", "copy_", "index_put_") or (base != name and name not in PASS):
            target = args[0]
            self.set_delta(target, d_in, grow=True)
            return out
        if not outs or not any(_is_float(o) for o in outs):
            return out
        d = d_in
        if base in ("sum", "mean") and ins:
            x = ins[0]
            o = outs[0]
            n = max(1, x.numel() // max(1, o.numel()))
            eps = ULP.get(o.dtype, 0.0)
            S = _fmax(x) * n
            d = n * d_in + 2 * n * eps * S + eps * _fmax(o)
            if base == "mean":
                d /= n
        elif base in PASS:
            if d_in:
                d = d_in + max(ULP.get(o.dtype, 0.0) * _fmax(o) for o in outs if _is_float(o))
        elif ins and base in ELEMENTWISE | set(REDUCE) | DENSE or (base in ("max", "min")):
            # no operand carries gradient: the delta rules alone (coefficients are not needed)
            o = outs[0]
            if base in DENSE:
                d = self.dense_delta(base, args, kwargs, o)
            else:
                kind = ("elementwise" if base in ELEMENTWISE or (base in ("max", "min") and len(args) > 1
                                                                 and isinstance(args[1], torch.Tensor))
                        else "reduce")
                op = getattr(torch.Tensor, base) if base != name else func
                d = self.op_delta(base, kind, op, args, kwargs, o)
        elif any(_is_float(o) for o in outs) and ins:
            d = d_in + max(ULP.get(o.dtype, 0.0) * _fmax(o) for o in outs if _is_float(o)) if d_in else 0.0
        for o in outs:
            self.set_delta(o, d)
        return out

    # -- elementwise ops and reductions --------------------------------------------------------------
    def _operands(self, args, kwargs):
        """Positions ("a", i) / ("k", key) of the float tensor operands."""
        pos = [("a", i) for i, a in enumerate(args) if _is_float(a)]
        pos += [("k", k) for k, a in kwargs.items() if _is_float(a)]
        return pos

    @staticmethod
    def _get(args, kwargs, p):
        return args[p[1]] if p[0] == "a" else kwargs[p[1]]

    @staticmethod
    def _call(op, args, kwargs, subst):
        a, k = list(args), dict(kwargs)
        for p, t in subst.items():
            if p[0] == "a":
                a[p[1]] = t
            else:
                k[p[1]] = t
        return op(*a, **k)

    def _eval(self, base, kind, op, args, kwargs, shape, moved, want):
        """(value, {operand: D}) of the op with the float operands expanded to `shape` (elementwise:
        the output's; reductions: the operands' broadcast), those in `moved` shifted; D = the
        derivative of the value by each operand in `want` (one entry per element)."""
        subst = {}
        for p in self._operands(args, kwargs):
            t = self._get(args, kwargs, p).detach()
            if p in moved:
                t = moved[p]
            c = t.expand(shape).clone() if tuple(t.shape) != tuple(shape) else t.clone()
            subst[p] = c.requires_grad_(p in want)
        with torch.enable_grad():
            out = self._call(op, args, kwargs, subst)
            val = out[0] if isinstance(out, tuple) else out
            ds = {}
            ds = {p: torch.zeros_like(subst[p]) for p in want}
            if want and val.requires_grad:
                try:
                    gs = torch.autograd.grad(val, [subst[p] for p in want], torch.ones_like(val), allow_unused=True)
                    ds = {p: (g if g is not None else torch.zeros_like(subst[p])) for p, g in zip(want, gs)}
                except RuntimeError:
                    # eager's backward of this op raises (pow by a bool exponent: `exponent - 1`): a
                    # value whose gradient eager never takes (dead, or eager's backward raises too)
                    pass
        return val.detach(), ds

    def _corners(self, args, kwargs, kind):
        """Operand shifts by +-delta: every sign combination (elementwise), plus alternating signs
        along the elements (reductions: shifts within a slice)."""
        ops = [p for p in self._operands(args, kwargs) if self.delta(self._get(args, kwargs, p)) > 0]
        ops = sorted(ops, key=lambda p: -self.delta(self._get(args, kwargs, p)))[:MAX_CORNERS]
        if not ops:  # exact operands: both sides compute the same value and derivative
            return []
        out = []
        for bits in range(1 << len(ops)):
            m = {}
            for j, p in enumerate(ops):
                t = self._get(args, kwargs, p).detach()
                d = self.delta(t) * (1 if bits >> j & 1 else -1)
                m[p] = (t.double() + d).to(t.dtype)
            out.append(m)
        if kind == "reduce" and ops:
            for sign in (1, -1):
                m = {}
                for p in ops:
                    t = self._get(args, kwargs, p).detach()
                    alt = (torch.arange(t.numel()).reshape(t.shape) % 2 * 2 - 1).double() * sign
                    m[p] = (t.double() + alt * self.delta(t)).to(t.dtype)
                out.append(m)
        return out

    def own_delta(self, base, kind, args, kwargs, value, shape):
        """The op's own discrepancy between eager and a fused evaluation (gen.py's bounds)."""
        eps = ULP.get(value.dtype, 0.0)
        if kind == "elementwise":
            if base in TRANSCENDENTAL:
                return 2 * eps * _fmax(value)
            alpha = kwargs.get("alpha", args[2] if base in ("add", "sub") and len(args) > 2 else 1)
            if base in ("add", "sub") and alpha != 1:
                b = args[1] if len(args) > 1 else kwargs.get("other")
                return eps * (_fmax(value) + abs(float(alpha)) * (_fmax(b) if isinstance(b, torch.Tensor)
                                                                  else abs(float(b))))
            return 0.0
        x = [self._get(args, kwargs, p) for p in self._operands(args, kwargs)]
        n = max(1, math.prod(shape) // max(1, value.numel()))
        mx = max([_fmax(t) for t in x] + [0.0])
        mo = _fmax(value)
        if base in SELECT:
            return 0.0
        if base == "prod":
            return 2 * (n + 1) * eps * mo
        if base == "logsumexp":
            return 4 * eps * (n + 2 + mo)
        if base in ("var", "std"):
            e = 4 * eps * (mo + mx * mx)
            return math.sqrt(e) + 4 * eps * mo if base == "std" else e
        if base == "pairwise_distance":
            return (shape[-1] + 4 if shape else 4) * eps * mo + 2 * (n + 1) * eps * (mo + mx)
        return 2 * (n + 1) * eps * (mo + mx)  # norms

    def op_delta(self, base, kind, op, args, kwargs, value):
        """The delta of an elementwise op or reduction's value: its own, plus what the operands'
        deltas move it by."""
        shape = self._shape(kind, args, kwargs, value)
        own = self.own_delta(base, kind, args, kwargs, value, shape)
        d = own
        for m in self._corners(args, kwargs, kind):
            v, _ = self._eval(base, kind, op, args, kwargs, shape, m, [])
            d = max(d, own + _maxdiff(v, value) + ULP.get(value.dtype, 0.0) * _fmax(value))
        return d

    def _shape(self, kind, args, kwargs, value):
        ops = [self._get(args, kwargs, p) for p in self._operands(args, kwargs)]
        if kind == "elementwise":
            return tuple(value.shape)
        return tuple(torch.broadcast_shapes(*[t.shape for t in ops])) if ops else tuple(value.shape)

    def surrogate(self, base, kind, op, args, kwargs, value):
        val = value[0] if isinstance(value, tuple) else value
        shape = self._shape(kind, args, kwargs, val)
        pos = self._operands(args, kwargs)
        want = [p for p in pos if self._get(args, kwargs, p).requires_grad]
        _, D = self._eval(base, kind, op, args, kwargs, shape, {}, want)
        C1 = {p: D[p].abs() for p in want}
        D = {p: D[p].double() for p in want}
        C2 = {p: C1[p].double() for p in want}
        own = self.own_delta(base, kind, args, kwargs, val, shape)
        d_out = own
        for m in self._corners(args, kwargs, kind):
            v, Dc = self._eval(base, kind, op, args, kwargs, shape, m, want)
            d_out = max(d_out, own + _maxdiff(v, val) + ULP.get(val.dtype, 0.0) * _fmax(val))
            for p in want:
                C2[p] = torch.maximum(C2[p], C1[p].double() + _coef_diff(D[p], Dc[p]))
        eps = ULP.get(val.dtype, 0.0)
        if base in TRANSCENDENTAL:  # the derivative's terms, recomputed on tiles (2 ulps each)
            r = val.detach().double().expand(shape)
            M = {"sigmoid": r.abs() * (1 + r.abs()), "tanh": 1 + r * r}.get(base)
            for p in want:
                C2[p] = C2[p] + 8 * eps * (M if M is not None else C1[p].double())
        if kind == "reduce" and base in SELECT and self._operands(args, kwargs):
            x = self._get(args, kwargs, pos[0])
            dx = self.delta(x)
            if dx > 0 and pos[0] in C2:
                dims, keep = _reduced_dims(base, args, kwargs, x.dim())
                ext = _bcast_grad(val.detach(), tuple(x.shape), dims, keep)
                near = ((x.detach().double() - ext.double()).abs() <= 2 * dx).double()
                C2[pos[0]] = torch.maximum(C2[pos[0]], C1[pos[0]].double() + near)
        if kind == "reduce" and base not in SELECT:
            n = max(1, math.prod(shape) // max(1, val.numel()))
            for p in want:
                C2[p] = C2[p] + 4 * (n + 2) * eps * C1[p].double()
        fan = max([1] + [max(1, math.prod(shape)) // max(1, self._get(args, kwargs, p).numel()) for p in want])
        if kind == "reduce":
            fan = max(fan, max(1, math.prod(shape)) // max(1, val.numel()))
        dims, keep = (_reduced_dims(base, args, kwargs, len(shape)) if kind == "reduce" else (None, True))
        operands = [self._get(args, kwargs, p) for p in want]
        mode = self

        def bw(g):
            C = (C1, C2, D, C1)[mode.channel]
            if kind == "reduce":
                g = _bcast_grad(g, shape, dims, keep)
            res = []
            for p, t in zip(want, operands):
                res.append(_safe_mul(C[p].to(g.dtype), g).sum_to_size(t.shape).to(t.dtype))
            return res

        out = _Surrogate.apply(val, bw, *operands)
        self.note(out, fan)
        self.set_delta(out, d_out)
        if isinstance(value, tuple):  # max/min with a dim: (values, indices)
            self.set_delta(value[1], 0.0)
            return type(value)((out, value[1]))
        return out

    # -- softmax, log_softmax -----------------------------------------------------------------------
    def dense_delta(self, base, args, kwargs, value):
        x = args[0]
        dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
        n = x.shape[dim] if x.dim() else 1
        eps = ULP.get(value.dtype, 0.0)
        d = 2 * self.delta(x)
        if base.endswith("log_softmax"):
            return 4 * eps * (n + 2 + _fmax(x)) + d
        return 4 * eps * (n + 2) + d * (1 + _fmax(value))

    def dense(self, base, args, kwargs, value):
        x = args[0]
        dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
        dim = dim % x.dim() if x.dim() else 0
        n = x.shape[dim] if x.dim() else 1
        s = (value.detach().double().exp() if base.endswith("log_softmax") else value.detach().double())
        grow = math.exp(2 * self.delta(x)) if 2 * self.delta(x) < 700 else math.inf  # e^(2 delta): gen.py's
        s_hi = s * grow + 4 * ULP.get(value.dtype, 0.0) * (n + 2)
        mode, log = self, base.endswith("log_softmax")

        def bw(g):
            ss = (s, s_hi, s, s)[mode.channel]
            sign = -1 if mode.channel == 2 else 1  # channel 2: the derivative itself
            g64 = g.double()
            keep = dict(dim=dim, keepdim=True) if x.dim() else {}
            if log:  # g - s * sum(g)
                r = g64 + sign * ss * g64.sum(**keep)
            else:  # s * (g - sum(g * s))
                r = ss * g64 + sign * ss * (ss * g64).sum(**keep)
            return [r.to(x.dtype)]

        out = _Surrogate.apply(value, bw, x)
        self.note(out, n)
        self.set_delta(out, self.dense_delta(base, args, kwargs, value))
        return out


def bounds(fn, args, leaves, incoming):
    """Per leaf of `leaves` (indices into `args`, which require grad): (B, G, O) for the gradient
    of fn(*args)'s outputs `incoming` is given for ({output index: incoming gradient}), B the bound
    of the module docstring, G eager's gradient with zero incoming gradients contributing nothing
    (0 * inf = 0, where eager's backward makes a NaN of a derivative it did not need) and O where
    T1 overflowed the leaf's dtype although T1 for an incoming gradient scaled by SCALE did not (the
    terms are finite, their absolute sum is not: the order decides whether a sum overflows); None
    for a leaf no output reaches. Raises UnknownOp (or the program's own error)."""
    mode = Bound()
    with mode:
        out = fn(*args)
    outs = [out[k] for k in incoming]
    xs = [args[i] for i in leaves]
    ts = []
    for ch in (0, 1, 2, 3):
        mode.channel = ch
        gins = [incoming[k] if ch == 2 else incoming[k].abs() * (SCALE if ch == 3 else 1) for k in incoming]
        ts.append(torch.autograd.grad(outs, xs, gins, retain_graph=ch < 3, allow_unused=True))
    res = []
    for x, t1, t2, g, t1s in zip(xs, *ts):
        if t2 is None:
            res.append(None)
            continue
        t1, t2 = t1.double(), t2.double()
        n = mode.rounds
        eps = max(mode.eps, ULP.get(x.dtype, 0.0))
        tiny = torch.finfo(x.dtype).tiny
        overflow = torch.isinf(t1) & torch.isfinite(t1s.double())
        res.append((2 * n * eps * t2 + (t2 - t1).abs() + n * tiny, g, overflow))
    return res
