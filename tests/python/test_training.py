"""Training through fused regions (kernels/runtime/fused_grad.h): a scripted function whose region
fuses to tsfuse::pairwise, a sum (tsfuse::reduce) or a sum of sums (tsfuse::reduce_chain), called with inputs that require grad, runs the
fused op (the executed graph holds it, grad enabled) and a fused backward, and its gradients equal
eager's within the summation-order tolerance of the sums over broadcast dims."""
import subprocess
import sys

import torch

from conftest import BUILD, LIB, SOURCE

sys.path.insert(0, str(SOURCE / "examples"))
import train_kernel  # noqa: E402


def gaussian_kernel(x, y, s: float):
    return torch.exp(-((x[:, None] - y[None, :]) ** 2) / s)


def kernel_sum(x, y, s: float):
    return torch.exp(-((x[:, None] - y[None, :]) ** 2) / s).sum(1)


def nested_kernel_sum(x, y, s: float):
    return torch.exp(-((x[:, None] - y[None]) ** 2).sum(-1) / s).sum(1)


def chamfer(x, y):
    d = ((x[:, None] - y[None]) ** 2).sum(-1)
    return d.min(1)[0].mean() + d.min(0)[0].mean()


def best_products(a, b):
    return (a[:, None] * b[None, :]).max(1)[0]


def box_overlap(a, b):
    lt = torch.max(a[:, None, :2], b[None, :, :2])
    rb = torch.min(a[:, None, 2:], b[None, :, 2:])
    return (rb - lt).clamp(min=0)


def weighted_backward(fn, inputs, *rest):
    leaves = [t.detach().clone().requires_grad_() for t in inputs]
    out = fn(*leaves, *rest)
    loss = (out * torch.linspace(-1, 1, out.numel()).view(out.shape)).sum()
    before = dict(torch.ops.tsfuse.path_counts())
    loss.backward()
    ran = {k: v - before[k] for k, v in torch.ops.tsfuse.path_counts().items()}
    return out.detach(), [t.grad for t in leaves], ran


def check(scripted, eager, inputs, *rest, op="tsfuse::pairwise", terms=1):
    """Gradients of `terms` summed values each are within the reordered-sum bound
    (docs/exactness.md), n * eps * sum|t|, taken with |t| <= the gradient's largest magnitude."""
    for _ in range(3):  # the profiling runs, then the optimized graph
        got, grads, ran = weighted_backward(scripted, inputs, *rest)
    assert op in str(torch.jit.last_executed_optimized_graph())
    assert ran["compiled_tiles"] + ran["compiled_pieces"] > 0, ran  # the backward ran fused ops
    want, want_grads, _ = weighted_backward(eager, inputs, *rest)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    for g, w in zip(grads, want_grads):
        atol = max(1e-6, terms * torch.finfo(w.dtype).eps * w.abs().max().item())
        torch.testing.assert_close(g, w, rtol=1e-5, atol=atol)


def test_gaussian_kernel_trains_through_the_fused_op(tsfuse_lib):
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(300, generator=g), torch.randn(200, generator=g)
    check(torch.jit.script(gaussian_kernel), gaussian_kernel, [x, y], 0.7)


def test_kernel_sum_trains_through_the_fused_reduce(tsfuse_lib):
    g = torch.Generator().manual_seed(2)
    x, y = torch.randn(300, generator=g), torch.randn(200, generator=g)
    check(torch.jit.script(kernel_sum), kernel_sum, [x, y], 0.7, op="tsfuse::reduce")


def test_a_reduction_inside_a_reduction_trains_through_the_fused_chain(tsfuse_lib):
    g = torch.Generator().manual_seed(3)
    x, y = torch.randn(300, 3, generator=g), torch.randn(200, 3, generator=g)
    check(torch.jit.script(nested_kernel_sum), nested_kernel_sum, [x, y], 2.5, op="tsfuse::reduce_chain",
          terms=200 * 3)


def test_chamfer_trains_through_the_fused_sweep(tsfuse_lib):
    g = torch.Generator().manual_seed(4)
    x, y = torch.randn(300, 3, generator=g), torch.randn(200, 3, generator=g)
    check(torch.jit.script(chamfer), chamfer, [x, y], op="tsfuse::reduce_sweep")


