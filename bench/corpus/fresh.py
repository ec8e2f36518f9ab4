"""The second real-model corpus (issue 50's acceptance): functions of eleven libraries the first
corpus (entries.py) does not use, found by searching packages people install for broadcast code,
and called as their users call them (the arguments their own callers pass). What an entry says:
entry.py; `fused` is what tsfuse does today, measured, not a goal.
"""
import math
import os
import tempfile
from typing import List

import torch
import torch.nn.functional as F

from entry import EMB, LOWD, Entry, gpytorch_kernel, library_function

_BROADCAST_SUM = "float sum over a broadcast dim (the broadcast intermediate is never stored)"

UL, ANI, E3, PYRO, BOT, TD, PA, POT, TRI, FPK, TKM = (
    "ultralytics", "torchani", "e3nn", "pyro-ppl", "botorch", "torchdrift", "pytorch-adapt", "POT",
    "online-triplet-loss", "fast-pytorch-kmeans", "torch-kmeans")


# --- inputs ------------------------------------------------------------------------------------

def _sized(size, test, bench):
    return test if size == "test" else bench


def _xyxy(g, *lead, img=640.0, min_wh=2.0, max_wh=200.0):
    xy = torch.rand(*lead, 2, generator=g) * (img - max_wh)
    wh = min_wh + torch.rand(*lead, 2, generator=g) * (max_wh - min_wh)
    return torch.cat([xy, xy + wh], -1)


def _xywh(g, *lead, img=1.0, min_wh=0.01, max_wh=0.3):
    c = max_wh / 2 + torch.rand(*lead, 2, generator=g) * (img - max_wh)
    wh = min_wh + torch.rand(*lead, 2, generator=g) * (max_wh - min_wh)
    return torch.cat([c, wh], -1)


def _det_boxes(size, g):
    """Ground truth [N, 4] x predictions [M, 4], xyxy pixels (a validator's box_iou)."""
    n, m = _sized(size, (37, 23), (20000, 500))
    return _xyxy(g, n), _xyxy(g, m)


def _matcher_boxes(size, g):
    """RT-DETR's Hungarian matcher: predictions [B, Q, 4] x targets [B, T, 4], normalized xywh."""
    b, q, t = _sized(size, (2, 37, 23), (32, 300, 100))
    return _xywh(g, b, q), _xywh(g, b, t)


def _gt_anchor_boxes(size, g):
    """Ground truth [B, N, 4] x decoded predictions [B, A, 4] (8400 anchors: a 640 image)."""
    b, n, a = _sized(size, (2, 7, 23), (16, 50, 8400))
    return _xyxy(g, b, n), _xyxy(g, b, a)


def _oriented_boxes(size, g):
    n, m = _sized(size, (37, 23), (2000, 2000))
    rows = []
    for k in (n, m):
        c = 100 + torch.rand(k, 2, generator=g) * 824
        wh = 4 + torch.rand(k, 2, generator=g) * 150
        rows.append(torch.cat([c, wh, torch.rand(k, 1, generator=g) * (math.pi / 2)], -1))
    return tuple(rows)


def _keypoints(size, g):
    """COCO keypoints [N, 17, 3] (visibility 0 or 2) x predictions [M, 17, 3], and areas [N]."""
    n, m = _sized(size, (37, 23), (200, 1000))
    gt = torch.rand(n, 17, 3, generator=g) * 640
    gt[..., 2] = (torch.rand(n, 17, generator=g) > 0.3).float() * 2
    pred = torch.rand(m, 17, 3, generator=g) * 640
    pred[..., 2] = torch.rand(m, 17, generator=g)
    return gt, pred, 100 + torch.rand(n, generator=g) * 40000


def _masks(size, g):
    n, m, hw = _sized(size, (37, 23, 256), (100, 300, 160 * 160))
    return (torch.rand(n, hw, generator=g) > 0.7).float(), (torch.rand(m, hw, generator=g) > 0.7).float()


