"""The benchmark workloads: TorchScript-able modules, their inputs per size, and KeOps forms.

Every workload is an nn.Module (so it can be scripted, saved for optimize-ts, compiled and run
eagerly from one definition). `make_inputs(size, device)` builds deterministic inputs (fixed seed).
`keops` is a function of the inputs computing the same result with pykeops LazyTensors, or None
with the reason in `keops_why` when KeOps cannot express the workload: KeOps evaluates
reductions over one of the two indices of a symbolic [N, M] matrix, so a workload whose output IS
the dense pairwise matrix has no KeOps form.

A workload with `grad` (the indices of the inputs that require grad) is a training loss: its
module returns a scalar and bench/suite.py times forward + backward (the loss, then its gradients
with respect to those inputs) instead of the forward alone; its `keops` form returns the same loss
and is differentiated by KeOps.
"""
import sys
import pathlib
from dataclasses import dataclass, field
from typing import Callable, List, Optional, Tuple

import torch
from torch import Tensor

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "examples"))
import detection_models  # noqa: E402
import seed_models  # noqa: E402

DENSE = "the output is the dense pairwise matrix; KeOps only returns reductions over i or j"


# --- modules -------------------------------------------------------------------------------------

def box_iou(boxes1: Tensor, boxes2: Tensor) -> Tensor:
    """IoU matrix [N, M], written as torchvision's box_iou (views of the [N, M, 2] intermediate)."""
    area1 = (boxes1[:, 2] - boxes1[:, 0]) * (boxes1[:, 3] - boxes1[:, 1])
    area2 = (boxes2[:, 2] - boxes2[:, 0]) * (boxes2[:, 3] - boxes2[:, 1])
    lt = torch.max(boxes1[:, None, :2], boxes2[:, :2])
    rb = torch.min(boxes1[:, None, 2:], boxes2[:, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[:, :, 0] * wh[:, :, 1]
    return inter / (area1[:, None] + area2 - inter)


class SeedIntersection(torch.nn.Module):
    def forward(self, boxes1: Tensor, boxes2: Tensor) -> Tensor:
        return seed_models.intersection(boxes1, boxes2)


class SeedSimilarity(torch.nn.Module):
    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        return seed_models.similarity(x, y)


class IoU(torch.nn.Module):
    def forward(self, boxes1: Tensor, boxes2: Tensor) -> Tensor:
        return box_iou(boxes1, boxes2)


class GIoU(torch.nn.Module):
    """Generalized IoU matrix (torchvision's generalized_box_iou form)."""

    def forward(self, boxes1: Tensor, boxes2: Tensor) -> Tensor:
        area1 = (boxes1[:, 2] - boxes1[:, 0]) * (boxes1[:, 3] - boxes1[:, 1])
        area2 = (boxes2[:, 2] - boxes2[:, 0]) * (boxes2[:, 3] - boxes2[:, 1])
        lt = torch.max(boxes1[:, None, :2], boxes2[:, :2])
        rb = torch.min(boxes1[:, None, 2:], boxes2[:, 2:])
        wh = (rb - lt).clamp(min=0)
        inter = wh[:, :, 0] * wh[:, :, 1]
        union = area1[:, None] + area2 - inter
        iou = inter / union
        lti = torch.min(boxes1[:, None, :2], boxes2[:, :2])
        rbi = torch.max(boxes1[:, None, 2:], boxes2[:, 2:])
        whi = (rbi - lti).clamp(min=0)
        areai = whi[:, :, 0] * whi[:, :, 1]
        return iou - (areai - union) / areai


class L1Distance(torch.nn.Module):
    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        return (x[:, None, :] - y[None, :, :]).abs().sum(-1)


class L2Distance(torch.nn.Module):
    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        return ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1).sqrt()


class GaussianKernelSum(torch.nn.Module):
    """sum_j exp(-|x_i - y_j|^2 / (2 sigma^2)) b_j -> [N] (sigma = 0.5)."""

    def forward(self, x: Tensor, y: Tensor, b: Tensor) -> Tensor:
        d2 = ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)
        return (torch.exp(d2 * -2.0) * b[None, :]).sum(1)


