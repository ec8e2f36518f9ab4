"""Random program generator for the differential fuzzer.

A program is a TorchScript-compatible Python function over a few input tensors (and sometimes a
scalar argument) built from the forms tsfuse fuses: operand views (x[:, None], unsqueeze, slices,
selects, chunk/split/unbind, t/transpose/permute/expand/view/reshape), pairwise elementwise chains,
in-place ops on intermediates, reductions (with dims/keepdim/dtype) and pairwise-then-reduce.

Generation evaluates every candidate line eagerly on the program's own inputs (`trial`), so the
generator knows each value's shape, dtype and data. That lets it
  * keep mostly valid programs (a failing line is usually discarded; a few are kept on purpose:
    programs eager rejects must be rejected by the optimized program too), and
  * track, for every float value, an absolute error bound `err` against eager (0 = bit-exact).
    Elementwise float ops on exact inputs are bit-exact; transcendental ops are exact to 1 ulp
    (tsfuse runs ATen's vectorized kernel on contiguous tiles where eager may take its scalar
    loop); float reductions are exact up to a summation-order bound. Discontinuous ops (compares,
    casts to integers, argmax, floor division, logical ops) are only applied to an inexact value
    when the data keeps a margin larger than the bound, so an exact comparison stays meaningful.
The runner compares outputs bit-exactly where err == 0 and within err elsewhere.
"""
import math
import random
import re
from dataclasses import dataclass, field

import torch

FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
DTYPE_WEIGHTS = [(torch.float32, 34), (torch.float64, 9), (torch.float16, 7), (torch.bfloat16, 7),
                 (torch.int32, 8), (torch.int64, 12), (torch.uint8, 6), (torch.bool, 10)]
DTYPE_NAME = {torch.float32: "torch.float32", torch.float64: "torch.float64", torch.float16: "torch.float16",
              torch.bfloat16: "torch.bfloat16", torch.int32: "torch.int32", torch.int64: "torch.int64",
              torch.uint8: "torch.uint8", torch.bool: "torch.bool"}
# Relative rounding unit (1 ulp at the value's magnitude, as a fraction of it).
ULP = {torch.float32: 2.0 ** -23, torch.float64: 2.0 ** -52, torch.float16: 2.0 ** -10, torch.bfloat16: 2.0 ** -7}


# ---------------------------------------------------------------------------------------------
# Inputs: a spec (shape, dtype, layout, seed) rebuilt identically for every run and reproducer.
# ---------------------------------------------------------------------------------------------
@dataclass
class InputSpec:
    shape: tuple
    dtype: torch.dtype
    layout: str = "contiguous"  # contiguous | transposed | strided | expanded
    seed: int = 0
    specials: bool = False  # sprinkle NaN/inf/-0.0 (floats) or extremes (integers)
    ties: bool = False  # small integers stored as floats (ties for min/max/argmax)

    def code(self):
        return (f"make_input({tuple(self.shape)!r}, {DTYPE_NAME[self.dtype]}, {self.layout!r}, "
                f"seed={self.seed}, specials={self.specials}, ties={self.ties})")