def test_max_values_give_the_gradient_to_maxs_index_on_ties(tsfuse_lib):
    # b holds a repeated value: each row's maximum is tied, and eager's max(dim) gives the whole
    # gradient to the first index where amax would split it.
    a, b = torch.tensor([1.0, 2.0, 3.0]), torch.tensor([1.0, 1.0, 0.5])
    check(torch.jit.script(best_products), best_products, [a, b], op="tsfuse::reduce")
    _, (ga, gb), _ = weighted_backward(torch.jit.script(best_products), [a, b])
    _, (wa, wb), _ = weighted_backward(best_products, [a, b])
    assert torch.equal(gb, wb) and torch.equal(ga, wa), (gb, wb)


def weighted_columns(a, w):
    return (a * w[None, :]).sum()


def test_a_gradient_reading_fewer_dims_than_the_value_is_broadcast(tsfuse_lib):
    # a's gradient program reads w and the incoming gradient only: a [1, 3] value for a [4, 3] a.
    a, w = torch.randn(4, 3), torch.rand(3)
    scripted = torch.jit.script(weighted_columns)
    for _ in range(3):
        _, (ga,), _ = weighted_backward(scripted, [a], w)
    assert "tsfuse::" in str(torch.jit.last_executed_optimized_graph())
    assert torch.equal(ga, (w * torch.linspace(-1, 1, 1)).expand(4, 3))


def offsets_summed(a, w):
    return (a - w).sum(1)


def test_a_summed_dim_the_gradient_program_does_not_span_counts_its_size(tsfuse_lib):
    # w's gradient program is -g alone, which does not span a's dim 1 (size 4) that the sum folds:
    # each w gets -4 g, not -g.
    a = torch.randn(5, 4)
    scripted = torch.jit.script(offsets_summed)
    for _ in range(3):
        w = torch.randn(5, 1, requires_grad=True)
        scripted(a, w).backward(torch.arange(5.0))
    assert "tsfuse::reduce" in str(torch.jit.last_executed_optimized_graph())
    assert torch.equal(w.grad, -4 * torch.arange(5.0)[:, None]), w.grad


def scalar_logsumexp(x):
    return torch.logsumexp((x[:, None] * x[None]).sum(), [-1])


def test_a_chain_ending_in_a_reduction_of_a_0_dim_value_trains(tsfuse_lib):
    # Stage 1 reduces dim -1 of stage 0's 0-dim sum, a dim ATen wraps to no dim at all.
    x = torch.randn(6)
    scripted = torch.jit.script(scalar_logsumexp)
    for _ in range(3):
        got, (g,), _ = weighted_backward(scripted, [x])
    assert "tsfuse::reduce_chain" in str(torch.jit.last_executed_optimized_graph())
    want, (w,), _ = weighted_backward(scalar_logsumexp, [x])
    torch.testing.assert_close(got, want)  # a sum over all: eager's order is not fixed
    torch.testing.assert_close(g, w)


def written_after(x, y):
    d = (x[:, None] - y[None]).abs().sum(1)
    y.mul_(2)
    return d


def test_an_operand_written_after_the_fused_op_keeps_its_values_for_the_backward(tsfuse_lib):
    # y is read by the fused reduce, then written in place; eager saves nothing of y's here (abs
    # saves the difference), so its backward runs, and the fused one must too, with y as it was.
    g = torch.Generator().manual_seed(5)
    x, y = torch.randn(30, generator=g), torch.randn(20, generator=g)
    scripted = torch.jit.script(written_after)
    for _ in range(3):
        xs = x.clone().requires_grad_()
        scripted(xs, y.clone()).sum().backward()
    graph = str(torch.jit.last_executed_optimized_graph())
    assert "tsfuse::saved_operand" in graph and "tsfuse::reduce" in graph, graph
    xe = x.clone().requires_grad_()
    written_after(xe, y.clone()).sum().backward()
    assert torch.equal(xs.grad, xe.grad)


def pow_fill_then_written(x, s: int):
    v = torch.maximum(x, x * 0.5).pow(s)
    w = torch.full_like(v, s)
    w[x > 0.5] = 0
    return w.neg() + v


