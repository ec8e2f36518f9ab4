"""Regression tests for what the differential fuzzer (tests/fuzz) found, minimized."""
import sys

import torch

from conftest import SOURCE

sys.path.insert(0, str(SOURCE / "tests" / "fuzz"))
from gen import make_input  # noqa: E402
from optimize_ts_util import run_tool  # noqa: E402


def _scripted_and_eager(src, name):
    """The function `name` of `src`, scripted and as plain Python."""
    scope = {"torch": torch, "Tensor": torch.Tensor}
    exec(src, scope)
    return getattr(torch.jit.CompilationUnit(src), name), scope[name]


def test_add_alpha_matches_eagers_vectorized_kernel_within_one_ulp(tsfuse_lib):
    # Fuzzer seed 1, program 1795 (before the alpha contract): torch.add(a, b, alpha=3) on
    # broadcast operands. Eager itself is layout-dependent here: its vectorized loop computes
    # a + 3*b with one rounding (fmadd), its broadcasting loop with two. tsfuse runs ATen's kernel
    # on contiguous tiles, so it equals eager on contiguous operands and is within 1 ulp otherwise.
    x0 = make_input((18, 1, 1), torch.float32, "contiguous", seed=974283442)
    x1 = make_input((6,), torch.float32, "contiguous", seed=933904222, ties=True)
    a = x1[:, None][None]
    broadcast = torch.add(a, x0, alpha=3)
    contiguous = torch.add(a.expand(18, 6, 1).contiguous(), x0.expand(18, 6, 1).contiguous(), alpha=3)
    fused = torch.ops.tsfuse.pairwise([a, x0], "v1: add_alpha($0, $1, 3)")
    assert torch.equal(fused, contiguous)
    ulp = torch.finfo(torch.float32).eps * (broadcast.abs() + 3 * x0.abs())
    assert bool(((fused - broadcast).abs() <= ulp).all())



def test_repeat_of_a_permuted_source_keeps_eagers_output_layout(tsfuse_lib):
    # Fuzzer seed 11, program 1267: the repeat's source is a permuted [1, 1, 2] (size-1 dims with
    # larger strides than its size-2 dim). As an expanded view it let TensorIterator reorder the
    # fused op's output dims (strides (2, 4, 20, 1) where eager has (10, 2, 2, 1)); such a
    # repeat now runs as aten::repeat.
    src = '''
def p1267(x1: Tensor):
    v2 = x1.permute(2, 1, 0)
    v3 = v2.unsqueeze(1).repeat(1, 5, 1, 1)
    v4 = v3 < x1
    v5 = torch.min(v4, v3)
    return -torch.pow(v5, v4)
'''
    cu = torch.jit.CompilationUnit(src)
    scope = {"torch": torch, "Tensor": torch.Tensor}
    exec(src, scope)
    x1 = make_input((1, 1, 2), torch.float64, "contiguous", seed=957312547)
    with torch.no_grad():
        want = scope["p1267"](x1)
        got = cu.p1267(x1)
        got = cu.p1267(x1)
    assert "tsfuse::" in str(torch.jit.last_executed_optimized_graph())
    assert got.stride() == want.stride() and torch.equal(got, want)


def test_a_sum_over_an_empty_dim_with_a_packed_operand(tsfuse_lib):
    # Fuzzer seed 99, program 168: neg of x1[None][1:] (an empty [0, 3, 5] uint8 view) summed over
    # dims 0 and 2 into [3] zeros. The compiled vertical sum sized its pack panel by dividing by the
    # reduced space's element count, 0 here: the process died of SIGFPE. An empty reduced space is
    # now left to the interpreter, which writes each output's start.
    x1 = make_input((3, 5), torch.uint8, "contiguous", seed=160411589)
    v4 = x1.unsqueeze(0)[1:]
    got = torch.ops.tsfuse.reduce([v4], "v1: neg($0)", "sum", [-3, 2], False, None)
    assert torch.equal(got, torch.sum(torch.neg(v4), [-3, 2]))


def test_a_zero_dim_constant_made_by_the_executor_keeps_its_promotion(tsfuse_lib):
    # Fuzzer seed 8116, program 2382: torch.tensor(-1.5) is folded into a 0-dim float32 constant by
    # the executor's constant propagation, after its CanonicalizeOps, so TorchScript keeps it a
    # tensor: a float16 0-dim amin times it is float32. The pre-pass made it a number (float16).
    src = '''
def p2382(x0: Tensor):
    v3 = torch.sub(x0.unsqueeze(0), x0.unsqueeze(-1), alpha=2)
    v4 = torch.amin(v3, dim=[0, 1])
    return v4 * torch.tensor(-1.5)
'''
    cu = torch.jit.CompilationUnit(src)
    scope = {"torch": torch, "Tensor": torch.Tensor}
    exec(src, scope)
    x0 = make_input((3,), torch.float16, "contiguous", seed=867552767, ties=True)
    with torch.no_grad():
        want = scope["p2382"](x0)
        for _ in range(3):
            got = cu.p2382(x0)
    assert "tsfuse::reduce" in str(torch.jit.last_executed_optimized_graph())
    assert got.dtype == want.dtype == torch.float32 and torch.equal(got, want)


