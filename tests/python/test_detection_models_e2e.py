"""optimize-ts end to end on library-style detection / kernel-method helpers
(examples/detection_models.py), scripted (forward -> prim::CallFunction) and traced (forward ->
prim::CallMethod of a torch.jit.trace'd submodule).

For every model: `optimize-ts --check` passes, the optimized module's outputs equal the EAGER
function's on several input sizes (including 0 and 1 boxes), the graph holds the expected number of
tsfuse ops, and no op that would produce a broadcast [N, M, ...] intermediate is left.
"""
import json

import pytest
import torch

from optimize_ts_util import run_tool

import detection_models  # examples/, put on sys.path by optimize_ts_util

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

# name -> (tsfuse::pairwise count, tsfuse::reduce count, ops that must be gone from the graph[,
# counts of tsfuse::reduce_chain / reduce_sweep]).
# "gone" lists the ops that built [N,M,...] values in the original; ops of the per-box [N]/[M]
# vectors outside a region may legitimately stay.
EXPECT = {
    "box_iou": (1, 0, ["aten::clamp", "aten::div", "aten::max", "aten::min"]),
    # Scripted, _upcast is a prim::If on the dtype: fold_upcast makes it tsfuse::upcast, an op of the
    # region, so the [N,M,2] difference is not stored (traced, the If is resolved by the trace).
    "box_iou_upcast": (1, 0, ["aten::clamp", "aten::div", "aten::max", "aten::min", "prim::If"]),
    "box_iou_upcast_traced": (1, 0, ["aten::clamp", "aten::div", "aten::max", "aten::min"]),
    "generalized_box_iou": (1, 0, ["aten::clamp", "aten::div", "aten::max", "aten::min"]),
    "distance_box_iou": (1, 0, ["aten::clamp", "aten::div", "aten::pow", "aten::max", "aten::min"]),
    # atan of the per-box aspect ratios ([N,1] and [M]) is a registry op: the whole function,
    # aspect-ratio term included, is one pairwise region.
    "complete_box_iou": (1, 0, ["aten::clamp", "aten::max(", "aten::min(", "aten::atan"]),
    # union.new_tensor([eps]) reads `union`, which therefore is stored; overlap, which union and
    # the final division both read, is recomputed in each: two pairwise ops, no [B,N,M,2] value
    # stored.
    "mmdet_iou": (2, 0, ["aten::clamp", "aten::div"]),
    "mmdet_giou": (2, 0, ["aten::clamp", "aten::div"]),
    # clamp_ on the [N,M,2] intermediate becomes out-of-place; each prod(2) is a tsfuse::reduce;
    # the final division joins the `inter` reduction as its epilogue (areas are operands).
    "yolo_box_iou": (0, 3, ["aten::clamp", "aten::min(", "aten::max(", "aten::prod", "aten::div"]),
    "yolo_iou": (1, 0, ["aten::clamp", "aten::div", "aten::minimum", "aten::maximum"]),
    "yolo_giou_xyxy": (1, 0, ["aten::clamp", "aten::div", "aten::minimum", "aten::maximum"]),
    "yolo_diou": (1, 0, ["aten::clamp", "aten::div", "aten::minimum", "aten::maximum", "aten::pow"]),
    "cdist_l1": (0, 1, ["aten::sub", "aten::abs", "aten::sum"]),
    "cdist_l2": (0, 1, ["aten::sub", "aten::pow", "aten::sum"]),  # sqrt of the [N,M] result stays
    "gaussian_kernel_sum": (0, 1, ["aten::sub", "aten::pow", "aten::exp", "aten::sum"]),
    "nearest_neighbour": (0, 1, ["aten::sub", "aten::pow", "aten::argmin"]),
    # each minimum's mean over every dim: a one-branch sweep (the [N] minima are stored and ATen
    # averages them at call time: not larger than the operands)
    "chamfer": (0, 0, ["aten::sub", "aten::pow", "aten::min", "aten::mean"], {"reduce_sweep": 2}),
    # a reduction of a reduction's value: one chain (nest_reductions); both minima: one sweep
    "kernel_sum_of_distances": (0, 0, ["aten::sub", "aten::pow", "aten::exp", "aten::sum"], {"reduce_chain": 1}),
    "nearest_neighbour_of_sum": (0, 0, ["aten::sub", "aten::pow", "aten::sum", "aten::argmin"], {"reduce_chain": 1}),
    "chamfer_of_sum": (0, 0, ["aten::sub", "aten::pow", "aten::sum(%", "aten::amin"], {"reduce_sweep": 1}),
    "anchor_best_iou": (0, 1, ["aten::clamp", "aten::div", "aten::amax"]),
    # max(dim=0) returning values AND indices: one tsfuse::reduce_with_indices, the IoU matrix is
    # never stored; the final where() over the values and a full_like of the indices is its
    # epilogue (fold_indices_epilogue), which returns the matches in the indices' place.
    "anchor_matching": (0, 0, ["aten::clamp", "aten::div(", "aten::max(", "aten::full_like", "aten::where"]),
    # the max sits in the branch of a guard on the matrix's row count (scripted): the IoU is copied
    # into that branch, where it fuses with the max; outside it the matrix's shape is read from
    # tsfuse::shape_of (sink_into_branches). Traced, the trace took the branch.
    "guarded_anchor_matching": (0, 0, ["aten::clamp", "aten::div(", "aten::max("]),
    # chunk + unpack, then wh[..., 0]: the chunks' rank is provable, every view is sunk.
    "chunk_box_iou": (1, 0, ["aten::clamp", "aten::div", "aten::select", "aten::max(", "aten::min("]),
    # the corners are recomputed by each product over the pair (read through slices of box1[:, None]);
    # the mask's .type(tl.type()) is a cast in the mask's product: traced to(cpu, float32) (checked
    # against the operands' device per call), scripted to(mask, tl.to()), a cast to a 0-dim
    # prototype of tl's type whose dtype, layout and device tsfuse::shape_of gives (tl is never
    # computed). The areas' two reduces, and one chain: the mask's product (stage 0, slab by slab)
    # read by the epilogue of the intersection's product, which computes the IoU (no [N, M] value
    # stored; the areas' [M] product does not host the [N, M] tail).
    "yolox_iou": (0, 2, ["aten::max(", "aten::min(", "aten::lt", "aten::to(", "aten::div"], {"reduce_chain": 1}),
    # xywh2xyxy fills a buffer slice by slice before box_iou reads it: those writes do not block
    # the region. Its [N] / [M] corner vectors (x - w / 2, ...; each computed twice before CSE)
    # join the region: one pairwise op.
    "xywh_box_iou": (1, 0, ["aten::clamp", "aten::max(", "aten::min("]),
    # the repeats are read as broadcasts (tsfuse::broadcast_repeat), never stored
    "repeat_sq_distance": (0, 1, ["aten::repeat", "aten::sub", "aten::pow"]),
    # the tail after the matmul is x_norm's epilogue, one fused call over the matmul output
    "matmul_distance": (0, 2, ["aten::add", "aten::sub", "aten::clamp_min", "aten::sqrt"]),
    # view(-1, 1) ends the norms' epilogues: the tail is one pairwise op over the matmul output
    "matmul_rbf_kernel": (1, 2, ["aten::add", "aten::sub", "aten::exp"]),
    # the [D, N, M] cdist output is an operand; the sum over D and the exp are one reduce
    "periodic_kernel": (0, 1, ["aten::sin", "aten::pow", "aten::sum", "aten::exp"]),
    # the loop over coordinates unrolled (traced: by the trace), each d += ... made functional
    # through tsfuse::inplace_result: the buffer and the three terms are one pairwise op.
    "coordinate_l1_distance": (1, 0, ["prim::Loop", "aten::add_", "aten::abs", "aten::sub"]),
    # the reshapes computed past (sink_reshapes), pairwise_distance decomposed: the distances
    # and their argmin are one chain; no [n * k, d] copy, no [n, k] distances stored.
    "flattened_pairs_assign": (0, 0, ["aten::pairwise_distance", "aten::reshape", "aten::view", "aten::argmin"],
                               {"reduce_chain": 1}),
}

