"""The differential fuzzer's own checks (tests/fuzz): its comparator must catch what it claims to,
its generator must be deterministic and produce programs TorchScript compiles."""
import math
import sys

import pytest
import torch

from conftest import SOURCE

sys.path.insert(0, str(SOURCE / "tests" / "fuzz"))
import gen  # noqa: E402
import compare as run  # noqa: E402 - the comparison rules


def nextafter_up(t):
    return torch.nextafter(t, torch.full_like(t, math.inf))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_bit_exact_comparison_rejects_one_ulp(dtype):
    e = torch.linspace(-3, 3, 37, dtype=torch.float64).to(dtype)
    assert run.compare_tensor(e, e.clone(), 0.0) is None
    o = e.clone()
    o[5] = nextafter_up(o[5:6].float()).to(dtype)[0] if dtype in (torch.float16, torch.bfloat16) else nextafter_up(o[5:6])[0]
    if torch.equal(o, e):  # the float step rounded back: take the dtype's own next value
        o[5] = torch.nextafter(e[5:6], torch.tensor([math.inf], dtype=dtype))[0]
    assert "not bit-exact" in run.compare_tensor(e, o, 0.0)


def test_signed_zero_and_nan_payload():
    e = torch.tensor([0.0, 1.0, math.nan])
    o = torch.tensor([-0.0, 1.0, -math.nan])
    # -0.0 differs bitwise from 0.0; a NaN's sign/payload does not matter, its position does.
    assert "not bit-exact" in run.compare_tensor(e, o, 0.0)
    assert run.compare_tensor(e, torch.tensor([0.0, 1.0, -math.nan]), 0.0) is None
    assert "NaN mask" in run.compare_tensor(e, torch.tensor([0.0, math.nan, 1.0]), 1.0)


class _Program:
    """A one-line program over fixed inputs a, b, as the classifier reruns it."""
    name = "p"

    def __init__(self, line, a, b):
        self.line, self.inputs = line, (a, b)

    def source(self):
        return f"def p(a: Tensor, b: Tensor):\n    v = {self.line}\n    return (v, )\n"

    def eager_fn(self):
        scope = {"torch": torch, "Tensor": torch.Tensor}
        exec(self.source(), scope)
        return scope["p"]

    def make_inputs(self):
        return [t.clone() for t in self.inputs]


def _flip(t, i):
    t = t.clone()
    t[i] = -t[i] if t[i] != 0 else (0.0 if torch.signbit(t[i]) else -0.0)
    return t


def test_signed_zero_tie_classification_is_narrow():
    a, b = torch.tensor([0.0, -0.0, -0.0, 1.0]), torch.tensor([-0.0, 0.0, 5.0, 1.0])
    tie = ("output", 0)
    for line in ["torch.minimum(a, b)", "torch.clamp(a, min=b)", "a.max(b)"]:
        p = _Program(line, a, b)
        e = p.eager_fn()(a, b)[0]
        # The other zero where both operands are zeros of opposite signs: a tie.
        assert run.known_divergence(p, e, _flip(e, 0), tie) == "signed_zero_tie", line
        assert run.known_divergence(p, e, _flip(_flip(e, 0), 1), tie) == "signed_zero_tie", line
        # Not a zero with one candidate (minimum(-0., 5.)), not a value, not both at once.
        assert run.known_divergence(p, e, _flip(e, 2), tie) is None, line
        assert run.known_divergence(p, e, _flip(e, 3), tie) is None, line
        assert run.known_divergence(p, e, _flip(_flip(e, 0), 2), tie) is None, line
    # What a later op makes of the tie: the other infinity, and a max over it.
    for line in ["1 / torch.minimum(a, b)", "torch.max(1 / torch.minimum(a, b), b)"]:
        p = _Program(line, a, b)
        e = p.eager_fn()(a, b)[0]
        o = p.eager_fn()(_flip(a, 0), b)[0]  # the tie decided the other way
        assert not torch.equal(e, o) and run.known_divergence(p, e, o, tie) == "signed_zero_tie", line
    # Two ties of one call, each element keeping its own zero (clamp(-0., 0.) -0., clamp(0., -0.)
    # 0.), multiplied: -0.0, which no decision of the call as a whole gives (seed 8140, 4347).
    import zero_ties

    p = _Program("torch.clamp(a, min=b).prod()", a, b)
    products = {d: zero_ties.run_decided(p, lambda c, d=d: d)[0][0] for d in (False, True, zero_ties.KEEP)}
    assert not torch.signbit(products[False]) and not torch.signbit(products[True])
    assert bool(products[zero_ties.KEEP] == 0) and torch.signbit(products[zero_ties.KEEP])
    e = p.eager_fn()(a, b)[0]
    for o in products.values():  # each is a tie's outcome, whichever eager's kernel gave
        assert torch.equal(o, e) and torch.signbit(o) == torch.signbit(e) or \
            run.known_divergence(p, e, o, tie) == "signed_zero_tie"
    # One element flipped: a tie (`tied`) is classified, a non-tie zero or a value (`not_tied`) not.
    for line, tied, not_tied in [
            # ties decided differently by two ops (the clamp's one way, the max's the other)
            ("torch.max(torch.clamp(b, min=a), b) - torch.clamp(b, min=a)", 0, 3),
            # a zero eager's x + 0 makes +0.0 and TorchScript's peephole pass (x + 0 -> x) keeps
            ("-torch.minimum(a, b) + 0", 0, 2),
            # the tie's zero through 0 - x, which TorchScript computes as neg(x) (seed 8137, 6326):
            # either zero at the tie, never -0.0 where minimum(-0., 5.) is no tie
            ("0 - torch.minimum(a, b)", 0, 2),
            # a bool operand against a float one: maximum(False, -0.) is a tie in float
            ("torch.maximum(a > 1, b)", 0, 2),
            # an amax over a slice holding both zeros
            ("torch.amax(torch.stack([a, -a]), 0)", 0, 3),
            # no min/max-family op: no tie
            ("a - b", None, 0)]:
        p = _Program(line, a, b)
        e = p.eager_fn()(a, b)[0]
        if tied is not None:
            assert run.known_divergence(p, e, _flip(e, tied), tie) == "signed_zero_tie", line
        assert run.known_divergence(p, e, _flip(e, not_tied), tie) is None, line


