"""The first real-model corpus: public PyTorch library code that computes pairwise box, distance or
kernel matrices, plus torchvision models (a classifier, two detectors, an IoU matcher). ENTRIES is
it followed by the second corpus (fresh.py); tests/python/test_corpus.py and bench/corpus/bench.py
read ENTRIES alike. What an entry says: entry.py.
"""
from typing import List

import torch
from torch import Tensor

import fresh
from entry import (BOXES, EMB, LOWD, TOLERANCE, Entry, boxes_xyxy, export, gpytorch_kernel,  # noqa: F401
                   _points, image_inputs, inputs, is_fused_op, library_function, make)



def _softmin_inputs(size, g):
    n, m = (29, 23) if size == "test" else (2000, 2000)
    return torch.rand(1, n, m, generator=g) * 4, torch.randn(1, m, generator=g)


def _matcher_inputs(size, g):
    gt, anchors = (7, 300) if size == "test" else (20, 120000)
    return boxes_xyxy(gt, g), boxes_xyxy(anchors, g)


# --- callables wrapping library objects ---------------------------------------------------------

def _tv():
    import torchvision
    return torchvision


def _match_anchors():
    """The IoU matcher step of torchvision's two-stage detectors: box_iou(gt, anchors), then
    Matcher(0.7, 0.3, allow_low_quality_matches=True) as in Faster R-CNN's RPN."""
    from torchvision.models.detection._utils import Matcher
    from torchvision.ops import box_iou

    class MatchAnchors(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.matcher = Matcher(0.7, 0.3, allow_low_quality_matches=True)

        def forward(self, gt: Tensor, anchors: Tensor) -> Tensor:
            return self.matcher(box_iou(gt, anchors))
    return MatchAnchors()



def _detector(name: str, **kwargs):
    def make():
        torch.manual_seed(0)
        model = getattr(_tv().models.detection, name)(weights=None, weights_backbone=None, **kwargs)
        return model.eval()
    return make


def _classifier():
    torch.manual_seed(0)
    return _tv().models.resnet18(weights=None).eval()



def _kmeans_assign():
    """kmeans-pytorch's assignment step as its kmeans() loop runs it: the nearest centre of each
    point, torch.argmin(pairwise_distance(X, centres), dim=1)."""
    def make():
        from kmeans_pytorch import pairwise_distance

        def assign(x, centres):
            return torch.argmin(pairwise_distance(x, centres), dim=1)
        return assign
    return make


def _pml(cls: str, **kwargs):
    def make():
        import pytorch_metric_learning.distances as d
        return getattr(d, cls)(**kwargs)
    return make


# --- the corpus -------------------------------------------------------------------------------------

TV, TM, GP, PML, KO, GL, KM, MO = ("torchvision", "torchmetrics", "gpytorch", "pytorch-metric-learning",
                                   "kornia", "geomloss", "kmeans-pytorch", "monai")

# Why reordered reductions are allowed (broadcast intermediate removed) or not.
_BROADCAST_SUM = "float sum over the broadcast [N,M,D] axis (the [N,M,D] intermediate is never stored)"
_UPCAST = ("torchvision's _upcast(rb - lt), a prim::If on the dtype when scripted, becomes tsfuse::upcast "
           "(fold_upcast), an op of the region, so the [N,M,2] difference is never stored")

FIRST: List[Entry] = [
    # torchvision.ops box functions (scripted, as torchvision's own detectors script them)
    Entry("tv.box_iou", TV, library_function("torchvision.ops", "box_iou"), BOXES, "script", {"pairwise": 1},
          "the whole [N,M] IoU is one pairwise op; " + _UPCAST),
    Entry("tv.box_iou[traced]", TV, library_function("torchvision.ops", "box_iou"), BOXES, "trace", {"pairwise": 1},
          "traced, _upcast's branch is resolved: the whole [N,M] IoU is one pairwise op"),
    Entry("tv.generalized_box_iou", TV, library_function("torchvision.ops", "generalized_box_iou"), BOXES, "script",
          {"pairwise": 1}, "IoU and enclosing box: one pairwise op; " + _UPCAST + " (twice)"),
    Entry("tv.distance_box_iou", TV, library_function("torchvision.ops", "distance_box_iou"), BOXES, "script",
          {"pairwise": 1}, "IoU, enclosing diagonal and centre distances: one pairwise op; " + _UPCAST),
    Entry("tv.complete_box_iou", TV, library_function("torchvision.ops", "complete_box_iou"), BOXES, "script",
          {"pairwise": 1}, "as distance_box_iou; the atan aspect-ratio term joins the region"),
    Entry("tv.Matcher(box_iou)", TV, _match_anchors, _matcher_inputs, "script", {"pairwise": 2},
          "the IoU matrix is fused (as tv.box_iou); the matcher's max(dim=0) is not: the matrix is "
          "also read by torch.where(iou == best[:, None]) (low-quality matches), so it is stored anyway; "
          "(vals >= self.low_threshold) & (vals < self.high_threshold) is the second op (thresholds: "
          "module attributes, numbers read at run time)",
          kind="model"),
    Entry("tv.resnet18", TV, _classifier, image_inputs(64, 224), "script", {},
          "nothing to fuse: convolutions, batch norm, in-place relu_", kind="model"),
    Entry("tv.resnet18[traced]", TV, _classifier, image_inputs(64, 224), "trace", {}, "nothing to fuse", kind="model"),
    Entry("tv.ssdlite320_mobilenet_v3_large", TV,
          _detector("ssdlite320_mobilenet_v3_large", score_thresh=0.001), image_inputs(160, 320, batch=False), "script",
          {"pairwise": 28}, "box decoding (exp * size, centre +- half size; the box coder's weights and "
          "clip are module attributes, numbers read at run time) and the training-only "
          "encode fuse as small [N,4] pairwise ops, and so do the regions over tensors written in "
          "place before them (boxes clamped, images normalized in place: only a write between a "
          "region's reads blocks it); the matched IoU is stored for the matcher. At load time the "
          "same regions fuse; the executor unrolls the anchor generator's loop over the images, "
          "so its graph holds two copies of that loop's two regions",
          fused_loadtime={"pairwise": 30},
          needs_torchvision_ops=True, kind="model"),
    Entry("tv.retinanet_resnet50_fpn", TV,
          _detector("retinanet_resnet50_fpn", score_thresh=0.001, min_size=256, max_size=256),
          image_inputs(128, 256, batch=False), "script", {"pairwise": 41, "reduce": 4},
          "as ssdlite; the reduces are in the training-only losses (not run in eval). At load "
          "time the executor also unrolls _sum's loop over the losses by 8, and the 8 adds of "
          "its body are one more region (training only)",
          fused_loadtime={"pairwise": 43, "reduce": 4},
          loadtime_extra=("torchvision/models/detection/retinanet.py:37:14",),
          needs_torchvision_ops=True, kind="model"),
    # torchmetrics.functional.pairwise (Literal/Optional arguments: traced)
    Entry("tm.pairwise_euclidean_distance", TM, library_function("torchmetrics.functional.pairwise", "pairwise_euclidean_distance"),
          EMB, "trace", {"reduce": 2},
          "matmul expansion in float64: x_norm + y_norm - 2 x@y.T, then .to(float32).sqrt()"),
    Entry("tm.pairwise_cosine_similarity", TM, library_function("torchmetrics.functional.pairwise", "pairwise_cosine_similarity"),
          EMB, "trace", {}, "torch.norm, divide, matmul: no elementwise region over a broadcast"),
    Entry("tm.pairwise_manhattan_distance", TM, library_function("torchmetrics.functional.pairwise", "pairwise_manhattan_distance"),
          EMB, "trace", {"reduce": 1},
          "|x.unsqueeze(1) - y.unsqueeze(0).repeat(N, 1, 1)|.sum(-1): sub/abs/sum fuse, the repeat is "
          "not a broadcast to tsfuse and still materializes [N,M,D]",
          reorders=_BROADCAST_SUM),
    Entry("tm.pairwise_minkowski_distance", TM, library_function("torchmetrics.functional.pairwise", "pairwise_minkowski_distance",
                                                    exponent=3), EMB, "trace", {"reduce": 1},
          "float64 |x - y|^3 summed over D is one reduce (equal to eager here); ^(1/3) and the cast follow",
          reorders=_BROADCAST_SUM),
    Entry("tm.pairwise_linear_similarity", TM, library_function("torchmetrics.functional.pairwise", "pairwise_linear_similarity"),
          EMB, "trace", {}, "a matmul only"),
    # gpytorch kernels (LinearOperator outputs, custom autograd Functions: traced in trace_mode)
    Entry("gp.RBFKernel", GP, gpytorch_kernel(lambda k: k.RBFKernel()), LOWD, "trace",
          {"reduce": 2, "pairwise": 2},
          "sq_dist is a matmul of cat([-2x, |x|^2, 1]); the mean-centring fuses as a pairwise op, the "
          "in-place tail over the matmul's output (clamp_min_, div_, exp_) as another, written over it"),
    Entry("gp.MaternKernel(2.5)", GP, gpytorch_kernel(lambda k: k.MaternKernel(nu=2.5)), LOWD, "trace",
          {"pairwise": 3}, "distance is torch.cdist; (x - mean) / lengthscale and the Matern "
          "polynomial * exp over the stored [N,M] distance fuse as elementwise ops (exact)"),
    Entry("gp.PeriodicKernel", GP, gpytorch_kernel(lambda k: k.PeriodicKernel()), LOWD, "trace",
          {"reduce": 1},
          "per-dimension torch.cdist [D,N,M]; clamp/sin/pow/div/mul summed over D then exp is one reduce; "
          "x / (period / pi), computed twice, is one div after CSE (the executor's, and canonicalize's)"),
    Entry("gp.RQKernel", GP, gpytorch_kernel(lambda k: k.RQKernel()), LOWD, "trace",
          {"reduce": 2, "pairwise": 2}, "matmul-expanded squared distance, then (1 + d/(2a))^-a "
          "(one pairwise op over the distance clamped in place before it)"),
    Entry("gp.SpectralMixtureKernel", GP,
          gpytorch_kernel(lambda k: k.SpectralMixtureKernel(num_mixtures=4, ard_num_dims=3)),
          _points((41, 29, 3), (2000, 1500, 3)), "trace", {"reduce_chain": 1},
          "exp(-2 pi^2 (x s - y s)^2) * cos(2 pi (x m - y m)) per mixture over [K, N, M, D], weighted, summed over "
          "the K mixtures (the outermost dim) then multiplied over the D dims: one reduce_chain, the [N, M, D] sums "
          "slab by slab; the tiles of the sums run along M (exp and cos are eager's routines between compiled "
          "runs), not along the 3 dims"),
    # pytorch-metric-learning distances (module calls with stats bookkeeping: traced)
    Entry("pml.LpDistance", PML, _pml("LpDistance"), EMB, "trace", {},
          "F.normalize then torch.cdist: no elementwise region over a broadcast"),
    Entry("pml.LpDistance(p=1)", PML, _pml("LpDistance", p=1, normalize_embeddings=False), EMB, "trace", {},
          "torch.cdist(p=1)"),
    Entry("pml.CosineSimilarity", PML, _pml("CosineSimilarity"), EMB, "trace", {}, "F.normalize then matmul"),
    Entry("pml.SNRDistance", PML, _pml("SNRDistance", normalize_embeddings=False), EMB, "trace", {"reduce": 1},
          "torch.var over the broadcast [N,M,D] difference is one reduce (the / var(x) tail stays ATen's)",
          reorders="var folds with Welford in double like eager, which may split the reduced space "
                   "between threads elsewhere"),
    # kornia (scriptable by design)
    Entry("kornia.mean_iou_bbox", KO, library_function("kornia.metrics", "mean_iou_bbox"), BOXES, "script",
          {"reduce": 4, "pairwise": 1},
          "the [N,M] IoU is one pairwise op; the four box checks ((x2 - x1) > 0).all() are bool "
          "reductions (exact)", check_runs=1),
    Entry("kornia.match_mnn", KO, library_function("kornia.feature", "match_mnn"), EMB, "script", {"reduce": 2, "pairwise": 1},
          "scripted, kornia's _cdist takes its matmul-expansion path (torch.cdist is for eager): the row "
          "norms fuse as reduces; the clamp and the where/sqrt tail, with its ones_like/zeros_like guards "
          "(shape-only readers: full_like), are one pairwise op; the min over each "
          "axis reads the stored [N,M] matrix (traced, the data-dependent early returns would be baked in)"),
    # geomloss (the tensorized backend, use_keops=False)
    Entry("geomloss.squared_distances", GL, library_function("geomloss._legacy.utils", "squared_distances"), LOWD, "trace",
          {"reduce": 2, "pairwise": 1}, "D_xx - 2 D_xy + D_yy around a matmul"),
    Entry("geomloss.gaussian_kernel", GL, library_function("geomloss._legacy.kernel_samples", "gaussian_kernel", blur=0.5), LOWD,
          "trace", {"reduce": 2, "pairwise": 1}, "matmul-expanded distance, then exp(-C/2) in the tail"),
    Entry("geomloss.laplacian_kernel", GL, library_function("geomloss._legacy.kernel_samples", "laplacian_kernel", blur=0.5),
          LOWD, "trace", {"reduce": 2, "pairwise": 1}, "matmul-expanded distance, clamp, sqrt, exp"),
    Entry("geomloss.energy_kernel", GL, library_function("geomloss._legacy.kernel_samples", "energy_kernel"), LOWD, "trace",
          {"reduce": 2, "pairwise": 1}, "-sqrt(clamp(matmul-expanded distance))"),
    Entry("geomloss.softmin_tensorized", GL, library_function("geomloss._legacy.sinkhorn_samples", "softmin_tensorized", 0.1),
          _softmin_inputs, "trace", {"reduce": 1}, "(h_y[:, None, :] - C / eps).logsumexp(2) is one reduce"),
    # kmeans-pytorch (plain broadcasting; a torch.device default argument: traced)
    Entry("kmeans.pairwise_distance", KM, library_function("kmeans_pytorch", "pairwise_distance"), EMB, "trace", {"reduce": 1},
          "((A - B) ** 2).sum(-1) over the broadcast [N,M,D] is one reduce", reorders=_BROADCAST_SUM),
    Entry("kmeans.assign", KM, _kmeans_assign(), EMB, "trace", {"reduce_chain": 1},
          "kmeans()'s assignment step: the sum over D and, after the traced .squeeze(), the argmin over the "
          "centres are one reduce_chain (nest_reductions): the [N,M] distances are never stored, only a "
          "slab of them at a time",
          reorders="the argmin reads distances summed over D in another order than ATen's; an index can "
                   "differ from eager's only where two distances tie within that rounding"),
    Entry("kmeans.pairwise_cosine", KM, library_function("kmeans_pytorch", "pairwise_cosine"), EMB, "trace", {"reduce": 1},
          "per-row norms stay ATen's; (A/|A| * B/|B|).sum(-1) over [N,M,D] is one reduce",
          reorders=_BROADCAST_SUM),
    # monai box utilities (numpy-or-tensor code with data-dependent checks: traced)
    Entry("monai.box_iou", MO, library_function("monai.data.box_utils", "box_iou"), BOXES, "trace", {"pairwise": 2, "reduce": 1},
          "corner max/min, then torch.prod over [N,M,2] (a 2-element product: exact) with the union and the IoU "
          "as its epilogue (the union reads the intersection twice); the two pairwise ops are the [N,1] and "
          "[M] areas"),
    Entry("monai.box_giou", MO, library_function("monai.data.box_utils", "box_giou"), BOXES, "trace",
          {"pairwise": 2, "reduce_chain": 1},
          "as monai.box_iou plus the enclosing box's prod; the enclosure's prod over the corners is stage 0 of "
          "a chain whose fused stage, the intersection's prod, reads it in the epilogue computing the GIoU: no "
          "[N,M] value stored between them"),
]

ENTRIES: List[Entry] = FIRST + fresh.ENTRIES
BY_NAME = {e.name: e for e in ENTRIES}
LIBRARIES = sorted({e.library for e in ENTRIES})
