"""Reduction workloads beyond the seeds, as their authors write them (scripted modules).

NearestNeighbour  min with indices over a squared-distance matrix (3-d points)
AnchorMatch       IoU matrix, then .max(dim=0) values and indices (anchor matching)
GaussianLSE       logsumexp of a Gaussian kernel over the second point set
L2Distance        torch.linalg.vector_norm of pairwise differences (and x.norm(p, dim))
KernelEpilogue    sqrt of a summed squared difference, then exp(-d / s) * w (a reduction epilogue)
KernelProduct     a Gaussian kernel times a weight matrix b [M, K], summed over M (the exp joins the
                  distances' epilogue: pass hoist_into_epilogue)
GaussianMMD       the squared MMD of two point sets: three Gaussian kernel means, each over every
                  dim of an [N, M] kernel matrix (a one-branch reduce_sweep folds its slab sums)
SoftQuantize      soft assignment of values to K centres: softmax(-(x - c)^2 / t) over the centres,
                  and its log (differentiable histograms, soft quantisation)
SoftAssignment    soft k-means responsibilities: softmax over K centroids of -beta |x_i - c_k|^2, beta a
                  module attribute (the [N, K] distances flow slab by slab into the softmax)
StudentT          DEC's soft assignment (Xie et al. 2016, as pt-dec writes it): the Student-t kernel
                  1 / (1 + |z_i - mu_k|^2 / alpha), to the power (alpha + 1) / 2, divided by its
                  sum over the clusters
KernelRegression  Nadaraya-Watson: the Gaussian-weighted mean of targets, (w[:, :, None] * ys).sum(1)
                  over w.sum(1): both sums of the weights in one reduce_sweep, the weights never stored
GaussianKernelSum the mission's exp(-|x_i - y_j|^2 / s).sum(j) with the bandwidth s a module
                  attribute: a float the scripted graph reads at run time (prim::GetAttr), which
                  the fused op takes as an operand (tsfuse::wrapped_number)

Each exports example_inputs() so `optimize-ts --check` can run it. Used by
tests/python/test_reduce_forms_e2e.py and bench/measure_reduce_memory.py.
"""
from typing import Tuple

import torch
from torch import Tensor


def nearest_neighbour(x: Tensor, y: Tensor) -> Tuple[Tensor, Tensor]:
    d = ((x[:, None, 0] - y[None, :, 0]) ** 2 + (x[:, None, 1] - y[None, :, 1]) ** 2
         + (x[:, None, 2] - y[None, :, 2]) ** 2)
    dist, idx = d.min(dim=1)
    return dist, idx


def anchor_match(anchors: Tensor, gt: Tensor) -> Tuple[Tensor, Tensor]:
    w = (torch.min(anchors[:, None, 2], gt[None, :, 2]) - torch.max(anchors[:, None, 0], gt[None, :, 0])).clamp(min=0)
    h = (torch.min(anchors[:, None, 3], gt[None, :, 3]) - torch.max(anchors[:, None, 1], gt[None, :, 1])).clamp(min=0)
    inter = w * h
    area_a = (anchors[:, 2] - anchors[:, 0]) * (anchors[:, 3] - anchors[:, 1])
    area_g = (gt[:, 2] - gt[:, 0]) * (gt[:, 3] - gt[:, 1])
    iou = inter / (area_a[:, None] + area_g[None, :] - inter)
    best = iou.max(dim=0)
    return best.values, best.indices


def zero_guarded_iou(a: Tensor, b: Tensor) -> Tensor:
    # detectron2's pairwise_iou: the intersection a product over the coordinate pair, guarded by a
    # zero made with its dtype and device
    wh = (torch.min(a[:, None, 2:], b[:, 2:]) - torch.max(a[:, None, :2], b[:, :2])).clamp(min=0)
    inter = wh.prod(dim=2)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    zero = torch.zeros(1, dtype=inter.dtype, device=inter.device)
    return torch.where(inter > 0, inter / (area_a[:, None] + area_b - inter), zero)


def gaussian_lse(x: Tensor, y: Tensor) -> Tensor:
    # log sum_j exp(-|x_i - y_j|^2 / s) for 2-d points, the squared distance written per coordinate
    d = (x[:, None, 0] - y[None, :, 0]) ** 2 + (x[:, None, 1] - y[None, :, 1]) ** 2
    return torch.logsumexp(-d / 0.5, dim=[1])


def l2_distance(x: Tensor, y: Tensor) -> Tuple[Tensor, Tensor]:
    diff = x[:, None, :] - y[None, :, :]
    return torch.linalg.vector_norm(diff, 2.0, [-1]), (x[:, None, :] - y[None, :, :]).norm(p=1, dim=-1)