def test_layout_dtype_shape_and_bound():
    e = torch.arange(6.0).view(2, 3)
    assert "strides" in run.compare_tensor(e, e.t().contiguous().t(), 0.0)
    assert "dtype" in run.compare_tensor(e, e.double(), 0.0)
    assert "shape" in run.compare_tensor(e, e.view(3, 2), 0.0)
    assert run.compare_tensor(e, e + 1e-3, 2e-3) is None
    assert "exceeds the bound" in run.compare_tensor(e, e + 1e-2, 2e-3)
    assert "infinities" in run.compare_tensor(torch.tensor([math.inf]), torch.tensor([-math.inf]), 1.0)
    assert "values differ" in run.compare_tensor(torch.tensor([1, 2]), torch.tensor([1, 3]), 0.0)
    # Layout = strides of dims with more than one element: a size-1 dim's stride and an empty
    # tensor's strides address no memory, so they are not compared.
    assert "strides" in run.compare_tensor(torch.empty(4, 3), torch.empty(3, 4).t(), 0.0)
    assert run.compare_tensor(torch.zeros(2, 1, 3), torch.zeros(2, 3, 1).transpose(1, 2), 0.0) is None
    z = torch.empty(0, 3)
    assert run.compare_tensor(z, torch.empty(3, 0).t(), 0.0) is None


def test_error_rules():
    p = gen.generate(0, 1)
    ok = ((torch.ones(1),), None, [])
    err = (None, RuntimeError("The size of tensor a (2) must match"), [])
    idx = (None, IndexError("index 5 is out of bounds"), [])
    assert "did not" in run.compare_results(p, err, ok)[0]
    assert "optimized raised" in run.compare_results(p, ok, err)[0]
    assert run.compare_results(p, err, err)[0] is None
    assert "error class" in run.compare_results(p, idx, err)[0]


def test_generation_is_deterministic_and_scripts():
    a = [gen.generate(5, i) for i in range(40)]
    b = [gen.generate(5, i) for i in range(40)]
    assert [p.source() for p in a] == [p.source() for p in b]
    for p, q in zip(a, b):
        for x, y in zip(p.make_inputs(), q.make_inputs()):
            if isinstance(x, torch.Tensor):
                assert x.stride() == y.stride() and torch.equal(x.nan_to_num(7), y.nan_to_num(7))
    torch.jit.CompilationUnit("\n".join(p.source() for p in a))  # all of them compile


def test_generated_layouts():
    assert not gen.make_input((3, 4), torch.float32, "transposed").is_contiguous()
    assert gen.make_input((3, 4), torch.int64, "strided").stride() == (8, 2)
    assert gen.make_input((3, 4), torch.bool, "expanded").stride()[0] == 0
    assert gen.make_input((0, 4), torch.float16, "strided").shape == (0, 4)


