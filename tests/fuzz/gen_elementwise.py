"""The program generator's elementwise forms (a mixin of gen.Generator): binary and unary ops,
scalars, where/masked_fill, casts, each with its error bound against eager."""

import torch

from gen_common import DTYPE_NAME, ULP, Reject, Val, _finite_max, _is_float


class _Exact:
    """An error-free dividend (the number of `s / x`, the 1 of reciprocal) for _div's bound."""
    err = 0.0


EXACT = _Exact()


class ElementwiseForms:
    def elementwise(self, a=None):
        rng = self.rng
        a = a or self.operand()
        kind = rng.random()
        if kind < 0.6:  # binary, tensor-tensor (the pairwise core)
            b = self.operand(exclude=a, prefer_recent=False)
            if rng.random() < 0.07:
                b = a
                self.forms.add("same_operand")
            op = rng.choice(["sub", "add", "mul", "div", "min", "max", "minimum", "maximum", "cmp", "cmp",
                             "where", "clamp_t", "clamp2_t", "clamp_min_t", "logical", "pow_t", "sub_alpha",
                             "floordiv", "truncdiv", "rsub_s", "add_alpha", "hypot", "bitwise", "to_t", "rem"])
        else:
            b = None
            op = rng.choice(["abs", "neg", "neg_op", "relu", "sqrt", "exp", "log", "sigmoid", "lnot", "pow_s",
                             "sq", "clamp_s", "clamp_min_s", "clamp_max_s", "sub_s", "mul_s", "div_s",
                             "cmp_s", "where_s", "to", "add_s", "rsub_s1", "zero_dim_const",
                             "atan", "rsqrt", "log1p", "square", "masked_fill", "invert", "sin", "cos", "tanh",
                             "rdiv_s", "reciprocal", "fill_like", "acos", "asin", "tan", "log2", "log10", "erf",
                             "erfc", "sinh", "cosh", "expm1", "rounding", "sign", "rem_s", "archyp"])
        A, B = a.name, b.name if b else None
        s = self.scalar()
        cmp = rng.choice(["<", "<=", ">", ">=", "==", "!="])
        lin = lambda out: self._lin(a, b, out)  # noqa: E731
        mx = lambda out: max(a.err, b.err if b else 0.0)  # noqa: E731

        def disc(out):
            self.need_exact(a, b)
            return 0.0

        def cmpf(out):
            self.margin(a, b if b else float(eval(s, {}, self.env)))
            return 0.0

        def trans(out):  # compare.py's aten_on_tile_2ulp
            self.need_exact(a, b)
            return 2 * self.ulp_err(out)

        def alpha(k):
            # a + k*b rounded once (FMA) or twice: they differ by up to 1 ulp of k*b and of the sum.
            def f(out):
                self.need_exact(a, b)
                return ULP[out.dtype] * (_finite_max(out) + abs(k) * _finite_max(b.t)) if _is_float(out) else 0.0
            return f

        al = rng.choice(["-1", "3", "0.5"])
        # pow and clamp read a number by value: a runtime number there is bound per call
        # (kernels/runtime/bind_numbers.h), so the forms draw the program's scalar parameter too.
        runtime = self.scalar_params[0] if self.scalar_params and rng.random() < 0.3 else None
        exponent = runtime or rng.choice(["2", "0.5", "3", "-1", "2.5", "-2", "1.7"])
        bounds = f"min={runtime}" if runtime else rng.choice(["0, 1", "-0.5, 0.5", "min=0.0", "max=2"])
        table = {
            "sub": (f"{A} - {B}", lin), "add": (f"{A} + {B}", lin), "mul": (f"{A} * {B}", lambda o: self._mul(a, b, o)),
            "div": (f"{A} / {B}", lambda o: self._div(a, b, o)),
            "min": (f"torch.min({A}, {B})", mx), "max": (f"torch.max({A}, {B})", mx),
            "minimum": (f"torch.minimum({A}, {B})", mx), "maximum": (f"torch.maximum({A}, {B})", mx),
            "cmp": (f"{A} {cmp} {B}", cmpf), "where": (None, None),
            "clamp_t": (f"torch.clamp({A}, min={B})", mx), "clamp2_t": (f"torch.clamp({A}, {B}, {B} + 1)", mx),
            "clamp_min_t": (f"{A}.clamp_min({B})", mx),
            "logical": (f"torch.logical_{rng.choice(['and', 'or', 'xor'])}({A}, {B})", disc),
            # alpha != 1 runs ATen's kernel on each tile: eager's vectorized loop fuses a + alpha*b
            # (FMA) where its broadcasting scalar loop rounds twice, so the contract is 1 ulp, as
            # for the transcendental ops (BOUND_CONTRACTS in compare.py).
            "pow_t": (f"torch.pow({A}, {B})", trans), "sub_alpha": (f"torch.sub({A}, {B}, alpha=2)", alpha(2)),
            "add_alpha": (f"torch.add({A}, {B}, alpha={al})", alpha(float(al))),
            "floordiv": (f"torch.div({A}, {B}, rounding_mode='floor')", disc),
            "truncdiv": (f"torch.div({A}, {B}, rounding_mode='trunc')", disc),
            "rsub_s": (f"{s} - {A}", lin), "rsub_s1": (f"{s} - {A}", lin),
            "abs": (f"{A}.abs()", mx), "neg": (f"torch.neg({A})", mx), "neg_op": (f"-{A}", mx),
            "relu": (f"torch.relu({A})", mx), "sqrt": (f"{A}.sqrt()", trans), "exp": (f"torch.exp({A})", trans),
            "log": (f"{A}.log()", trans), "sigmoid": (f"torch.sigmoid({A})", trans),
            "lnot": (f"torch.logical_not({A})", disc),
            "atan": (f"torch.atan({A})", trans), "sin": (f"torch.sin({A})", trans), "cos": (f"{A}.cos()", trans),
            "tanh": (f"torch.tanh({A})", trans), "rsqrt": (f"{A}.rsqrt()", trans), "log1p": (f"torch.log1p({A})", trans),
            "acos": (f"torch.acos({A})", trans), "asin": (f"{A}.asin()", trans), "tan": (f"torch.tan({A})", trans),
            "log2": (f"torch.log2({A})", trans), "log10": (f"{A}.log10()", trans), "erf": (f"torch.erf({A})", trans),
            "erfc": (f"torch.special.erfc({A})", trans), "sinh": (f"torch.sinh({A})", trans),
            "cosh": (f"{A}.cosh()", trans), "expm1": (f"torch.expm1({A})", trans),
            "rounding": (f"torch.{rng.choice(['floor', 'ceil', 'trunc', 'round'])}({A})", disc),
            "sign": (f"torch.sign({A})", disc),
            "archyp": (f"torch.{rng.choice(['asinh', 'acosh', 'atanh'])}({A})", trans),
            "rem": (rng.choice([f"torch.remainder({A}, {B})", f"torch.fmod({A}, {B})"]), disc),
            "rem_s": (rng.choice([f"{A} % {s}", f"torch.fmod({A}, {s})"]), disc),
            "square": (f"torch.square({A})", trans), "hypot": (f"torch.hypot({A}, {B})", trans),
            "masked_fill": (None, None),
            "bitwise": (f"{A} {rng.choice(['&', '|', '^'])} {B}", disc), "invert": (f"~{A}", disc),
            "pow_s": (f"{A}.pow({exponent})", trans),
            # reads A's shape and dtype alone (the registry's full_like)
            "fill_like": (rng.choice([f"torch.zeros_like({A})", f"torch.ones_like({A})", f"torch.full_like({A}, {s})"]),
                          disc),
            "sq": (f"{A} ** 2", trans), "clamp_s": (f"{A}.clamp({bounds})", mx),
            "clamp_min_s": (f"{A}.clamp_min({s})", mx), "clamp_max_s": (f"torch.clamp_max({A}, {s})", mx),
            "sub_s": (f"{A} - {s}", lin), "add_s": (f"{A} + {s}", lin),
            "mul_s": (f"{A} * {s}", lambda o: self._mul(a, float(eval(s, {}, self.env)), o)),
            "div_s": (f"{A} / {s}", lambda o: self._div(a, float(eval(s, {}, self.env)), o)),
            # a number over a tensor: x.reciprocal() * s, in eager and TorchScript alike
            "rdiv_s": (f"{s} / {A}", lambda o: self._div(EXACT, a, o)),
            "reciprocal": (f"{A}.reciprocal()", lambda o: self._div(EXACT, a, o)),
            "cmp_s": (f"{A} {cmp} {s}", cmpf),
            "where_s": (None, None),
            # to(dtype), or to(device, dtype) as a trace records x.to(y) and x.type(y.type()) (a
            # constant device) and a script x.to(torch.device("cpu"), ...)
            "to": (rng.choice([f"{A}.to({{d}})", f"{A}.to({A}.device, {{d}})", f"{A}.to(torch.device('cpu'), {{d}})"])
                   .format(d=DTYPE_NAME[self.pick_dtype()]), lambda o: self._cast(a, o)),
            # a cast to another value's type (scripted: to.other, type_as, a run-time dtype;
            # passes/prototype_casts.cpp); A's shape, B's dtype
            "to_t": (rng.choice([f"{A}.to({B})", f"{A}.type_as({B})", f"{A}.to({B}.dtype)"]) if B else None,
                     lambda o: self._cast(a, o)),
            "zero_dim_const": (f"{A} * torch.tensor({rng.choice(['0.5', '2', '-1.5'])})", lambda o: self._mul(a, 2.0, o)),
        }
        expr, f = table[op]
        if op in ("floordiv", "truncdiv") and self.int_min_by_minus_one(a.t, b.t):
            # Eager itself dies of SIGFPE on INT_MIN // -1 (ATen's integer div_trunc kernel, torch
            # 2.11); there is no result to compare, so the program is not generated.
            return None
        if op == "hypot" and not (a.t.is_floating_point() and b.t.is_floating_point()):
            return None  # ATen's hypot has float kernels only: nothing to compare
        if op in ("bitwise", "invert") and any(v.t.dtype.is_floating_point for v in (a, b) if v is not None):
            return None  # ATen's bitwise ops take bools and integers only
        if op in ("bitwise", "invert"):
            self.forms.add("bool_mask_algebra" if a.t.dtype == torch.bool else "bitwise_int")
        if op == "masked_fill":
            conds = [v for v in self.vals if v.t.dtype == torch.bool and not v.err]
            if not conds:
                return None
            expr, f = f"{A}.masked_fill({rng.choice(conds).name}, {s})", mx
            self.forms.add("masked_fill")
        if op in ("where", "where_s"):
            conds = [v for v in self.vals if v.t.dtype == torch.bool and not v.err]
            if not conds:
                return None
            c = rng.choice(conds).name
            other = B if op == "where" else s
            expr = f"torch.where({c}, {A}, {other})" if rng.random() < 0.5 else f"torch.where({c}, {other}, {A})"
            f = mx
            self.forms.add("where")
        if op == "zero_dim_const":
            self.forms.add("constant")
        if op == "fill_like":
            self.forms.add("fill_like")
        return self.emit(expr, "elementwise", f)

    @staticmethod
    def int_min_by_minus_one(a, b):
        try:
            rt = torch.result_type(a, b)
            if rt.is_floating_point or rt == torch.bool:
                return False
            lo = torch.iinfo(rt).min
            return bool(((a.to(rt) == lo) & (b.to(rt) == -1)).any())
        except RuntimeError:
            return False  # does not broadcast: eager raises, a regular error program

    # error-bound propagation for arithmetic (values, max over elements, float64 math)
    def _lin(self, a, b, out):
        e = a.err + (b.err if b else 0.0)
        return (e + self.ulp_err(out)) if e else 0.0

    def _mul(self, a, b, out):
        eb = b.err if isinstance(b, Val) else 0.0
        if not (a.err or eb):
            return 0.0
        ma = _finite_max(a.t)
        mb = _finite_max(b.t) if isinstance(b, Val) else abs(b)
        return a.err * mb + eb * ma + a.err * eb + self.ulp_err(out)

    def _div(self, a, b, out):
        eb = b.err if isinstance(b, Val) else 0.0
        if not (a.err or eb):
            return 0.0
        tb = b.t if isinstance(b, Val) else torch.tensor(float(b))
        d = tb.double().abs()
        d = d[torch.isfinite(d)]
        mn = float(d.min()) if d.numel() else 0.0
        if mn <= 4 * eb or mn == 0.0:
            raise Reject()
        return (a.err + _finite_max(out) * eb) / (mn - eb) + self.ulp_err(out)

    def _cast(self, a, out):
        if not a.err:
            return 0.0
        if not out.dtype.is_floating_point:
            raise Reject()
        return a.err + self.ulp_err(out)