class GaussianKernelProduct(torch.nn.Module):
    """sum_j exp(-|x_i - y_j|^2 / (2 sigma^2)) b_j for a weight matrix b [M, 16] -> [N, 16]."""

    def forward(self, x: Tensor, y: Tensor, b: Tensor) -> Tensor:
        d2 = ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)
        return (torch.exp(d2 * -2.0)[:, :, None] * b[None, :, :]).sum(1)


def gaussian_mean(x: Tensor, y: Tensor) -> Tensor:
    """mean_ij exp(-|x_i - y_j|^2 / (2 sigma^2)) (sigma = 0.5): one term of an MMD."""
    return torch.exp(((x[:, None, :] - y[None, :, :]) ** 2).sum(-1) * -2.0).mean()


class GaussianMMD(torch.nn.Module):
    """The squared maximum mean discrepancy of two point sets under a Gaussian kernel: three kernel
    means, each a reduction over every dim of an [N, M] kernel matrix."""

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        return gaussian_mean(x, x) + gaussian_mean(y, y) - 2.0 * gaussian_mean(x, y)


class DistanceIoU(torch.nn.Module):
    """torchvision's distance_box_iou, as shipped (examples/detection_models.py)."""

    def forward(self, boxes1: Tensor, boxes2: Tensor) -> Tensor:
        return detection_models.distance_box_iou(boxes1, boxes2)


class CompleteIoU(torch.nn.Module):
    """torchvision's complete_box_iou, as shipped (examples/detection_models.py)."""

    def forward(self, boxes1: Tensor, boxes2: Tensor) -> Tensor:
        return detection_models.complete_box_iou(boxes1, boxes2)


class NearestNeighbour(torch.nn.Module):
    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        return ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1).argmin(dim=1)


class Chamfer(torch.nn.Module):
    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        d2 = ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)
        return torch.min(d2, dim=1)[0].mean() + torch.min(d2, dim=0)[0].mean()


class BatchedChamfer(torch.nn.Module):
    """Chamfer distance of each pair of point clouds in a batch (a point cloud loss) -> [B]."""

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        d2 = ((x[:, :, None, :] - y[:, None, :, :]) ** 2).sum(-1)
        return torch.min(d2, dim=2)[0].mean(1) + torch.min(d2, dim=1)[0].mean(1)


class KMeansAssign(torch.nn.Module):
    """Nearest of K centroids for every point (a k-means step, vector quantisation) -> int64 [N]."""

    def forward(self, x: Tensor, c: Tensor) -> Tensor:
        return ((x[:, None, :] - c[None, :, :]) ** 2).sum(-1).argmin(dim=1)


class SoftAssignment(torch.nn.Module):
    """Soft k-means assignment: softmax over K centroids of -|x_i - c_k|^2 / T (T = 0.5) -> [N, K]."""

    def forward(self, x: Tensor, c: Tensor) -> Tensor:
        return torch.softmax(((x[:, None, :] - c[None, :, :]) ** 2).sum(-1) * -2.0, dim=1)


class AnchorMatching(torch.nn.Module):
    """Index of the best ground-truth box per anchor, -1 below IoU 0.5 -> int64 [N]."""

    def forward(self, anchors: Tensor, gt: Tensor) -> Tensor:
        iou = box_iou(anchors, gt)
        vals, idx = iou.max(dim=1)
        return idx.masked_fill(vals < 0.5, -1)


class GaussianKernelSumLoss(torch.nn.Module):
    """The Gaussian kernel sum, summed to a scalar loss."""

    def __init__(self):
        super().__init__()
        self.kernel = GaussianKernelSum()

    def forward(self, x: Tensor, y: Tensor, b: Tensor) -> Tensor:
        return self.kernel(x, y, b).sum()


class ColumnWeightedLoss(torch.nn.Module):
    """A pairwise workload's [N, M] matrix as a scalar loss: sum_ij f(x, y)_ij w_j (w: a weight per column)."""

    def __init__(self, pairwise: torch.nn.Module):
        super().__init__()
        self.pairwise = pairwise

    def forward(self, x: Tensor, y: Tensor, w: Tensor) -> Tensor:
        return (self.pairwise(x, y) * w[None, :]).sum()


# --- inputs --------------------------------------------------------------------------------------

def _gen(device):
    return torch.Generator().manual_seed(0)


def boxes_inputs(size, device):
    g = _gen(device)
    n, m = size
    return (seed_models.random_boxes(n, g).to(device), seed_models.random_boxes(m, g).to(device))