def test_a_number_read_at_run_time_stays_one_when_its_operands_are_saved(tsfuse_lib):
    # Fuzzer seed 8130, program 9986: a fused op reading the int argument s by value (pow, full_like)
    # is followed by an in-place write, so its operands are snapshotted for the backward; the copy of
    # s's wrapped number was a plain 0-dim tensor, which the op cannot read by value ("argument is
    # not a literal", in grad mode only). (The mask is x's, so the write stays an index_put_.)
    x = torch.rand(6, 5, generator=torch.Generator().manual_seed(8))
    scripted = torch.jit.script(pow_fill_then_written)
    for _ in range(3):
        xs = x.clone().requires_grad_()
        got = scripted(xs, 3)
        got.sum().backward()
    graph = str(torch.jit.last_executed_optimized_graph())
    assert "tsfuse::saved_operand" in graph and "tsfuse::pairwise" in graph, graph
    xe = x.clone().requires_grad_()
    want = pow_fill_then_written(xe, 3)
    want.sum().backward()
    assert torch.equal(got, want) and torch.equal(xs.grad, xe.grad)


def masked_count(x, y):
    m = torch.zeros_like(x[:, None] * y[None])
    return m + (x[:, None] > y[None])


def test_an_output_no_gradient_reaches_does_not_require_one(tsfuse_lib):
    # zeros_like reads x's shape, the comparison its values: eager's result requires no gradient.
    x, y = torch.randn(5, requires_grad=True), torch.randn(4)
    scripted = torch.jit.script(masked_count)
    for _ in range(3):
        out = scripted(x, y)
    assert "tsfuse::pairwise" in str(torch.jit.last_executed_optimized_graph())
    assert not out.requires_grad and not masked_count(x, y).requires_grad


def box_margin(p, g):
    left, top = p[:, None, 0] - g[None, :, 0], p[:, None, 1] - g[None, :, 1]
    right, bottom = g[None, :, 2] - p[:, None, 0], g[None, :, 3] - p[:, None, 1]
    return torch.stack([left, top, right, bottom], -1).min(-1)[0]


def test_min_values_over_a_stack_give_the_gradient_to_the_first_tied_piece(tsfuse_lib):
    # Integer coordinates: many margins tie, and min(dim) gives the gradient to the first piece
    # holding the minimum (a NaN first), where minimum's would split it.
    g = torch.Generator().manual_seed(6)
    p = torch.randint(0, 6, (40, 2), generator=g).float()
    boxes = torch.randint(0, 6, (30, 4), generator=g).float()
    p[3, 0] = float("nan")
    scripted = torch.jit.script(box_margin)
    for _ in range(3):
        got, (gp, gb), _ = weighted_backward(scripted, [p, boxes])
    assert "tsfuse::pairwise" in str(torch.jit.last_executed_optimized_graph())
    want, (wp, wb), _ = weighted_backward(box_margin, [p, boxes])
    assert torch.equal(got.nan_to_num(7), want.nan_to_num(7))
    torch.testing.assert_close(gp, wp, equal_nan=True)
    torch.testing.assert_close(gb, wb, equal_nan=True)


def rounded_ratio(x, y):
    return torch.div(x[:, None], y[None], rounding_mode="floor") * 2


def test_an_output_whose_gradient_is_zero_still_requires_one(tsfuse_lib):
    # A rounded quotient's gradient is zero, but autograd records it: eager's result requires grad.
    x, y = torch.randn(5, requires_grad=True), torch.rand(4) + 0.5
    scripted = torch.jit.script(rounded_ratio)
    for _ in range(3):
        out = scripted(x, y)
    assert "tsfuse::pairwise" in str(torch.jit.last_executed_optimized_graph())
    assert out.requires_grad and rounded_ratio(x, y).requires_grad
    (gx,) = torch.autograd.grad(out.sum(), [x], allow_unused=True)
    assert gx is None or not gx.any()


def l1_loss(x, y, w):
    return ((x[:, None] - y[None]).abs().sum(-1) * w[None]).sum()