def kernel_epilogue(x: Tensor, y: Tensor, w: Tensor) -> Tensor:
    d = ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1).sqrt()
    return torch.exp(-d / 0.7) * w


def kernel_product(x: Tensor, y: Tensor, b: Tensor) -> Tensor:
    d2 = ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)
    return (torch.exp(d2 * -2.0)[:, :, None] * b[None, :, :]).sum(1)


def soft_quantize(x: Tensor, c: Tensor) -> Tuple[Tensor, Tensor]:
    # x: [N, D] values, c: [K] centres -> [N, K, D] soft assignment of each value to the centres
    d = (x[:, None, :] - c[None, :, None]) ** 2
    return torch.softmax(-d / 0.3, dim=1), torch.log_softmax(-(x[:, None, :] - c[None, :, None]).abs(), dim=1)


def _points(n: int, k: int, seed: int) -> Tensor:
    return torch.randn(n, k, generator=torch.Generator().manual_seed(seed))


def random_boxes(n: int, seed: int) -> Tensor:
    g = torch.Generator().manual_seed(seed)
    xy = torch.rand(n, 2, generator=g) * 100
    wh = torch.rand(n, 2, generator=g) * 20 + 1
    return torch.cat([xy, xy + wh], dim=1)


class NearestNeighbour(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ex = (_points(40, 3, 1), _points(30, 3, 2))

    def forward(self, x: Tensor, y: Tensor) -> Tuple[Tensor, Tensor]:
        return nearest_neighbour(x, y)

    @torch.jit.export
    def example_inputs(self) -> Tuple[Tensor, Tensor]:
        return self.ex


class AnchorMatch(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ex = (random_boxes(60, 3), random_boxes(7, 4))

    def forward(self, anchors: Tensor, gt: Tensor) -> Tuple[Tensor, Tensor]:
        return anchor_match(anchors, gt)

    @torch.jit.export
    def example_inputs(self) -> Tuple[Tensor, Tensor]:
        return self.ex


class ZeroGuardedIoU(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ex = (random_boxes(60, 5), random_boxes(7, 6))

    def forward(self, a: Tensor, b: Tensor) -> Tensor:
        return zero_guarded_iou(a, b)

    @torch.jit.export
    def example_inputs(self) -> Tuple[Tensor, Tensor]:
        return self.ex


class GaussianLSE(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ex = (_points(20, 2, 5), _points(25, 2, 6))

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        return gaussian_lse(x, y)

    @torch.jit.export
    def example_inputs(self) -> Tuple[Tensor, Tensor]:
        return self.ex


class L2Distance(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ex = (_points(20, 4, 7), _points(25, 4, 8))

    def forward(self, x: Tensor, y: Tensor) -> Tuple[Tensor, Tensor]:
        return l2_distance(x, y)

    @torch.jit.export
    def example_inputs(self) -> Tuple[Tensor, Tensor]:
        return self.ex


class KernelEpilogue(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ex = (_points(20, 4, 9), _points(25, 4, 10), torch.rand(25, generator=torch.Generator().manual_seed(11)))

    def forward(self, x: Tensor, y: Tensor, w: Tensor) -> Tensor:
        return kernel_epilogue(x, y, w)

    @torch.jit.export
    def example_inputs(self) -> Tuple[Tensor, Tensor, Tensor]:
        return self.ex


class KernelProduct(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ex = (_points(20, 3, 13), _points(25, 3, 14), _points(25, 16, 15))

    def forward(self, x: Tensor, y: Tensor, b: Tensor) -> Tensor:
        return kernel_product(x, y, b)

    @torch.jit.export
    def example_inputs(self) -> Tuple[Tensor, Tensor, Tensor]:
        return self.ex


def gaussian_mean(x: Tensor, y: Tensor) -> Tensor:
    return torch.exp(-((x[:, None, :] - y[None, :, :]) ** 2).sum(-1) / 0.5).mean()


def gaussian_mmd(x: Tensor, y: Tensor) -> Tensor:
    return gaussian_mean(x, x) + gaussian_mean(y, y) - 2.0 * gaussian_mean(x, y)


class GaussianMMD(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ex = (_points(30, 3, 16), _points(24, 3, 17))

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        return gaussian_mmd(x, y)

    @torch.jit.export
    def example_inputs(self) -> Tuple[Tensor, Tensor]:
        return self.ex


class SoftQuantize(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ex = (_points(20, 4, 12), torch.linspace(-2, 2, 9))

    def forward(self, x: Tensor, c: Tensor) -> Tuple[Tensor, Tensor]:
        return soft_quantize(x, c)

    @torch.jit.export
    def example_inputs(self) -> Tuple[Tensor, Tensor]:
        return self.ex


def soft_assignment(x: Tensor, c: Tensor, beta: float) -> Tensor:
    return torch.softmax(-beta * ((x[:, None, :] - c[None, :, :]) ** 2).sum(-1), dim=1)


class SoftAssignment(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.beta = SOFTNESS
        self.ex = (_points(40, 3, 25), _points(6, 3, 26))

    def forward(self, x: Tensor, c: Tensor) -> Tensor:
        return soft_assignment(x, c, self.beta)

    @torch.jit.export
    def example_inputs(self) -> Tuple[Tensor, Tensor]:
        return self.ex


def soft_assignment_at_softness(x: Tensor, c: Tensor) -> Tensor:
    return soft_assignment(x, c, SOFTNESS)


def student_t(z: Tensor, mu: Tensor, alpha: float) -> Tensor:
    norm_squared = torch.sum((z.unsqueeze(1) - mu) ** 2, 2)
    numerator = 1.0 / (1.0 + (norm_squared / alpha))
    power = float(alpha + 1) / 2
    numerator = numerator ** power
    return numerator / torch.sum(numerator, dim=1, keepdim=True)


class StudentT(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.alpha = DEGREES
        self.ex = (_points(40, 10, 27), _points(5, 10, 28))

    def forward(self, z: Tensor, mu: Tensor) -> Tensor:
        return student_t(z, mu, self.alpha)

    @torch.jit.export
    def example_inputs(self) -> Tuple[Tensor, Tensor]:
        return self.ex


def student_t_at_degrees(z: Tensor, mu: Tensor) -> Tensor:
    return student_t(z, mu, DEGREES)


SOFTNESS = 2.0
DEGREES = 1.0
BANDWIDTH = 0.7


def gaussian_kernel_sum(x: Tensor, y: Tensor, s: float) -> Tensor:
    return torch.exp(-((x[:, None] - y[None]) ** 2).sum(-1) / s).sum(1)


class GaussianKernelSum(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.s = BANDWIDTH
        self.ex = (_points(30, 3, 18), _points(24, 3, 19))

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        return gaussian_kernel_sum(x, y, self.s)

    @torch.jit.export
    def example_inputs(self) -> Tuple[Tensor, Tensor]:
        return self.ex


def gaussian_kernel_sum_at_bandwidth(x: Tensor, y: Tensor) -> Tensor:
    return gaussian_kernel_sum(x, y, BANDWIDTH)


def kernel_regression(x: Tensor, xs: Tensor, ys: Tensor, h: float) -> Tensor:
    w = torch.exp(-((x[:, None, :] - xs[None, :, :]) ** 2).sum(-1) / h)
    return (w[:, :, None] * ys[None]).sum(1) / w.sum(1, keepdim=True)


def kernel_regression_at_bandwidth(x: Tensor, xs: Tensor, ys: Tensor) -> Tensor:
    return kernel_regression(x, xs, ys, BANDWIDTH)


class KernelRegression(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.h = BANDWIDTH
        self.ex = (_points(30, 3, 20), _points(24, 3, 21), _points(24, 2, 22))

    def forward(self, x: Tensor, xs: Tensor, ys: Tensor) -> Tensor:
        return kernel_regression(x, xs, ys, self.h)

    @torch.jit.export
    def example_inputs(self) -> Tuple[Tensor, Tensor, Tensor]:
        return self.ex


MODELS = {
    "nearest_neighbour": (NearestNeighbour, nearest_neighbour),
    "anchor_match": (AnchorMatch, anchor_match),
    "zero_guarded_iou": (ZeroGuardedIoU, zero_guarded_iou),
    "gaussian_lse": (GaussianLSE, gaussian_lse),
    "l2_distance": (L2Distance, l2_distance),
    "kernel_epilogue": (KernelEpilogue, kernel_epilogue),
    "kernel_product": (KernelProduct, kernel_product),
    "gaussian_mmd": (GaussianMMD, gaussian_mmd),
    "soft_quantize": (SoftQuantize, soft_quantize),
    "soft_assignment": (SoftAssignment, soft_assignment_at_softness),
    "student_t": (StudentT, student_t_at_degrees),
    "gaussian_kernel_sum": (GaussianKernelSum, gaussian_kernel_sum_at_bandwidth),
    "kernel_regression": (KernelRegression, kernel_regression_at_bandwidth),
}