def similarity_inputs(size, device):
    g = _gen(device)
    s, d = size
    return (torch.randn(s, d, generator=g).to(device), torch.randn(s, d, generator=g).to(device))


def points_inputs(dim):
    def make(size, device):
        g = _gen(device)
        n, m = size
        return (torch.randn(n, dim, generator=g).to(device), torch.randn(m, dim, generator=g).to(device))
    return make


def batched_points_inputs(batch, dim):
    def make(size, device):
        g = _gen(device)
        n, m = size
        return (torch.randn(batch, n, dim, generator=g).to(device), torch.randn(batch, m, dim, generator=g).to(device))
    return make


def product_inputs(size, device):
    g = _gen(device)
    n, m = size
    return (torch.randn(n, 3, generator=g).to(device), torch.randn(m, 3, generator=g).to(device),
            torch.randn(m, 16, generator=g).to(device))


def gaussian_inputs(size, device):
    g = _gen(device)
    n, m = size
    return (torch.randn(n, 3, generator=g).to(device), torch.randn(m, 3, generator=g).to(device),
            torch.randn(m, generator=g).to(device))


def column_weights(make):
    """make's inputs plus a weight per column, w [M] (for ColumnWeightedLoss)."""
    def make_weighted(size, device):
        g = torch.Generator().manual_seed(1)
        return make(size, device) + (torch.rand(size[1], generator=g).to(device),)
    return make_weighted


# --- KeOps forms ---------------------------------------------------------------------------------

def _lazy(t):
    from pykeops.torch import LazyTensor

    return LazyTensor(t)


def _keops_d2(x, y):
    return ((_lazy(x[:, None, :].contiguous()) - _lazy(y[None, :, :].contiguous())) ** 2).sum(-1)


def keops_gaussian(x, y, b):
    d2 = _keops_d2(x, y)
    return ((d2 * -2.0).exp() * _lazy(b[None, :, None].contiguous())).sum(dim=1).view(-1)


def keops_gaussian_product(x, y, b):
    d2 = _keops_d2(x, y)
    return ((d2 * -2.0).exp() * _lazy(b[None, :, :].contiguous())).sum(dim=1)


def keops_mmd(x, y):
    def mean(a, b):
        return ((_keops_d2(a, b) * -2.0).exp()).sum(dim=1).mean()
    return mean(x, x) + mean(y, y) - 2.0 * mean(x, y)


def keops_nearest(x, y):
    return _keops_d2(x, y).argmin(dim=1).view(-1).long()


def keops_chamfer(x, y):
    d2 = _keops_d2(x, y)
    return d2.min(dim=1).mean() + d2.min(dim=0).mean()


def _keops_min(p, q):
    return p - (p - q).relu()


def _keops_max(p, q):
    return p + (q - p).relu()


def _keops_boxes(boxes1, boxes2):
    """The LazyTensors of the box pairs (i: boxes1, j: boxes2): (b1, b2, area1, area2, intersection)."""
    a = _lazy(boxes1[:, None, :].contiguous())
    g = _lazy(boxes2[None, :, :].contiguous())
    area_a = _lazy(((boxes1[:, 2] - boxes1[:, 0]) * (boxes1[:, 3] - boxes1[:, 1]))[:, None, None].contiguous())
    area_g = _lazy(((boxes2[:, 2] - boxes2[:, 0]) * (boxes2[:, 3] - boxes2[:, 1]))[None, :, None].contiguous())
    w = (_keops_min(a.elem(2), g.elem(2)) - _keops_max(a.elem(0), g.elem(0))).relu()
    h = (_keops_min(a.elem(3), g.elem(3)) - _keops_max(a.elem(1), g.elem(1))).relu()
    return a, g, area_a, area_g, w * h


def keops_anchor_matching(anchors, gt):
    _, _, area_a, area_g, inter = _keops_boxes(anchors, gt)
    iou = inter / (area_a + area_g - inter)
    vals, idx = iou.max_argmax(dim=1)
    return idx.view(-1).long().masked_fill(vals.view(-1) < 0.5, -1)


def _keops_column_weighted(kij, w):
    """sum_ij k_ij w_j of a symbolic [N, M] matrix."""
    return (kij * _lazy(w[None, :, None].contiguous())).sum(dim=1).sum()