class HalfTheLargestDifference(torch.nn.Module):
    def forward(self, x0):
        v3 = x0.unsqueeze(0) - x0.unsqueeze(-1)
        return torch.amax(v3, dim=[0, 1]) * torch.tensor(0.5)


def test_a_zero_dim_constant_folded_offline_stays_a_tensor_in_the_saved_file(optimize_ts, tmp_path):
    # Fuzzer seed 8145, program 4812, optimize-ts only: canonicalize's constant propagation folded
    # torch.tensor(0.5) into a 0-dim constant, which the executor's CanonicalizeOps makes a number
    # when out.pt is loaded: a bfloat16 0-dim amax times it was bfloat16, eager's float32.
    model = HalfTheLargestDifference()
    torch.jit.save(torch.jit.script(model), str(tmp_path / "in.pt"))
    done = run_tool(optimize_ts, tmp_path / "in.pt", tmp_path / "out.pt")
    assert done.returncode == 0, done.stderr
    fused = torch.jit.load(str(tmp_path / "out.pt"))
    assert "tsfuse::reduce" in str(fused.forward.graph)
    x0 = make_input((3,), torch.bfloat16, "contiguous", seed=4812, ties=True)
    want = model(x0)
    with torch.no_grad():
        for _ in range(3):
            got = fused(x0)
            assert got.dtype == want.dtype == torch.float32 and torch.equal(got, want)


def eager_and_fused_gradients(src, name, base):
    """The gradient of the one-input program `name` in `src` at `base` for ones, eagerly and from
    its scripted form's optimized graph (second call); asserts that graph fused something."""
    cu = torch.jit.CompilationUnit(src)
    scope = {"torch": torch, "Tensor": torch.Tensor}
    exec(src, scope)

    def grad(fn):
        x = base.clone().requires_grad_()
        out = fn(x)
        return torch.autograd.grad(out, x, torch.ones_like(out))[0]

    want = grad(scope[name])
    for _ in range(2):
        got = grad(getattr(cu, name))
    assert "tsfuse::" in str(torch.jit.last_executed_optimized_graph())
    return want, got


def test_pow_exponent_gradient_takes_an_integer_bases_log_in_the_results_dtype(tsfuse_lib):
    # Fuzzer seed 8137, program 9302 (gradient mode): pow(int64 base, float64 exponent). Eager's
    # pow_backward_exponent converts the base to the promoted dtype before its log; the fused
    # backward took the log of the int64 base in the default float32 (a 3e-9 relative error).
    src = '''
def p9302(x1: Tensor):
    v3 = x1.unsqueeze(0).to(torch.int64)
    return torch.pow(v3, x1) * 1.0
'''
    base = torch.rand(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(9302)) * 6 + 0.5
    want, got = eager_and_fused_gradients(src, "p9302", base)
    torch.testing.assert_close(got, want, rtol=1e-13, atol=0)


def test_an_operand_no_gradient_reaches_is_read_detached(tsfuse_lib):
    # Fuzzer seed 8137, program 7821 (gradient mode): v3, an amax written in place after it, reaches
    # the output only through a logical_and (a mask). Eager's backward never visits AmaxBackward;
    # the fused op's node had an edge to v3, so autograd ran it and failed its saved-value version
    # check. Operands no gradient reaches are now read detached.
    src = '''
def p7821(x0: Tensor):
    v2 = x0[:, 0]
    v3 = torch.stack([v2, (v2 - v2), v2], 1).amax(1, keepdim=True)
    v3[v3 == v3] = float("inf")
    v5 = torch.logical_and(v2, v3)
    return torch.maximum(v5, v2)
'''
    base = torch.randn(1, 8, generator=torch.Generator().manual_seed(7821))
    want, got = eager_and_fused_gradients(src, "p7821", base)
    assert torch.equal(got, want)


def test_a_swept_reductions_metadata_stand_in_has_its_epilogues_shape(tsfuse_lib):
    # Fuzzer seed 8165, program 2535: v6 = (v2 * -1) / all(v3) is a reduce whose epilogue
    # broadcasts the 0-dim all() to v2's [2, 4]; v6.shape[-1] and v6.argmin(-2) read it. The sweep
    # of argmin gave the size reader a stand-in of the reduction's 0-dim value, not the epilogue's
    # [2, 4] one ("list index out of range").
    src = '''
def p2535(x0: Tensor):
    v2 = x0.permute(1, 0)
    v3 = (x0[:, None, 0] - x0[None, :, 0]) * (x0[:, None, 1] - x0[None, :, 1])
    v4 = torch.all(v3)
    v6 = (v2 * -1) / v4
    if v6.shape[-1] == 0:
        raise ValueError("guard on v6")
    return v6.argmin(-2), v6.shape[-1]
'''
    scripted, eager = _scripted_and_eager(src, "p2535")
    x0 = make_input((4, 2), torch.float16, "contiguous", seed=592609067)
    with torch.no_grad():
        want = eager(x0)
        for _ in range(3):
            got = scripted(x0)
    graph = str(torch.jit.last_executed_optimized_graph())
    assert "tsfuse::shape_of" in graph and "tsfuse::reduce_sweep" in graph, graph
    assert torch.equal(got[0], want[0]) and got[1] == want[1] == 4