def _assigner_inputs(size, g):
    """TaskAlignedAssigner's anchor points in pixels (make_anchors * stride, as the loss passes
    them), padded ground truth [B, N, 4] (zero rows where mask_gt is 0) and mask_gt [B, N, 1]."""
    from ultralytics.utils.tal import make_anchors
    img, b, n = _sized(size, (64, 2, 7), (640, 16, 50))
    feats = [torch.empty(1, 1, img // s, img // s) for s in (8, 16, 32)]
    points, strides = make_anchors(feats, torch.tensor([8.0, 16.0, 32.0]), 0.5)
    mask = (torch.rand(b, n, 1, generator=g) > 0.2).float()
    return points * strides, _xyxy(g, b, n, img=float(img), min_wh=1.0, max_wh=img / 3) * mask, mask


def _distances(size, g):
    return (0.5 + torch.rand(_sized(size, 37, 1_000_000), generator=g) * 4.6,)


def _triplets(size, g):
    """torchani's angular inputs: the two side lengths [2, T] and vectors [2, T, 3] of each triplet."""
    t = _sized(size, 37, 300_000)
    v = torch.randn(2, t, 3, generator=g)
    v = v / v.norm(dim=-1, keepdim=True) * (0.6 + torch.rand(2, t, 1, generator=g) * 2.8)
    return v.norm(dim=-1), v


def _edge_lengths(size, g):
    return (0.1 + torch.rand(_sized(size, 37, 1_000_000), generator=g) * 4.9,)


def _points(test, bench, kind="randn"):
    def make(size, g):
        n, m, d = _sized(size, test, bench)
        if kind == "levels":  # categorical levels 0..4 as floats (botorch's mixed models)
            return tuple(torch.randint(0, 5, (k, d), generator=g).float() for k in (n, m))
        draw = torch.rand if kind == "unit" else torch.randn
        return draw(n, d, generator=g), draw(m, d, generator=g)
    return make


def _labelled_embeddings(size, g, bench_batch=1024):
    """A metric-learning batch: labels [B] (4 samples per class, shuffled) and embeddings [B, D]."""
    b, d = _sized(size, (32, 16), (bench_batch, 128))
    labels = torch.arange(b // 4).repeat_interleave(4)[torch.randperm(b, generator=g)]
    return labels, torch.randn(b, d, generator=g)


def _clusters(size, g, num_init=8, unit=False):
    """torch-kmeans' x [BS, N, D] and centres [BS, num_init, K, D]."""
    bs, n, k, d = _sized(size, (2, 37, 5, 16), (4, 1024, 8, 64))
    x, c = torch.randn(bs, n, d, generator=g), torch.randn(bs, num_init, k, d, generator=g)
    return (F.normalize(x, dim=-1), F.normalize(c, dim=-1)) if unit else (x, c)


# --- callables ---------------------------------------------------------------------------------

def _ultralytics(attr, module="ultralytics.utils.metrics"):
    # ultralytics writes its settings file on import: a folder of ours, not the user's home
    os.environ.setdefault("YOLO_CONFIG_DIR", os.path.join(tempfile.gettempdir(), "tsfuse-ultralytics"))
    return library_function(module, attr)()


def _giou_cost():
    """RT-DETR's HungarianMatcher cost: 1 - bbox_iou(pred[:, :, None], gt[:, None], xywh, GIoU)."""
    bbox_iou = _ultralytics("bbox_iou")

    def giou_cost(pred, gt):
        return 1.0 - bbox_iou(pred.unsqueeze(2), gt.unsqueeze(1), xywh=True, GIoU=True).squeeze(-1)
    return giou_cost


def _ciou():
    """CIoU of ground truth [B, N, 1, 4] against predictions [B, 1, A, 4], bbox_iou's documented
    broadcast (the task-aligned assigner's overlaps before it gathered pairs)."""
    bbox_iou = _ultralytics("bbox_iou")

    def ciou(gt, pred):
        return bbox_iou(gt.unsqueeze(2), pred.unsqueeze(1), xywh=False, CIoU=True).squeeze(-1).clamp_(0)
    return ciou


def _oks():
    """PoseValidator's kpt_iou(gt, pred, sigma=OKS_SIGMA, area=area) (sigma a list: scriptable)."""
    kpt_iou = _ultralytics("kpt_iou")
    from ultralytics.utils.metrics import OKS_SIGMA

    class OKS(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.sigma = [float(s) for s in OKS_SIGMA]

        def forward(self, gt, pred, area):
            return kpt_iou(gt, pred, sigma=self.sigma, area=area)
    return OKS().eval()


def _select_candidates():
    """v8DetectionLoss's assigner: TaskAlignedAssigner(topk=10, num_classes=80, alpha=0.5, beta=6)."""
    assigner = _ultralytics("TaskAlignedAssigner", "ultralytics.utils.tal")
    return assigner(topk=10, num_classes=80, alpha=0.5, beta=6.0, stride=[8, 16, 32]).select_candidates_in_gts


def _module(module, attr, factory):
    def make():
        import importlib
        torch.manual_seed(0)
        return factory(getattr(importlib.import_module(module), attr)).eval()
    return make


def _pyro(cls, input_dim=3):
    """A pyro.contrib.gp kernel, called kernel(X, Z) as GPRegression does; module-local parameters
    (pyro's setting) so that kernels do not share the global store's "lengthscale"."""
    def make():
        import pyro
        import pyro.contrib.gp.kernels as kernels
        pyro.settings.set(module_local_params=True)
        torch.manual_seed(0)
        return getattr(kernels, cls)(input_dim=input_dim)
    return make


def _kernel_mmd(kernel):
    """KernelMMDDriftDetector's statistic: kernel_mmd(x, y, n_perm=None, kernel=...)."""
    def make():
        from torchdrift.detectors import mmd
        k = getattr(mmd, kernel)()

        def kernel_mmd(x, y):
            return mmd.kernel_mmd(x, y, n_perm=None, kernel=k)
        return kernel_mmd
    return make


def _multi_kernel_mmd():
    """pytorch-adapt's quadratic multi-kernel MMD (DAN/JAN): 33 scales 2^-8 .. 2^8."""
    from pytorch_adapt.layers import MMDLoss
    from pytorch_adapt.layers.utils import get_kernel_scales
    return MMDLoss(kernel_scales=get_kernel_scales(), mmd_type="quadratic")


def _method(module, cls, method, prepare=None, **kwargs):
    def make():
        import importlib
        obj = getattr(importlib.import_module(module), cls)(**kwargs)
        if prepare:
            prepare(obj)
        return getattr(obj, method)
    return make


# --- the corpus ----------------------------------------------------------------------------------

def _entry(*args, **kwargs):
    return Entry(*args, corpus="second", **kwargs)


ENTRIES: List[Entry] = [
    # ultralytics (detection, segmentation, pose, oriented boxes; validators, matcher, assigner)
    _entry("ul.box_iou", UL, lambda: _ultralytics("box_iou"), _det_boxes, "script", {"pairwise": 1},
           "box1.unsqueeze(1).chunk(2, 2) against box2's: the intersection (clamp_ in place on a fresh value), "
           "the areas' products and the IoU are one pairwise op"),
    _entry("ul.bbox_iou(GIoU) matcher cost", UL, _giou_cost, _matcher_boxes, "script", {"pairwise": 1},
           "xywh -> corners, intersection, union, enclosing box and GIoU over [B, Q, 1, 4] x [B, 1, T, 4], the "
           "caller's .squeeze(-1) (moved to the leaves: tsfuse::broadcast_squeeze) and 1 - x are one pairwise op"),
    _entry("ul.bbox_iou(CIoU)", UL, _ciou, _gt_anchor_boxes, "script", {"pairwise": 1},
           "the CIoU (atan aspect terms, the no_grad alpha, clamp_ in place) and the caller's "
           ".squeeze(-1).clamp_(0) are one pairwise op"),
    _entry("ul.batch_probiou", UL, lambda: _ultralytics("batch_probiou"), _oriented_boxes, "trace", {"pairwise": 3},
           "the [N, M] Bhattacharyya distance, log, clamp, exp and sqrt, and the per-box covariance terms (cos "
           "and sin of each box's angle, run once per box: kernels/runtime/hoist.h) are one pairwise op; the "
           "other two are each box set's squared sides over 12, which the covariance's split reads"),
    _entry("ul.kpt_iou", UL, _oks, _keypoints, "script", {"reduce": 1},
           "squared keypoint distances over [N, M, 17], exp, the visibility mask and the sum over keypoints are "
           "one reduce, with the / (mask.sum + eps) as its epilogue"),
    _entry("ul.mask_iou", UL, lambda: _ultralytics("mask_iou"), _masks, "script", {"pairwise": 1},
           "a matmul of the flattened masks; clamp_, the union from the row sums and the division are one "
           "pairwise op over its [N, M] output"),
    _entry("ul.select_candidates_in_gts", UL, _select_candidates, _assigner_inputs, "trace", {"pairwise": 4},
           "the four `mask &= centre - corner > eps` tests (Python's augmented assignment, aten::__iand__, made "
           "out of place) are one pairwise op over [B, N, A]; the other three are the per-box xyxy <-> xywh "
           "conversions and the small-box floor on [B, N, 2]"),
    # torchani (ANI-2x atomic environment vectors) and e3nn (radial embeddings of edge lengths)
    _entry("ani.ANIRadial", ANI, _module("torchani.aev", "ANIRadial", lambda c: c.like_2x()), _distances,
           "script", {"pairwise": 2},
           "0.25 exp(-eta (d - shift)^2) times the cutoff over [P, 16] is one pairwise op; the cosine cutoff is "
           "the other, over the [P] distances"),
    _entry("ani.ANIAngular", ANI, _module("torchani.aev", "ANIAngular", lambda c: c.like_2x()), _triplets,
           "script", {"pairwise": 2, "reduce": 1},
           "the [T, 32] angular terms (cos, pow by the zeta tensor, exp, outer product) are one pairwise op; the "
           "cosine angle (a sum over the 3 coordinates) is a reduce and the cutoff product a small op, both over "
           "[T]"),
    _entry("e3nn.soft_one_hot_linspace(gaussian)", E3,
           library_function("e3nn.math", "soft_one_hot_linspace", start=0.0, end=5.0, number=10, basis="gaussian",
                            cutoff=True), _edge_lengths, "trace", {"pairwise": 1},
           "(x[..., None] - values) / step, squared, exp over [E, 10] is one pairwise op"),
    _entry("e3nn.soft_one_hot_linspace(bessel)", E3,
           library_function("e3nn.math", "soft_one_hot_linspace", start=0.0, end=5.0, number=8, basis="bessel",
                            cutoff=True), _edge_lengths, "trace", {"pairwise": 1},
           "sin(roots x / c) / x times the two cutoff masks over [E, 8] is one pairwise op"),
    # pyro.contrib.gp kernels (PyroModules: traced)
    _entry("pyro.RBF", PYRO, _pyro("RBF"), LOWD, "trace", {"pairwise": 1, "reduce": 2},
           "matmul-expanded distance: the two row norms are reduces; clamp, the variance's exp transform and "
           "exp(-r2 / 2) are one pairwise op over the matmul's output"),
    _entry("pyro.Matern52", PYRO, _pyro("Matern52"), LOWD, "trace", {"pairwise": 1, "reduce": 2},
           "as pyro.RBF; the sqrt and the polynomial times exp read r2 twice inside the one pairwise op"),
    _entry("pyro.RationalQuadratic", PYRO, _pyro("RationalQuadratic"), LOWD, "trace", {"pairwise": 1, "reduce": 2},
           "as pyro.RBF, then (1 + r2 / (2 alpha))^-alpha with alpha a parameter tensor: -alpha, computed from "
           "the parameter in the program, is computed once before the call, so pow runs compiled with one "
           "exponent"),
    _entry("pyro.Periodic", PYRO, _pyro("Periodic"), LOWD, "trace", {"reduce": 1},
           "sin(pi (x_i - z_j) / period) / lengthscale squared and summed over D, then exp, is one reduce"),
    _entry("pyro.Brownian", PYRO, _pyro("Brownian", input_dim=1), _points((41, 29, 1), (2000, 2000, 1)), "trace",
           {"pairwise": 1},
           "where(sign(x) == sign(z)^T, variance * min(|x|, |z|^T), 0) over [N, M] is one pairwise op"),
    # botorch kernels (gpytorch kernels: traced in trace_mode, as the first corpus's)
    _entry("botorch.CategoricalKernel", BOT, gpytorch_kernel(lambda k: k.CategoricalKernel(ard_num_dims=8),
                                                             "botorch.models.kernels"),
           _points((41, 29, 8), (2000, 2000, 8), "levels"), "trace", {"reduce": 1},
           "(x1[:, None] != x2[None]) / lengthscale, mean over D, exp(-d) is one reduce"),
    _entry("botorch.InfiniteWidthBNNKernel", BOT, gpytorch_kernel(lambda k: k.InfiniteWidthBNNKernel(),
                                                                  "botorch.models.kernels"),
           _points((41, 29, 8), (2000, 2000, 8), "unit"), "trace", {"pairwise": 5, "reduce": 2},
           "the three chained layers of the arc-cosine recursion (sqrt, the clamped cosine, acos, sin) are one "
           "pairwise op over the first layer's matmul output and each layer's matmul of [N, 1] x [1, M] norms "
           "(an outer product the matmul computes and stores: three [N, M] values); the norms' updates are four "
           "small ops, the row norms reduces"),
    _entry("botorch.LinearTruncatedFidelityKernel", BOT,
           gpytorch_kernel(lambda k: k.LinearTruncatedFidelityKernel(fidelity_dims=[7], dimension=8),
                           "botorch.models.kernels"),
           _points((41, 29, 8), (2000, 2000, 8), "unit"), "trace", {"pairwise": 1},
           "the two Matern terms over the cdist output and the fidelity polynomial (1 - x1)(1 - x2^T)(1 + x1 "
           "x2^T)^power over [N, 1] x [1, M] are one pairwise op"),
    # torchdrift and pytorch-adapt (MMD statistics and losses)
    _entry("torchdrift.kernel_mmd(Gaussian)", TD, _kernel_mmd("GaussianKernel"), EMB, "trace", {"pairwise": 2},
           "cdist of the stacked samples, a median for the lengthscale, exp(-d^2 / (2 l^2)) (one pairwise op), "
           "then three block sums and the statistic (a pairwise op of 0-dim values)"),
    _entry("torchdrift.kernel_mmd(RationalQuadratic)", TD, _kernel_mmd("RationalQuadraticKernel"), EMB, "trace",
           {"pairwise": 2},
           "as the Gaussian one with (1 + d^2 / (2 alpha l^2))^-alpha"),
    _entry("pytorch_adapt.MMDLoss(multi-kernel)", PA, _multi_kernel_mmd, EMB, "trace",
           {"pairwise": 3, "reduce": 2, "reduce_sweep": 1},
           "each of the three [N, M] distance matrices (cdist, squared) times 33 scales, exp, weighted and summed"
           " over the scales is a reduce (one a reduce_sweep with its mean), never storing [N, M, 33]; the scale "
           "vector and the statistic are small ops"),
    # POT (optimal transport cost matrices, torch backend)
    _entry("pot.dist", POT, library_function("ot", "dist"), EMB, "trace", {"pairwise": 1},
           "matmul expansion: the row norms (einsum) added in place to -2 x y^T and clamped by maximum(c, 0) are "
           "one pairwise op over the matmul's output"),
    _entry("pot.dist(euclidean, self)", POT, library_function("ot", "dist", metric="euclidean"),
           lambda size, g: EMB(size, g)[:1], "trace", {"pairwise": 1},
           "as pot.dist, then sqrt and the zeroed diagonal c * (1 - eye) in the same pairwise op, eye as "
           "the comparison of two aranges"),
    _entry("pot.dist(cityblock)", POT, library_function("ot", "dist", metric="cityblock", use_tensor=True), EMB,
           "trace", {"reduce": 1},
           "|x1[:, None] - x2[None]|.sum(2) over [N, M, D] is one reduce"),
    _entry("pot.utils.kernel(gaussian)", POT, library_function("ot.utils", "kernel", method="gaussian", sigma=4.0),
           EMB, "trace", {"pairwise": 1},
           "as pot.dist, then exp(-d / (2 sigma^2)) in the same pairwise op"),
    # online-triplet-loss (metric learning)
    _entry("triplet.batch_hard_triplet_loss", TRI,
           library_function("online_triplet_loss.losses", "batch_hard_triplet_loss", margin=0.2, squared=False),
           _labelled_embeddings, "trace", {"pairwise": 1, "reduce": 1, "reduce_sweep": 1},
           "the distances (matmul expansion, distances[distances < 0] = 0 as a where, mask, sqrt) are one pairwise "
           "op over the matmul's output, stored: two reductions (hardest positive, hardest negative) read them; "
           "each reduction and its label masks is one fused op, the loss's mean is swept into the second"),
    _entry("triplet.batch_all_triplet_loss", TRI,
           library_function("online_triplet_loss.losses", "batch_all_triplet_loss", margin=0.2, squared=False),
           lambda size, g: _labelled_embeddings(size, g, bench_batch=512), "trace", {"pairwise": 3, "reduce": 3},
           "the three sums over [B, B, B] (the mask's, the loss's and the count of positive losses: "
           "loss[loss > 1e-16].size(0) is that count, count_selected) are three reduces, each computing the mask "
           "(10 bool ops) and the loss itself, so neither is stored; the sqrt of the [B, B] distances they read "
           "runs once per call at that shape (hoist.h), and the divisions are the reduces' epilogues. The "
           "distances (matmul expansion) are a pairwise op over the matmul's output; eye(B) is a [B, B] pairwise "
           "op of two aranges (the mask reads its bool cast through unsqueezes sink_views does not move past the "
           "cast); the zero-distance mask (d == 0).float() is a pairwise op with its cast (no bool [B, B] stored)",
           reorders="the loss's float sum over the [B, B, B] triplets (never stored) runs in compiled pieces "
                    "(the masks' bool-to-float cast ends a compiled run), whose fold follows eager's cascade only "
                    "for rows of fewer than 16 vector groups; eager sums all B^3 values as one row"),
    # k-means assignment steps
    _entry("fpk.KMeans.max_sim", FPK, _method("fast_pytorch_kmeans", "KMeans", "max_sim", n_clusters=1024,
                                              mode="euclidean"),
           _points((37, 23, 16), (4096, 1024, 64)), "trace", {"reduce": 1, "reduce_chain_with_indices": 1},
           "2 x c^T - |x|^2 - |c|^2 and its max over the centres (values and indices) are one "
           "reduce_chain_with_indices over the matmul's output; the centres' norms are the other reduce"),
    _entry("tkm.KMeans._assign", TKM, _method("torch_kmeans", "KMeans", "_assign", n_clusters=8, verbose=False),
           _clusters, "trace", {"reduce_chain": 1},
           "x[:, :, None].expand(...).reshape(-1, d) and the centres' alike, F.pairwise_distance, .view(bs, "
           "n_init, n, k), argmin: the reshapes of expanded values sink away (sink_reshapes) and the distance and"
           " the argmin are one reduce_chain"),
    _entry("tkm.SoftKMeans._cluster_iter", TKM,
           _method("torch_kmeans", "SoftKMeans", "_cluster_iter", lambda m: m._check_x(torch.zeros(1, 2, 2)),
                   n_clusters=8, verbose=False),
           lambda size, g: _clusters(size, g, num_init=1, unit=True), "trace",
           {"reduce": 2, "softmax": 1, "pairwise": 1},
           "the expanded-and-reshaped dot products are one reduce; softmax(temp * d) one softmax; the weighted "
           "sums of the points, c_assign[..., None, :] @ x[:, None, None].expand(...), a matrix-vector matmul "
           "over an expanded operand, are its sum of products (decompose, under a guard that keeps the matmul "
           "for other shapes and dtypes): the second reduce, reading x in place; the cluster weights a small "
           "op; the masked writes of -inf and 0 and the diag_embed matmul stay ATen's",
           reorders=_BROADCAST_SUM),
]
