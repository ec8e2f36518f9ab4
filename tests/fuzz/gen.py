"""Random program generator for the differential fuzzer.

A program is a TorchScript-compatible Python function over a few input tensors (and sometimes a
scalar argument) built from the forms tsfuse fuses: operand views (x[:, None], unsqueeze, slices,
selects, chunk/split/unbind, t/transpose/permute/expand/view/reshape), pairwise elementwise chains,
in-place ops on intermediates, reductions (with dims/keepdim/dtype) and pairwise-then-reduce, and
(gen_forms.py) chunk/unbind unpacked into operands, buffers filled before they are read, repeats.

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
import os
import random
import re
from dataclasses import dataclass, field

import torch

from gen_common import DTYPE_NAME, DTYPE_WEIGHTS, ULP, Reject, StopProgram, Val, _finite_max, _is_float
from gen_elementwise import ElementwiseForms
from gen_forms import OperandForms
from gen_reduce import ReductionForms

# Where inputs live: TSFUSE_FUZZ_DEVICE=cuda runs every program on the GPU (eager CUDA vs tsfuse).
DEVICE = torch.device(os.environ.get("TSFUSE_FUZZ_DEVICE", "cpu"))


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


def make_input(shape, dtype, layout="contiguous", seed=0, specials=False, ties=False, device="cpu"):
    """Deterministic test tensor of `shape`/`dtype` with the requested memory layout, on `device`
    (drawn on the CPU, so the values are the same on every device)."""
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
    v = v.reshape(base_shape).to(device)  # moved before the layout's view, which it keeps
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

    def eager_fn(self):
        """The program as a Python function, run eagerly."""
        scope = {"torch": torch, "Tensor": torch.Tensor, "__name__": "tsfuse_fuzz_programs"}
        exec(self.source(), scope)  # noqa: S102 - generated test code
        return scope[self.name]

    def make_inputs(self):
        return [make_input(s.shape, s.dtype, s.layout, s.seed, s.specials, s.ties, DEVICE)
                if isinstance(s, InputSpec) else s for s in self.inputs]

    def reproducer(self, lib_path, gen_dir):
        args = ", ".join(s.code() if isinstance(s, InputSpec) else repr(s) for s in self.inputs)
        return "\n".join([
            *reproducer_head(self, lib_path, gen_dir),
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




class Generator(ElementwiseForms, ReductionForms, OperandForms):
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
        self.late_inputs = []  # (name, InputSpec) of inputs added after params()

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

    def new_input(self, shape, dtype):
        """A tensor input added by a form after params() (it becomes the last params)."""
        name = f"w{len(self.late_inputs)}"
        spec = InputSpec(tuple(shape), dtype, "contiguous", self.rng.randrange(1 << 30),
                         specials=self.rng.random() < 0.2, ties=self.rng.random() < 0.2)
        t = make_input(spec.shape, spec.dtype, spec.layout, spec.seed, spec.specials, spec.ties)
        self.env[name] = t
        self.late_inputs.append((name, spec))
        return Val(name, t, 0.0, param=True, root=name)

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

    def build(self):
        params, inputs = self.params()
        rng = self.rng
        try:
            # operand views of the inputs, then a chain grown from them
            for _ in range(rng.choice([1, 2, 2, 3])):
                self.view_form(rng.choice([v for v in self.vals if v.param]))
            r0 = rng.random()  # sometimes an operand form beyond a single view (gen_forms.py)
            if r0 < 0.05:
                self.unpack_form(rng.choice([v for v in self.vals if v.param]))
            elif r0 < 0.10:
                self.prefill_form()
            elif r0 < 0.15:
                self.repeat_form(rng.choice([v for v in self.vals if v.param]))
            elif r0 < 0.23:
                self.accumulate_form()
            elif r0 < 0.31:
                self.flatten_pairs_form()
            elif r0 < 0.36:
                self.matvec_form()
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
                elif r < 0.29:
                    nxt = rng.choice([self.unpack_form, self.repeat_form])(cur)
                elif r < 0.33:
                    nxt = self.mask_write_form(cur)
                elif r < 0.37:
                    nxt = self.stack_reduce_form(cur)
                elif r < 0.40:
                    nxt = self.rng.choice([self.triangle_form, self.zero_of_its_dtype_form])(cur)
                else:
                    nxt = self.elementwise(cur if rng.random() < 0.85 else None)
                cur = nxt or cur
            if rng.random() < 0.55:
                last = cur
                if not last.param and rng.random() < 0.15:
                    self.metadata_guard(last)
                cur = self.reduction(last) or cur
                if cur is not last and rng.random() < 0.3:
                    inner = cur  # a reduction of a reduction's value (tsfuse::reduce_chain)
                    cur = self.reduction(inner) or cur
                    if cur is not inner:
                        self.forms.add("nested_reduce")
                        if rng.random() < 0.4:
                            second = self.reduction(inner)
                            if second is not None:
                                self.forms.add("nested_multi")  # two reductions of it (reduce_sweep)
                                self.also_out = second  # returned too, so it is not dead code
                elif cur is not last and rng.random() < 0.3:
                    inner = cur
                    outer = self.fused_stage(inner)  # (gen_reduce.py)
                    if outer is not None:
                        cur = outer
                        self.forms.add("fused_stage")
                        if rng.random() < 0.4:
                            # a reduction of it, plain or fused, beside the fused one (one reduce_sweep)
                            second = (self.fused_stage if rng.random() < 0.4 else self.reduction)(inner)
                            if second is not None:
                                self.forms.add("fused_multi")
                                self.also_out = second
                if rng.random() < 0.2 and self.reduction(last) is not None:
                    self.forms.add("multi_reduce")
        except StopProgram:
            pass
        # A rejected line's value is returned: TorchScript would drop an unused failing op.
        outs = [getattr(self, "error_out", None) or cur] if self.expect_error else [cur]
        extra = [v for v in self.vals if not v.param and v is not outs[0]]
        also = getattr(self, "also_out", None)
        if also is not None and not self.expect_error and also is not outs[0]:
            outs.append(also)
        elif extra and not self.expect_error and rng.random() < 0.3:
            outs.append(rng.choice(extra))
        for name, spec in self.late_inputs:  # inputs a form added (fused_stage's weights)
            params.append((name, "Tensor"))
            inputs.append(spec)
        body = "\n".join(self.lines)
        if re.search(r"\bs0\b", body):
            self.forms.add("scalar_arg")
        if re.search(r"(?<![\w.\[:])-?\d+(\.\d+)?(e-?\d+)?(?![\w\]])", re.sub(r"\[[^\]]*\]|\w+\(\d|dim=\S+", "", body)):
            self.forms.add("py_scalar")
        return Program(self.name, self.seed, params, inputs, self.lines, [v.name for v in outs],
                       [v.err for v in outs], self.forms, self.expect_error)


def generate(seed, index=0):
    """Program number `index` of a run seeded with `seed` (deterministic)."""
    g = Generator(seed * 1_000_003 + index, index)
    p = g.build()
    p.trace = (random.Random(p.seed).random() < 0.1 and not any(a != "Tensor" for _, a in p.params)
               and not p.expect_error)
    if p.trace:
        p.forms.add("traced")
    return p


def reproducer_head(program, lib_path, gen_dir):
    """A reproducer script's first lines: imports, the library, the program's source as `src`."""
    return ["import sys, torch", f"sys.path.insert(0, {gen_dir!r})", "from gen import make_input",
            f"torch.ops.load_library({lib_path!r})", "src = '''", program.source().rstrip("\n"), "'''"]
