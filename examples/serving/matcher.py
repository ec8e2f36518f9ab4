"""The model the serving example serves: a detector's anchor matcher, as torchvision's Matcher does
it. For every anchor of a fixed grid, the ground-truth box of highest IoU and that IoU, the match
-1 where the IoU is below the threshold.

Eager (and plain TorchScript) stores the [G, A] IoU matrix and its [G, A, 2] corner tensors; for the
bench's 150k anchors and 50 boxes that is several hundred MB per request. tsfuse fuses the IoU, the
max over G and the threshold into one `tsfuse::reduce_with_indices`, which stores only the outputs.

    python examples/serving/matcher.py OUTDIR [--anchors-stride S]
        writes OUTDIR/matcher.pt (scripted) and OUTDIR/matcher.opt.pt (tsfuse.optimize'd)
"""
import argparse
import pathlib
import sys
from typing import Tuple

import torch
from torch import Tensor

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from detection_models import box_iou  # noqa: E402  (torchvision's box_iou, as the library writes it)

IMAGE = (800, 1333)  # height, width


def anchor_grid(stride: int = 8, image: Tuple[int, int] = IMAGE) -> Tensor:
    """RetinaNet-style anchors: 3 sizes x 3 aspect ratios centred on every `stride`-th pixel."""
    h, w = image
    ys = (torch.arange(0, h, stride, dtype=torch.float32) + stride / 2)
    xs = (torch.arange(0, w, stride, dtype=torch.float32) + stride / 2)
    cy, cx = torch.meshgrid(ys, xs, indexing="ij")
    shapes = []
    for size in (4 * stride, 5 * stride, 6.35 * stride):
        for ratio in (0.5, 1.0, 2.0):
            shapes.append((size * ratio ** 0.5, size / ratio ** 0.5))
    wh = torch.tensor(shapes)  # [9, 2]
    centres = torch.stack([cx.flatten(), cy.flatten()], dim=1)  # [P, 2]
    half = wh[None] / 2
    return torch.cat([centres[:, None] - half, centres[:, None] + half], dim=2).reshape(-1, 4)


def random_gt(n: int, seed: int, image: Tuple[int, int] = IMAGE) -> Tensor:
    """n ground-truth boxes inside the image."""
    g = torch.Generator().manual_seed(seed)
    h, w = image
    xy = torch.rand(n, 2, generator=g) * torch.tensor([w * 0.9, h * 0.9])
    wh = torch.rand(n, 2, generator=g) * torch.tensor([w * 0.3, h * 0.3]) + 8
    return torch.cat([xy, torch.minimum(xy + wh, torch.tensor([float(w), float(h)]))], dim=1)


class AnchorMatcher(torch.nn.Module):
    def __init__(self, anchors: Tensor, threshold: float = 0.4):
        super().__init__()
        self.register_buffer("anchors", anchors)
        self.threshold = threshold

    def forward(self, gt: Tensor) -> Tuple[Tensor, Tensor]:
        quality = box_iou(gt, self.anchors)  # [G, A]
        matched_vals, matches = quality.max(dim=0)
        matches = torch.where(matched_vals < self.threshold, torch.full_like(matches, -1), matches)
        return matched_vals, matches


def reference(anchors: Tensor, gt: Tensor, threshold: float = 0.4) -> Tuple[Tensor, Tensor]:
    """Eager PyTorch: what every response must equal."""
    with torch.no_grad():
        return AnchorMatcher(anchors, threshold)(gt)


def build(out_dir: pathlib.Path, stride: int = 8) -> Tuple[pathlib.Path, pathlib.Path]:
    """Writes the scripted model and its tsfuse.optimize'd copy; returns both paths."""
    import tsfuse

    out_dir.mkdir(parents=True, exist_ok=True)
    scripted = torch.jit.script(AnchorMatcher(anchor_grid(stride)))
    plain, fused = out_dir / "matcher.pt", out_dir / "matcher.opt.pt"
    scripted.save(str(plain))
    optimized, report = tsfuse.optimize(scripted)
    if report.rewrites < 1:
        raise RuntimeError(f"nothing fused in the matcher:\n{report.text}")
    optimized.save(str(fused))
    return plain, fused


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", type=pathlib.Path)
    parser.add_argument("--anchors-stride", type=int, default=8)
    args = parser.parse_args()
    for path in build(args.out_dir, args.anchors_stride):
        print(path)