def test_the_l1_backward_runs_compiled_code_only(tsfuse_lib):
    # abs's derivative holds g's dtype throughout (an integer sign would leave tiles interpreted).
    g = torch.Generator().manual_seed(7)
    x, y, w = torch.randn(64, 8, generator=g), torch.randn(50, 8, generator=g), torch.randn(50, generator=g)
    scripted = torch.jit.script(l1_loss)
    for _ in range(3):
        _, grads, ran = weighted_backward(lambda a, b: scripted(a, b, w), [x, y])
    assert "tsfuse::reduce_sweep" in str(torch.jit.last_executed_optimized_graph())
    assert ran["interpreted_tiles"] == 0 and ran["interpreted_steps"] == 0 and ran["compiled_tiles"] > 0, ran
    _, want, _ = weighted_backward(lambda a, b: l1_loss(a, b, w), [x, y])
    for got, w_ in zip(grads, want):
        torch.testing.assert_close(got, w_, rtol=1e-5, atol=50 * 8 * 1.2e-7 * w_.abs().max().item())


def test_box_overlap_trains_through_the_fused_op(tsfuse_lib):
    g = torch.Generator().manual_seed(1)
    xy = torch.rand(40, 2, generator=g) * 10
    a = torch.cat([xy, xy + torch.rand(40, 2, generator=g) * 5], 1)
    xy = torch.rand(30, 2, generator=g) * 10
    b = torch.cat([xy, xy + torch.rand(30, 2, generator=g) * 5], 1)
    check(torch.jit.script(box_overlap), box_overlap, [a, b])


def test_python_training_example_follows_eagers_losses(tsfuse_lib):
    fused, eager, graph = train_kernel.main(str(LIB))
    assert "tsfuse::reduce" in graph
    torch.testing.assert_close(fused, eager, rtol=1e-4, atol=0)
    assert fused[-1] < fused[0]


def test_cpp_training_example_follows_eagers_losses(tsfuse_lib, tmp_path):
    x0, y = train_kernel.points()
    torch.jit.script(train_kernel.KernelMMD(x0=x0, target=y)).save(str(tmp_path / "loss.pt"))
    p = subprocess.run([str(BUILD / "bin" / "tsfuse-example-train"), str(tmp_path / "loss.pt"), "5", "20"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "fused with grad: yes" in p.stdout
    losses = [float(line.split("loss ")[1]) for line in p.stdout.splitlines() if line.startswith("step ")]
    torch.testing.assert_close(losses, train_kernel.train(train_kernel.KernelMMD()), rtol=1e-4, atol=0)


def test_optimize_ts_output_trains_like_eager(tsfuse_lib, optimize_ts, tmp_path):
    torch.jit.script(train_kernel.KernelMMD()).save(str(tmp_path / "loss.pt"))
    p = subprocess.run([str(optimize_ts), "-q", str(tmp_path / "loss.pt"), str(tmp_path / "loss.opt.pt")],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    optimized = torch.jit.load(str(tmp_path / "loss.opt.pt"))
    assert "tsfuse::reduce" in str(optimized.graph)
    torch.testing.assert_close(train_kernel.train(optimized), train_kernel.train(train_kernel.KernelMMD()),
                               rtol=1e-4, atol=0)


def iou_penalised(a, b):
    wh = box_overlap(a, b)
    inter = wh[:, :, 0] * wh[:, :, 1]
    area = ((a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1]))[:, None] + ((b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1]))[None]
    iou = inter / (area - inter)
    v = (a[:, None, 2] - b[None, :, 0]) ** 2
    with torch.no_grad():  # a weight, not differentiated (complete IoU's alpha)
        alpha = v / (1 - iou + v)
    return iou - alpha * v


def test_a_value_computed_without_grad_is_not_differentiated_once_fused(tsfuse_lib):
    g = torch.Generator().manual_seed(9)
    xy = torch.rand(40, 2, generator=g) * 10
    a = torch.cat([xy, xy + 1 + torch.rand(40, 2, generator=g) * 5], 1)
    b = a[torch.randperm(40, generator=g)[:30]] + 0.5
    scripted = torch.jit.script(iou_penalised)
    check(scripted, iou_penalised, [a, b], terms=4)
    # one fused op spans the no_grad block: the weight is read through detach inside it
    graph = str(torch.jit.last_executed_optimized_graph())
    assert graph.count("tsfuse::pairwise(") == 1 and "aten::detach" not in graph, graph