def test_inplace_saved_tensor_reference_keeps_eagers_formulas():
    # Seed 8135, program 6060 (gradient mode): prod's input is divided in place after the prod, so
    # eager's own backward fails and the harness reruns eager with the saved values kept as saved.
    # Under allow_mutation_on_saved_tensors prod's backward took another formula (finite where
    # eager's ordinary result / input is inf / inf); the clone mode must give the gradient of the
    # program written without the in-place op, bit for bit (NaNs included).
    import grad

    x = torch.tensor([[float("-inf"), 2.0, float("nan")], [1.5, 0.25, 3.0]], dtype=torch.float64)

    def inplace(a):
        y = a * 1
        p = y.prod(0)
        y.div_(2)
        return p.clamp(-0.5, 0.5), y

    def functional(a):
        y = a * 1
        return y.prod(0).clamp(-0.5, 0.5), y / 2

    def grads(fn, mode):
        a = x.clone().requires_grad_()
        with grad.saved_values(mode):
            out = fn(a)
            return torch.autograd.grad(out, a, [torch.ones_like(o) for o in out])[0]

    want = grads(functional, None)
    got = grads(inplace, "clone")
    assert bool(want[0, 0].isnan())
    assert torch.equal(want.isnan(), got.isnan()) and torch.equal(want.nan_to_num(), got.nan_to_num())


def test_nan_from_zero_gradient_takes_an_infinite_value_without_the_zero_product():
    # Seed 8140, program 1303 (gradient mode): eager's gradient NaN (0 * inf on an element a slice
    # cut away) where the fused one is -inf, the value eager's gradient has with 0 * inf = 0 (G).
    import grad

    e, B = torch.tensor([float("nan"), 1.0]), torch.zeros(2, dtype=torch.float64)
    G = torch.tensor([-math.inf, 1.0], dtype=torch.float64)
    bound = (B, G, torch.zeros(2, dtype=torch.bool))
    problem, _, excused = grad.compare_grad_tensor(e, torch.tensor([-math.inf, 1.0]), bound)
    assert problem is None and excused == {"nan_from_zero_gradient"}
    # the other infinity, or a finite value where G is infinite: a mismatch
    assert grad.compare_grad_tensor(e, torch.tensor([math.inf, 1.0]), bound)[0] is not None
    assert grad.compare_grad_tensor(e, torch.tensor([-3.0, 1.0]), bound)[0] is not None


@pytest.mark.parametrize("cast", ["type_as", "float", "to"])
def test_grad_bound_passes_casts_through(cast):
    # Seed 8154, program 1217 (gradient mode): mean(hypot(x0.view(-1), x1)).type_as(x0), whose
    # fused gradient is 1 ulp from eager's (hypot on tiles). A cast the bound did not know left the
    # program with no bound, so that ulp failed the bit-exact comparison.
    import grad
    import grad_bound

    x0 = torch.rand(3, 1, dtype=torch.float32, generator=torch.Generator().manual_seed(1)).requires_grad_()
    x1 = torch.rand(15, 1, dtype=torch.float32, generator=torch.Generator().manual_seed(2)).requires_grad_()
    casts = {"type_as": lambda v: v.type_as(x0), "float": lambda v: v.float(), "to": lambda v: v.to(torch.float32)}
    fn = lambda a, b: (casts[cast](torch.hypot(a.view(-1), b).mean()),)  # noqa: E731
    (B, G, O), _ = grad_bound.bounds(fn, [x0, x1], [0, 1], {0: torch.tensor(1.0)})
    e = torch.autograd.grad(fn(x0, x1)[0], x0)[0]
    one_ulp = torch.nextafter(e, torch.full_like(e, math.inf))
    assert grad.compare_grad_tensor(e, one_ulp, (B, G, O))[0] is None


def test_signed_zero_tie_in_a_gradient():
    # Seed 8191, program 1363 (gradient mode, small calls run as ATen ops): rsqrt(maximum(a, b)) with
    # a +0.0 / -0.0 tie. The forward matched eager's; the fused backward, recomputing the maximum,
    # decided the tie the other way, so rsqrt's derivative took the other infinity. Eager's own
    # gradient changes with the tie there: classified; a gradient wrong elsewhere is not.
    import gen
    import grad

    class GradProgram(_Program):
        seed = 7

        def __init__(self, line, a, b):
            super().__init__(line, a, b)
            self.inputs = [gen.InputSpec(tuple(a.shape), a.dtype), gen.InputSpec(tuple(b.shape), b.dtype)]
            self.values = (a, b)

        def make_inputs(self):
            return [t.clone() for t in self.values]

    a, b = torch.tensor([0.0, 4.0, 1.0]), torch.tensor([-0.0, 1.0, 9.0])
    p = GradProgram("torch.maximum(a, b).rsqrt()", a, b)
    eager = grad.run_once(p, p.eager_fn())
    e = eager.grads[0]
    assert torch.isinf(e[0])
    other = e.clone()
    other[0] = -e[0]  # the tie's other infinity
    assert grad.tie_sensitive_gradient(p, 0, e, other, eager.needs)
    wrong = e.clone()
    wrong[1] = e[1] * 2  # no tie at element 1
    assert not grad.tie_sensitive_gradient(p, 0, e, wrong, eager.needs)