VARIANTS = [(name, traced) for name in detection_models.FUNCTIONS for traced in (False, True)]


def _stem(name, traced):
    return name + ("_traced" if traced else "")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Saves every model (both variants) and runs optimize-ts --check --report on each."""
    d = tmp_path_factory.mktemp("detection")
    paths = detection_models.save_all(d)
    return d, paths


def _optimize(models, optimize_ts, name, traced):
    d, paths = models
    stem = _stem(name, traced)
    out, report = d / f"{stem}.opt.pt", d / f"{stem}.json"
    if not out.exists():
        proc = run_tool(optimize_ts, "--check", "--report", report, paths[stem], out)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return torch.jit.load(str(out)), json.loads(report.read_text())


def _sizes(key):
    if key == "xyxy":
        return [((n,), (m,)) for n, m in ((13, 7), (1, 5), (4, 1), (0, 3))]
    if key == "batched_xyxy":
        return [((2, n), (2, m)) for n, m in ((6, 4), (1, 3), (3, 0))]
    if key == "xywh":
        return [((n,), (m,)) for n, m in ((9, 6), (1, 1), (0, 2))]
    return [((n,), (m,)) for n, m in ((11, 7), (1, 4), (5, 1))]


def _inputs(key, sizes, seed):
    (a, b) = sizes
    g = torch.Generator().manual_seed(seed)
    if key in ("xyxy", "batched_xyxy"):
        def boxes(shape):
            xy = torch.rand(*shape, 2, generator=g) * 50
            return torch.cat([xy, xy + torch.rand(*shape, 2, generator=g) * 20 + 0.5], dim=-1)
        return boxes(a), boxes(b)
    if key == "xywh":
        def boxes(shape):
            return torch.cat([torch.rand(*shape, 2, generator=g) * 50, torch.rand(*shape, 2, generator=g) * 20 + 0.5], -1)
        return boxes(a), boxes(b)
    dim = {"points2": 2, "points3": 3, "points8": 8}[key]
    x, y = torch.randn(*a, dim, generator=g), torch.randn(*b, dim, generator=g)
    if key == "points2":
        return x, y, torch.rand(*b, generator=g)
    return x, y


def _same(expected, actual):
    if isinstance(expected, (tuple, list)):
        assert len(expected) == len(actual)
        for e, a in zip(expected, actual):
            _same(e, a)
        return
    assert expected.dtype == actual.dtype and expected.shape == actual.shape, (expected, actual)
    if expected.dtype.is_floating_point:
        torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5, equal_nan=True)
    else:
        assert torch.equal(expected, actual)


@pytest.mark.parametrize("name,traced", VARIANTS, ids=[_stem(n, t) for n, t in VARIANTS])
def test_outputs_equal_eager(models, optimize_ts, tsfuse_lib, name, traced):
    opt, _ = _optimize(models, optimize_ts, name, traced)
    fn, key = detection_models.FUNCTIONS[name]
    with torch.no_grad():
        for i, sizes in enumerate(_sizes(key)):
            args = _inputs(key, sizes, 100 + i)
            try:
                want = fn(*args)
            except (RuntimeError, IndexError):  # e.g. amax over 0 anchors: the optimized one raises too
                with pytest.raises(Exception):
                    opt(*args)
                continue
            _same(want, opt(*args))


@pytest.mark.parametrize("name,traced", VARIANTS, ids=[_stem(n, t) for n, t in VARIANTS])
def test_fused_ops_and_no_broadcast_producer_left(models, optimize_ts, tsfuse_lib, name, traced):
    opt, report = _optimize(models, optimize_ts, name, traced)
    graph = str(opt.forward.graph)
    pairwise, reduce, gone, *nested = EXPECT.get(_stem(name, traced), EXPECT[name])
    nested = nested[0] if nested else {}
    assert graph.count("tsfuse::pairwise(") == pairwise, graph
    assert graph.count("tsfuse::reduce(") == reduce, graph
    for op in ("reduce_chain", "reduce_sweep"):
        assert graph.count(f"tsfuse::{op}(") == nested.get(op, 0), graph
    assert graph.count("tsfuse::reduce_with_indices(") == (name in ("anchor_matching", "guarded_anchor_matching")), graph
    for op in gone:
        assert op not in graph, (op, graph)
    assert "prim::CallFunction" not in graph and "prim::CallMethod" not in graph
    # every rejected candidate says why
    for e in report["events"]:
        assert e["reason"], e