def keops_gaussian_loss(x, y, b):
    return keops_gaussian(x, y, b).sum()


def keops_chamfer_loss(x, y):
    """KeOps has no gradient through a min reduction: its argmin, then the distances to the nearest
    points recomputed with torch (the form KeOps' error message recommends)."""
    d2 = _keops_d2(x.detach(), y.detach())
    i, j = d2.argmin(dim=1).view(-1).long(), d2.argmin(dim=0).view(-1).long()
    return ((x - y[i]) ** 2).sum(-1).mean() + ((y - x[j]) ** 2).sum(-1).mean()


def keops_l1_loss(x, y, w):
    return _keops_column_weighted((_lazy(x[:, None, :].contiguous()) - _lazy(y[None, :, :].contiguous())).abs().sum(-1), w)


def keops_giou_loss(boxes1, boxes2, w):
    a, g, area_a, area_g, inter = _keops_boxes(boxes1, boxes2)
    union = area_a + area_g - inter
    wi = (_keops_max(a.elem(2), g.elem(2)) - _keops_min(a.elem(0), g.elem(0))).relu()
    hi = (_keops_max(a.elem(3), g.elem(3)) - _keops_min(a.elem(1), g.elem(1))).relu()
    area_i = wi * hi
    return _keops_column_weighted(inter / union - (area_i - union) / area_i, w)


def keops_soft_assignment_loss(x, c, w):
    """sum_i sum_k softmax_k(-2 |x_i - c_k|^2) w_k: KeOps' softmax-weighted sum reduction."""
    return (_keops_d2(x, c) * -2.0).sumsoftmaxweight(_lazy(w[None, :, None].contiguous()), dim=1).sum()


# --- registry ------------------------------------------------------------------------------------

@dataclass
class Workload:
    name: str
    title: str
    module: Callable[[], torch.nn.Module]
    make_inputs: Callable
    sizes: List[Tuple[int, int]]
    quick: Optional[Tuple[int, int]]  # size in `make bench QUICK=1` (None: not in the quick run)
    size_label: str
    keops: Optional[Callable] = None
    keops_why: str = DENSE
    seed: bool = False
    notes: str = ""
    grad: Tuple[int, ...] = ()  # inputs that require grad: a loss, timed forward + backward