def make_input(shape, dtype, layout="contiguous", seed=0, specials=False, ties=False):
    """Deterministic test tensor of `shape`/`dtype` with the requested memory layout."""
    g = torch.Generator().manual_seed(seed)
    shape = tuple(shape)
    # The storage shape for the layout; values are drawn there, then viewed as `shape`.
    if layout == "transposed" and len(shape) >= 2:
        base_shape = shape[:-2] + (shape[-1], shape[-2])
    elif layout == "strided" and len(shape) >= 1:
        base_shape = shape[:-1] + (shape[-1] * 2,)
    elif layout == "expanded" and len(shape) >= 1:
        base_shape = (1,) + shape[1:]
    else:
        base_shape = shape
    n = math.prod(base_shape)
    if dtype.is_floating_point:
        if ties:
            v = torch.randint(-4, 5, (n,), generator=g).double() / 2
        else:
            v = torch.randn(n, generator=g, dtype=torch.float64) * 2
        if specials and n:
            pick = torch.randint(0, 8, (n,), generator=g)
            vals = torch.tensor([math.nan, math.inf, -math.inf, -0.0, 0.0, 1.0], dtype=torch.float64)
            mask = pick < 2
            v = torch.where(mask, vals[torch.randint(0, 6, (n,), generator=g)], v)
        v = v.to(dtype)
    elif dtype == torch.bool:
        v = torch.randint(0, 2, (n,), generator=g).bool()
    else:
        lo, hi = (0, 12) if dtype == torch.uint8 else (-9, 10)
        v = torch.randint(lo, hi, (n,), generator=g).to(dtype)
        if specials and n:
            info = torch.iinfo(dtype)
            pick = torch.randint(0, 6, (n,), generator=g)
            ext = torch.tensor([info.max, info.min], dtype=dtype)[torch.randint(0, 2, (n,), generator=g)]
            v = torch.where(pick == 0, ext, v)
    v = v.reshape(base_shape)
    if layout == "transposed" and len(shape) >= 2:
        return v.transpose(-1, -2)
    if layout == "strided" and len(shape) >= 1:
        return v[..., ::2]
    if layout == "expanded" and len(shape) >= 1:
        return v.expand(shape)
    return v.contiguous()


# ---------------------------------------------------------------------------------------------
# Programs
# ---------------------------------------------------------------------------------------------
@dataclass
class Program:
    name: str
    seed: int
    params: list  # [(name, annotation)]
    inputs: list  # InputSpec or python scalar, one per param
    lines: list  # statements of the body
    outputs: list  # names returned (as a tuple)
    errs: list  # per output: abs error bound (0.0 = bit-exact), math.inf for non-float is never used
    forms: set = field(default_factory=set)
    expect_error: bool = False  # the generator kept a line eager rejects
    trace: bool = False  # also run through torch.jit.trace

    def source(self, name=None, indent="", self_arg=False):
        args = ", ".join(f"{p}: {a}" for p, a in self.params)
        if self_arg:
            args = "self, " + args
        out = [f"{indent}def {name or self.name}({args}):"]
        out += [f"{indent}    {l}" for l in self.lines]
        out.append(f"{indent}    return ({''.join(o + ', ' for o in self.outputs)})")
        return "\n".join(out) + "\n"

    def make_inputs(self):
        return [make_input(s.shape, s.dtype, s.layout, s.seed, s.specials, s.ties)
                if isinstance(s, InputSpec) else s for s in self.inputs]

    def reproducer(self, lib_path, gen_dir):
        args = ", ".join(s.code() if isinstance(s, InputSpec) else repr(s) for s in self.inputs)
        return "\n".join([
            "import sys, torch",
            f"sys.path.insert(0, {gen_dir!r})",
            "from gen import make_input",
            f"torch.ops.load_library({lib_path!r})",
            "src = '''",
            self.source().rstrip("\n"),
            "'''",
            "cu = torch.jit.CompilationUnit(src)",
            "scope = {'torch': torch, 'Tensor': torch.Tensor}",
            "exec(src, scope)",
            f"def inputs(): return [{args}]",
            "with torch.no_grad():",
            f"    eager = scope[{self.name!r}](*inputs())",
            f"    fused = cu.{self.name}(*inputs())",
            "print(torch.jit.last_executed_optimized_graph())",
            "for e, f in zip(eager, fused):",
            "    print(e.dtype, f.dtype, e.shape, f.shape, e.stride(), f.stride())",
            "    print(e); print(f)",
        ])


class Reject(Exception):
    pass


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


