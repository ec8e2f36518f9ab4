"""Models that need torchvision, saved for the optimize-ts tests: run as
`python torchvision_models.py OUTDIR` with torchvision importable (tests/python/pypi_deps.py)."""
import pathlib
import sys
from typing import Tuple

import torch
import torchvision
from torch import Tensor


def random_boxes(n: int, g: torch.Generator) -> Tensor:
    xy = torch.rand(n, 2, generator=g) * 100
    return torch.cat([xy, xy + 1 + torch.rand(n, 2, generator=g) * 30], 1)


class NmsThenIou(torch.nn.Module):
    """Calls torchvision's C++ op (torchvision::nms, defined by torchvision/_C.so) and
    torchvision.ops.box_iou, whose [N, M] elementwise body fuses into tsfuse::pairwise."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.example_boxes = random_boxes(64, g)
        self.example_scores = torch.rand(64, generator=g)
        self.example_anchors = random_boxes(16, g)

    def forward(self, boxes: Tensor, scores: Tensor, anchors: Tensor) -> Tuple[Tensor, Tensor]:
        keep = torchvision.ops.nms(boxes, scores, 0.5)
        return keep, torchvision.ops.box_iou(boxes[keep], anchors)

    @torch.jit.export
    def example_inputs(self) -> Tuple[Tensor, Tensor, Tensor]:
        return self.example_boxes, self.example_scores, self.example_anchors


class MatchProposals(torch.nn.Module):
    """The ROI heads' proposal matching of torchvision's two-stage detectors, as shipped:
    Matcher(0.5, 0.5, allow_low_quality_matches=False) over box_iou(gt, proposals). Frozen for
    deployment (torch.jit.freeze), so the thresholds and the low-quality flag are constants: the
    IoU, its max over the ground truth, both threshold writes and the `numel() == 0` check become
    one fused op."""

    def __init__(self):
        super().__init__()
        from torchvision.models.detection._utils import Matcher
        self.matcher = Matcher(0.5, 0.4, allow_low_quality_matches=False)

    def forward(self, gt: Tensor, proposals: Tensor) -> Tensor:
        return self.matcher(torchvision.ops.box_iou(gt, proposals))


def main(outdir: pathlib.Path):
    outdir.mkdir(parents=True, exist_ok=True)
    torch.jit.script(NmsThenIou()).save(str(outdir / "nms_iou.pt"))
    torch.jit.script(torchvision.models.resnet50(weights=None).eval()).save(str(outdir / "resnet50.pt"))
    torch.jit.freeze(torch.jit.script(MatchProposals().eval())).save(str(outdir / "matcher.pt"))


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]))