WORKLOADS = [
    Workload("seed_intersection", "Seed: IoU intersection areas [N, M]", SeedIntersection, boxes_inputs,
             [(4096, 500), (30000, 500), (121496, 500)], (2048, 100), "N x M boxes", seed=True),
    Workload("seed_similarity", "Seed: similarity |x_i - y_j| < 1 counted over samples [D, D]", SeedSimilarity,
             similarity_inputs, [(128, 250), (128, 500), (128, 1000)], (32, 128), "S x D", seed=True),
    Workload("iou", "IoU matrix (torchvision form)", IoU, boxes_inputs, [(4096, 500), (30000, 500)], None,
             "N x M boxes"),
    Workload("giou", "Generalized IoU matrix", GIoU, boxes_inputs, [(4096, 500), (30000, 500)], None,
             "N x M boxes"),
    Workload("diou", "Distance IoU matrix (torchvision's distance_box_iou)", DistanceIoU, boxes_inputs,
             [(4096, 500), (30000, 500)], None, "N x M boxes"),
    Workload("ciou", "Complete IoU matrix (torchvision's complete_box_iou)", CompleteIoU, boxes_inputs,
             [(4096, 500), (30000, 500)], None, "N x M boxes"),
    Workload("l1_distance", "Pairwise L1 distances, D = 8", L1Distance, points_inputs(8),
             [(1024, 1024), (4096, 4096)], None, "N x M points"),
    Workload("l2_distance", "Pairwise L2 distances, D = 8", L2Distance, points_inputs(8),
             [(1024, 1024), (4096, 4096)], None, "N x M points"),
    Workload("l2_distance_d3", "Pairwise L2 distances, D = 3", L2Distance, points_inputs(3),
             [(1024, 1024), (4096, 4096)], None, "N x M points"),
    Workload("l2_distance_d64", "Pairwise L2 distances, D = 64", L2Distance, points_inputs(64),
             [(1024, 1024), (4096, 4096)], None, "N x M points"),
    Workload("gaussian_kernel_sum", "Gaussian kernel sum, D = 3", GaussianKernelSum, gaussian_inputs,
             [(1024, 1024), (4096, 4096)], None, "N x M points", keops=keops_gaussian, keops_why=""),
    Workload("gaussian_kernel_product", "Gaussian kernel product with 16 weight columns, D = 3",
             GaussianKernelProduct, product_inputs, [(1024, 1024), (4096, 4096)], None, "N x M points",
             keops=keops_gaussian_product, keops_why=""),
    Workload("gaussian_mmd", "Gaussian MMD (three kernel means over every dim), D = 3", GaussianMMD,
             points_inputs(3), [(1024, 1024), (4096, 4096)], None, "N x M points", keops=keops_mmd, keops_why=""),
    Workload("nearest_neighbour", "Nearest neighbour (argmin of squared L2), D = 3", NearestNeighbour,
             points_inputs(3), [(1024, 1024), (4096, 4096)], (256, 256), "N x M points",
             keops=keops_nearest, keops_why=""),
    Workload("chamfer", "Chamfer distance, D = 3", Chamfer, points_inputs(3), [(1024, 1024), (4096, 4096)],
             None, "N x M points", keops=keops_chamfer, keops_why=""),
    Workload("chamfer_batched", "Chamfer distance over a batch of 8 point clouds, D = 3", BatchedChamfer,
             batched_points_inputs(8, 3), [(1024, 1024), (2048, 2048)], None, "N x M points (x 8)",
             keops_why="not measured: the KeOps forms here take one pair of point sets"),
    Workload("kmeans_assign", "Nearest of K centroids (k-means assignment), D = 16", KMeansAssign,
             points_inputs(16), [(100000, 8), (1000000, 16)], None, "N points x K centroids",
             keops=keops_nearest, keops_why=""),
    Workload("soft_assignment", "Soft k-means assignment (softmax of -squared L2 / T over K centroids), D = 16",
             SoftAssignment, points_inputs(16), [(4096, 256), (65536, 256)], None, "N points x K centroids"),
    Workload("anchor_matching", "Anchor matching (IoU, max with index, threshold)", AnchorMatching,
             boxes_inputs, [(4096, 500), (30000, 500)], None, "N x M boxes", keops=keops_anchor_matching,
             keops_why=""),
    # Training losses, forward + backward (x and y require grad; weights do not), at 1024 x 500
    # and at a size where eager's forward + backward needs more than 1 GB.
    Workload("gaussian_kernel_sum_grad", "Forward + backward: Gaussian kernel sum, summed, D = 3",
             GaussianKernelSumLoss, gaussian_inputs, [(1024, 500), (8192, 4096)], None, "N x M points",
             keops=keops_gaussian_loss, keops_why="", grad=(0, 1)),
    Workload("chamfer_grad", "Forward + backward: Chamfer distance, D = 3", Chamfer, points_inputs(3),
             [(1024, 500), (8192, 4096)], (256, 128), "N x M points", keops=keops_chamfer_loss, keops_why="",
             grad=(0, 1)),
    Workload("l1_distance_grad", "Forward + backward: pairwise L1 distances, column-weighted sum, D = 8",
             lambda: ColumnWeightedLoss(L1Distance()), column_weights(points_inputs(8)),
             [(1024, 500), (4096, 4096)], None, "N x M points", keops=keops_l1_loss, keops_why="", grad=(0, 1)),
    Workload("giou_grad", "Forward + backward: generalized IoU matrix, column-weighted sum",
             lambda: ColumnWeightedLoss(GIoU()), column_weights(boxes_inputs), [(1024, 500), (30000, 500)], None,
             "N x M boxes", keops=keops_giou_loss, keops_why="", grad=(0, 1)),
    Workload("soft_assignment_grad", "Forward + backward: soft k-means assignment, column-weighted sum, D = 16",
             lambda: ColumnWeightedLoss(SoftAssignment()), column_weights(points_inputs(16)),
             [(1024, 500), (32768, 256)], None, "N points x K centroids", keops=keops_soft_assignment_loss,
             keops_why="", grad=(0, 1)),
]
BY_NAME = {w.name: w for w in WORKLOADS}


def size_str(size) -> str:
    return "x".join(str(s) for s in size)