class Generator:
    def __init__(self, seed, index=0):
        self.rng = random.Random(seed)
        self.seed = seed
        self.name = f"p{index}"
        self.env = {}
        self.vals = []  # tensor values usable as operands
        self.lines = []
        self.forms = set()
        self.counter = 0
        self.scalar_params = []
        self.expect_error = False

    # -- helpers ------------------------------------------------------------------------------
    def pick_dtype(self):
        ds, ws = zip(*DTYPE_WEIGHTS)
        return self.rng.choices(ds, ws)[0]

    def dim(self):
        r = self.rng.random()
        if r < 0.05:
            return 0
        if r < 0.25:
            return 1
        if r < 0.85:
            return self.rng.randint(2, 9)
        if r < 0.97:
            return self.rng.randint(10, 40)
        return self.rng.randint(100, 300)  # outer products past the kernels' parallel grain

    def fresh(self):
        self.counter += 1
        return f"v{self.counter}"

    def trial(self, expr):
        """Evaluates `expr` (an expression over the env) eagerly; raises on error."""
        return eval(expr, {"torch": torch}, self.env)

    def emit(self, expr, form, err_fn=None, keep_error_p=0.03, root=None):
        """Adds `name = expr` if eager accepts it and err_fn does not reject; returns the Val.
        With probability keep_error_p a line eager rejects is kept and ends the program."""
        try:
            out = self.trial(expr)
        except Reject:
            return None
        except Exception:
            if self.rng.random() < keep_error_p:
                name = self.fresh()
                self.lines.append(f"{name} = {expr}")
                self.error_out = Val(name, None)
                self.forms.update({form, "error"})
                self.expect_error = True
                raise StopProgram()
            return None
        if not isinstance(out, torch.Tensor):
            return None
        try:
            err = err_fn(out) if err_fn else 0.0
        except Reject:
            return None
        if err and _is_float(out):
            info = torch.finfo(out.dtype)
            if not math.isfinite(err) or _finite_max(out) + err > 0.25 * info.max:
                return None  # the bound is meaningless (near overflow / blown-up division)
        name = self.fresh()
        self.env[name] = out
        self.lines.append(f"{name} = {expr}")
        self.forms.add(form)
        v = Val(name, out, err, root=root)
        self.vals.append(v)
        return v

    # -- error bounds -------------------------------------------------------------------------
    @staticmethod
    def ulp_err(out):
        return ULP[out.dtype] * _finite_max(out) if _is_float(out) else 0.0

    def need_exact(self, *vals):
        for v in vals:
            if isinstance(v, Val) and v.err:
                raise Reject()

    @staticmethod
    def margin(a, b):
        """Comparisons of inexact values: every finite pair must differ by more than the bounds."""
        e = (a.err if isinstance(a, Val) else 0.0) + (b.err if isinstance(b, Val) else 0.0)
        if not e:
            return
        ta = a.t if isinstance(a, Val) else torch.tensor(a)
        tb = b.t if isinstance(b, Val) else torch.tensor(b)
        ta, tb = torch.broadcast_tensors(ta.double(), tb.double())
        d = (ta - tb).abs()
        d = d[torch.isfinite(d)]
        if d.numel() and float(d.min()) <= 2 * e:
            raise Reject()

    # -- program pieces -----------------------------------------------------------------------
    def operand(self, exclude=None, prefer_recent=True):
        cands = [v for v in self.vals if v is not exclude] or self.vals
        if prefer_recent and self.rng.random() < 0.6:
            return cands[-1] if self.rng.random() < 0.5 else cands[max(0, len(cands) - 3):][0]
        return self.rng.choice(cands)

    def scalar(self, like=None):
        r = self.rng.random()
        if self.scalar_params and r < 0.3:
            return self.rng.choice(self.scalar_params)
        lits = ["0.5", "2", "1", "0", "-1", "1.5", "0.25", "3", "-2.5", "1e-06", "100"]
        return self.rng.choice(lits)

    def params(self):
        n = self.rng.choices([1, 2, 3], [2, 6, 2])[0]
        same = self.rng.random() < 0.7
        dt0 = self.pick_dtype()
        family = self.rng.choice(["rows", "rows", "vectors", "batched", "bcast", "zero_dim"])
        self.family = family
        params, inputs = [], []
        d = self.rng.choice([1, 2, 2, 3, 4, 4, 5])
        b = self.dim()
        for i in range(n):
            dt = dt0 if same else self.pick_dtype()
            if family == "rows":
                shape = (self.dim(), d)
            elif family == "vectors":
                shape = (self.dim(),)
            elif family == "batched":
                shape = (b, self.dim(), d)
            elif family == "zero_dim" and i == n - 1 and n > 1:
                shape = ()
                self.forms.add("zero_dim")
            elif family == "zero_dim":
                shape = (self.dim(), d)
            else:  # a random broadcast layout: random rank, some dims 1
                rank = self.rng.randint(1, 4)
                shape = tuple(1 if self.rng.random() < 0.4 else self.dim() for _ in range(rank))
            if math.prod(shape) > 4000:
                shape = tuple(min(s, 8) for s in shape)
            layout = "contiguous"
            if shape and self.rng.random() < 0.3:
                layout = self.rng.choice(["transposed", "strided", "expanded"])
                self.forms.add("noncontig_input")
            spec = InputSpec(shape, dt, layout, self.rng.randrange(1 << 30),
                             specials=self.rng.random() < 0.25, ties=self.rng.random() < 0.2)
            name = f"x{i}"
            params.append((name, "Tensor"))
            inputs.append(spec)
            t = make_input(spec.shape, spec.dtype, spec.layout, spec.seed, spec.specials, spec.ties)
            self.env[name] = t
            v = Val(name, t, 0.0, param=True, root=name)
            self.vals.append(v)
        if self.rng.random() < 0.15:
            kind = self.rng.choice(["float", "int"])
            val = self.rng.choice([0.5, -1.5, 2.0, 0.0]) if kind == "float" else self.rng.choice([0, 1, 2, -3])
            params.append(("s0", kind))
            inputs.append(val)
            self.env["s0"] = val
            self.scalar_params.append("s0")
        return params, inputs

    def view_form(self, v=None):
        """An operand view of a param (or of an intermediate: 'views of intermediates')."""
        v = v or self.rng.choice(self.vals)
        t = v.t
        r = t.dim()
        n = v.name
        opts = []
        if r >= 1:
            opts += [(f"{n}[:, None]", "index_none"), (f"{n}[None]", "index_none"), (f"{n}.unsqueeze(1)", "unsqueeze"),
                     (f"{n}.unsqueeze(0)", "unsqueeze"), (f"{n}.unsqueeze(-1)", "unsqueeze")]
        if r == 1:
            opts += [(f"{n}[:, None]", "index_none"), (f"{n}[None, :]", "index_none")]
        if r >= 2:
            k = t.shape[-1]
            opts += [(f"{n}[:, None, :]", "index_none"), (f"{n}[None, :, :]", "index_none"),
                     (f"{n}[..., 0]", "select"), (f"{n}[:, {self.rng.randint(-1, 1)}]", "select"),
                     (f"{n}[:, None, :{max(1, k // 2)}]", "slice"), (f"{n}[:, {k // 2}:]", "slice"),
                     (f"{n}[None, :, {k // 2}:]", "slice"), (f"{n}[:, ::2]", "slice"),
                     (f"{n}[1:]", "slice"),
                     (f"{n}.t()", "transpose"), (f"{n}.transpose(0, 1)", "transpose"),
                     (f"{n}.permute({', '.join(map(str, reversed(range(r))))})", "permute"),
                     (f"{n}.chunk(2, -1)[{self.rng.randint(0, 1)}]", "chunk"),
                     (f"{n}.split(1, -1)[0]", "split"), (f"{n}.unbind(-1)[{self.rng.randint(-1, 0)}]", "unbind"),
                     (f"{n}.unsqueeze(1).chunk(2, -1)[0]", "chunk"),
                     (f"{n}.view(-1)", "view"), (f"{n}.reshape({t.shape[0]}, -1)", "view"),
                     (f"{n}.reshape(-1, 1)", "view")]
        if r >= 1 and t.shape[0] == 1:
            opts += [(f"{n}.expand({self.rng.randint(0, 5)}, {', '.join(['-1'] * (r - 1))})".replace(", )", ")"),
                      "expand")]
        opts += [(f"{n}.expand(2, {', '.join(['-1'] * r)})".replace(", )", ")"), "expand")]
        if len(self.vals) > 1:
            other = self.rng.choice(self.vals)
            opts += [(f"{n}.expand_as({other.name})", "expand")]
        expr, form = self.rng.choice(opts)
        if not v.param:
            form = "view_of_intermediate"
        return self.emit(expr, form, lambda out: v.err, root=v.root)

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
                             "floordiv", "truncdiv", "rsub_s", "add_alpha", "hypot"])
        else:
            b = None
            op = rng.choice(["abs", "neg", "neg_op", "relu", "sqrt", "exp", "log", "sigmoid", "lnot", "pow_s",
                             "sq", "clamp_s", "clamp_min_s", "clamp_max_s", "sub_s", "mul_s", "div_s",
                             "cmp_s", "where_s", "to", "add_s", "rsub_s1", "zero_dim_const",
                             "atan", "rsqrt", "log1p", "square", "masked_fill"])
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

        def trans(out):
            self.need_exact(a, b)
            return self.ulp_err(out)

        def alpha(k):
            # a + k*b rounded once (FMA) or twice: they differ by up to 1 ulp of k*b and of the sum.
            def f(out):
                self.need_exact(a, b)
                return ULP[out.dtype] * (_finite_max(out) + abs(k) * _finite_max(b.t)) if _is_float(out) else 0.0
            return f

        al = rng.choice(["-1", "3", "0.5"])
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
            "atan": (f"torch.atan({A})", trans), "rsqrt": (f"{A}.rsqrt()", trans), "log1p": (f"torch.log1p({A})", trans),
            "square": (f"torch.square({A})", trans), "hypot": (f"torch.hypot({A}, {B})", trans),
            "masked_fill": (None, None),
            "pow_s": (f"{A}.pow({rng.choice(['2', '0.5', '3', '-1', '2.5'])})", trans),
            "sq": (f"{A} ** 2", trans), "clamp_s": (f"{A}.clamp({rng.choice(['0, 1', '-0.5, 0.5', 'min=0.0', 'max=2'])})", mx),
            "clamp_min_s": (f"{A}.clamp_min({s})", mx), "clamp_max_s": (f"torch.clamp_max({A}, {s})", mx),
            "sub_s": (f"{A} - {s}", lin), "add_s": (f"{A} + {s}", lin),
            "mul_s": (f"{A} * {s}", lambda o: self._mul(a, float(eval(s, {}, self.env)), o)),
            "div_s": (f"{A} / {s}", lambda o: self._div(a, float(eval(s, {}, self.env)), o)),
            "cmp_s": (f"{A} {cmp} {s}", cmpf),
            "where_s": (None, None),
            "to": (f"{A}.to({DTYPE_NAME[self.pick_dtype()]})", lambda o: self._cast(a, o)),
            "zero_dim_const": (f"{A} * torch.tensor({rng.choice(['0.5', '2', '-1.5'])})", lambda o: self._mul(a, 2.0, o)),
        }
        expr, f = table[op]
        if op in ("floordiv", "truncdiv") and self.int_min_by_minus_one(a.t, b.t):
            # Eager itself dies of SIGFPE on INT_MIN // -1 (ATen's integer div_trunc kernel, torch
            # 2.11); there is no result to compare, so the program is not generated.
            return None
        if op == "hypot" and not (a.t.is_floating_point() and b.t.is_floating_point()):
            return None  # ATen's hypot has float kernels only: nothing to compare
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

    def inplace(self):
        """An in-place op on an intermediate (or, rarely, on a view of an input)."""
        cands = [v for v in self.vals if not v.param and (v.root is None or self.rng.random() < 0.15)]
        if not cands:
            return None
        v = self.rng.choice(cands)
        s = self.scalar()
        other = self.operand(exclude=v, prefer_recent=False)
        op = self.rng.choice([f"clamp_(min={s})", f"mul_({s})", f"add_({other.name})", f"sub_({s})",
                              "relu_()", "abs_()", "neg_()", f"clamp_({s}, 2)", f"div_(2)", f"mul_({other.name})"])
        if v.err or (other.err and other.name in op):
            return None  # keep in-place targets exact (their bound would have to be redone)
        try:
            eval(f"{v.name}.{op}", {"torch": torch}, self.env)
        except Exception:  # eager rejects it (ops raise before writing)
            if self.rng.random() < 0.05:
                self.lines.append(f"{v.name}.{op}")
                self.forms.update({"inplace", "error"})
                self.expect_error = True
                raise StopProgram()
            return None
        self.lines.append(f"{v.name}.{op}")
        self.forms.add("inplace_on_input_view" if v.root else "inplace")
        return v

    def reduction(self, v=None):
        rng = self.rng
        v = v or self.operand()
        t = v.t
        r = t.dim()
        n = v.name
        dims = None
        if r >= 1 and rng.random() < 0.8:
            k = rng.randint(1, min(r, 2))
            dims = sorted(rng.sample(range(r), k))
            dims = [d - r if rng.random() < 0.4 else d for d in dims]
        keep = rng.random() < 0.3
        ks = ", keepdim=True" if keep else ""
        dl = f"[{', '.join(map(str, dims))}]" if dims else None
        one = str(dims[0]) if dims else "-1"
        dt = ""
        if rng.random() < 0.15:
            dt = f", dtype={rng.choice(['torch.float64', 'torch.float32', 'torch.int64'])}"
        kind = rng.choice(["sum", "sum", "mean", "prod", "amax", "amin", "argmax", "argmin", "any", "all",
                           "max_dim", "min_dim", "max_idx", "logsumexp", "norm", "vector_norm"])
        red = set(range(r)) if dims is None else {d % r for d in dims}
        nred = math.prod(t.shape[d] for d in red) if r else 1
        if kind == "sum":
            expr = f"torch.sum({n}, {dl}{ks}{dt})" if dl else f"{n}.sum({dt[2:]})"
        elif kind == "mean":
            expr = f"{n}.mean({dl}{ks}{dt})" if dl else f"torch.mean({n}{dt})"
        elif kind == "prod":
            expr = f"{n}.prod({one}{ks}{dt})"
            red = {int(one) % r} if r else set()
            nred = t.shape[int(one)] if r else 1
        elif kind in ("amax", "amin"):
            expr = f"{n}.{kind}({dl or '[]'}{ks})" if rng.random() < 0.5 else f"torch.{kind}({n}, dim={dl or '[]'}{ks})"
        elif kind in ("argmax", "argmin"):
            expr = f"{n}.{kind}({one}{ks})" if dims else f"torch.{kind}({n})"
        elif kind in ("any", "all"):
            expr = f"{n}.{kind}({one}{ks})" if dims else f"torch.{kind}({n})"
        elif kind in ("max_dim", "min_dim"):
            expr = f"torch.{kind[:3]}({n}, {one}{ks})[0]"
        elif kind == "max_idx":
            expr = f"{n}.{rng.choice(['max', 'min'])}(dim={one}{ks})[1]"
        elif kind == "logsumexp":
            expr = f"torch.logsumexp({n}, {dl or '[' + one + ']'}{ks})"
        elif kind == "norm":
            expr = f"{n}.norm({rng.choice(['2.0', '1.0'])}, {dl or '[' + one + ']'}{ks})"
        else:
            order = rng.choice(["2.0", "1.0", 'float("inf")'])
            expr = f"torch.linalg.vector_norm({n}, {order}, {dl}{ks}{dt})"
        if kind in ("argmax", "argmin", "max_dim", "min_dim", "max_idx") and dims:
            red, nred = {int(one) % r}, t.shape[int(one)]

        def err(out):
            if kind in ("argmax", "argmin", "max_idx", "any", "all"):
                self.need_exact(v)
                return 0.0
            if kind in ("amax", "amin", "max_dim", "min_dim"):
                return v.err
            if not out.dtype.is_floating_point:
                self.need_exact(v)
                return 0.0
            if nred == 0:
                return v.err
            if not t.dtype.is_floating_point and out.dtype == torch.float64:
                return 0.0 if nred < 2 ** 20 else self.ulp_err(out)
            x = t.double()
            dd = sorted(red)
            eps = ULP[out.dtype]
            if kind in ("sum", "mean"):
                s = x.abs().sum(dd) if dd else x.abs()
                S = _finite_max(s)
                if S * 2 > torch.finfo(out.dtype).max * 0.25:
                    raise Reject()
                e = 2 * nred * eps * S + nred * v.err
                return (e / nred if kind == "mean" else e) + self.ulp_err(out)
            if kind == "prod":
                self.need_exact(v)
                # Partial products must stay in range in any order (else overflow/underflow
                # meets a zero or not depending on the order): bound them in log space over
                # the finite, non-zero factors.
                ax = x.abs()
                ok = torch.isfinite(ax) & (ax != 0)
                la = torch.where(ok, ax.log(), torch.zeros_like(ax))
                hi = la.clamp(min=0).sum(dd[0]) if dd else la.clamp(min=0)
                lo = la.clamp(max=0).sum(dd[0]) if dd else la.clamp(max=0)
                info = torch.finfo(out.dtype)
                if hi.numel() and (float(hi.max()) > math.log(info.max * 0.25)
                                   or float(lo.min()) < math.log(info.tiny * 1e6)):
                    raise Reject()
                return 2 * (nred + 1) * eps * _finite_max(out)
            if kind == "logsumexp":
                return 4 * eps * (nred + 2 + _finite_max(out)) + v.err
            # norms
            return 2 * (nred + 1) * eps * (_finite_max(out) + _finite_max(x)) + nred * v.err

        out = self.emit(expr, f"reduce:{kind}", err)
        if out is not None and not v.param:
            self.forms.add("pairwise_then_reduce")
        return out

    def build(self):
        params, inputs = self.params()
        rng = self.rng
        try:
            # operand views of the inputs, then a chain grown from them
            for _ in range(rng.choice([1, 2, 2, 3])):
                self.view_form(rng.choice([v for v in self.vals if v.param]))
            cur = self.vals[-1]
            body = rng.randint(1, 7)
            for i in range(body):
                r = rng.random()
                nxt = None
                if r < 0.08:
                    nxt = self.view_form(cur)
                elif r < 0.16:
                    self.inplace()
                elif r < 0.24 and i < body - 1:
                    nxt = self.reduction(cur)
                    if nxt is not None:
                        self.forms.add("reduce_then_pairwise")
                else:
                    nxt = self.elementwise(cur if rng.random() < 0.85 else None)
                cur = nxt or cur
            if rng.random() < 0.55:
                last = cur
                cur = self.reduction(last) or cur
                if rng.random() < 0.2 and self.reduction(last) is not None:
                    self.forms.add("multi_reduce")
        except StopProgram:
            pass
        # A rejected line's value is returned: TorchScript would drop an unused failing op.
        outs = [getattr(self, "error_out", None) or cur] if self.expect_error else [cur]
        extra = [v for v in self.vals if not v.param and v is not outs[0]]
        if extra and not self.expect_error and rng.random() < 0.3:
            outs.append(rng.choice(extra))
        body = "\n".join(self.lines)
        if re.search(r"\bs0\b", body):
            self.forms.add("scalar_arg")
        if re.search(r"(?<![\w.\[:])-?\d+(\.\d+)?(e-?\d+)?(?![\w\]])", re.sub(r"\[[^\]]*\]|\w+\(\d|dim=\S+", "", body)):
            self.forms.add("py_scalar")
        return Program(self.name, self.seed, params, inputs, self.lines, [v.name for v in outs],
                       [v.err for v in outs], self.forms, self.expect_error)


class StopProgram(Exception):
    pass


def generate(seed, index=0):
    """Program number `index` of a run seeded with `seed` (deterministic)."""
    g = Generator(seed * 1_000_003 + index, index)
    p = g.build()
    p.trace = (random.Random(p.seed).random() < 0.1 and not any(a != "Tensor" for _, a in p.params)
               and not p.expect_error)
    if p.trace:
        p.forms.add("traced")
    return p