def test_a_value_written_through_a_cast_that_returned_it_is_not_recomputed(tsfuse_lib):
    # Fuzzer seed 8167, program 1173: v5 = v4.to(x1.dtype) is v4 itself (the dtype is v4's), so
    # v5.mul_(0) zeroes v4 too; v7 = v6 + v4 reads the zeros. The region of v7 recomputed v4 from
    # x0 (4, not 0). Before: canonicalize took the cast's result as a fresh tensor.
    src = '''
def p1173(x0: Tensor, x1: Tensor):
    v4 = x0.unsqueeze(-1) | x0[None, :]
    v5 = v4.to(x1.dtype)
    v5.mul_(0)
    v7 = v5.repeat(2, 1) + v4
    return v7
'''
    scripted, eager = _scripted_and_eager(src, "p1173")
    x0, x1 = torch.tensor([4], dtype=torch.uint8), torch.ones(1, 1, dtype=torch.uint8)
    with torch.no_grad():
        want = eager(x0, x1)
        for _ in range(3):
            got = scripted(x0, x1)
    assert torch.equal(got, want) and not bool(want.any())


def test_a_triangle_keeps_the_ops_layout(tsfuse_lib):
    # Fuzzer seed 8167, program 218: v2.triu_(0) on a fresh transposed value keeps its strides (an
    # in-place write), and torch.triu returns a dense tensor; the where() the decomposition made
    # took its operands' layout, which reached the output through expand and expm1.
    src = '''
def p218(x1: Tensor):
    v2 = x1.reshape(2, -1) + 2
    v2.triu_(0)
    return torch.expm1(v2.expand(2, -1, -1)), torch.expm1(torch.tril(x1 + 1, 1).expand(2, -1, -1))
'''
    scripted, eager = _scripted_and_eager(src, "p218")
    x1 = make_input((2, 2), torch.float32, "transposed", seed=514388843)
    with torch.no_grad():
        want = eager(x1)
        for _ in range(3):
            got = scripted(x1)
    for g, w in zip(got, want):
        assert g.stride() == w.stride() and torch.equal(g, w), (g.stride(), w.stride())


def test_a_stand_ins_epilogue_reads_its_bound_number(tsfuse_lib):
    # Fuzzer seed 8174, program 9833: the sizes of v10 = clamp_max(v8.argmin(0), s0), a swept
    # reduction's value, are read from a stand-in (tsfuse::shape_of.reduced); s0, read by value,
    # was bound into the expression and left the operands, but the stand-in kept the unbound
    # epilogue: "takes 3 operands, got 2".
    src = '''
def p9833(x0: Tensor, v6: Tensor, s0: int):
    v9 = torch.fmod(v6 ** 2, x0).argmin(0)
    v10 = torch.clamp_max(v9, s0)
    if v10.dim() > 0 and v10.size(0) == 0:
        raise ValueError("guard on v10")
    return v10.transpose(1, 2).argmin(2)
'''
    scripted, eager = _scripted_and_eager(src, "p9833")
    x0, v6 = torch.rand(1, 1, 1, 6).to(torch.bfloat16), torch.rand(2, 1)
    with torch.no_grad():
        want = eager(x0, v6, 2)
        for _ in range(3):
            got = scripted(x0, v6, 2)
    assert torch.equal(got, want)


def test_a_gradient_whose_analysis_raises_on_stand_ins_is_atens(tsfuse_lib):
    # Fuzzer seed 8194, program 1911 (gradient mode): a bool compare cast to int64, floor-divided by
    # itself, then clamp(min=x2) and amin. The analysis's stand-ins (ones) make the compare 0 and
    # the division raise ZeroDivisionError, which the real values (all true) do not: the forward ran
    # as eager's ops, but the backward raised "gradient of a program eager would not run". Its
    # gradient is now ATen's, eager's.
    src = '''
def p(x1: Tensor, x2: Tensor):
    v3 = x1[:, None, 0] > x2[None, :, 0]
    v4 = v3.to(torch.int64)
    v5 = torch.div(v4, v4, rounding_mode='floor')
    return torch.clamp(v5, min=x2.unsqueeze(-1)).amin([-2, -1])
'''
    scripted, eager = _scripted_and_eager(src, "p")

    def grads(fn):
        x1 = torch.full((1, 5), 10.0, requires_grad=True)
        x2 = make_input((12, 5), torch.float32, "contiguous", seed=616126208).requires_grad_()
        out = fn(x1, x2)
        return out, torch.autograd.grad(out, [x2], torch.ones_like(out))[0]

    want, want_grad = grads(eager)
    for _ in range(2):  # (the executor's profiling run, then the optimized graph)
        got, got_grad = grads(scripted)
    assert "tsfuse::" in str(torch.jit.last_executed_optimized_graph())
    assert torch.equal(got, want) and torch.equal(got_grad, want_grad)
