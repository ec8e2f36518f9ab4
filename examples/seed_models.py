"""The seed workloads as TorchScript modules, saved as .pt fixtures for optimize-ts.

    python examples/seed_models.py OUTDIR      # writes OUTDIR/{intersection,similarity,nothing_to_fuse}.pt

  Intersection    pairwise box intersection areas [N, M] (the IoU numerator from the TorchScript
                  memory write-up): chunk, transpose, min/max, subtraction, clamp, product.
                  forward calls the helper `intersection`, so the pipeline must inline a
                  prim::CallFunction before it can fuse.
  Similarity      (x[:, :, None] - y[:, None, :]).abs().lt(1).sum(dim=0): a broadcast [S, D, D]
                  intermediate reduced to an int64 [D, D] result.
  NothingToFuse   a single matmul: the negative path (no candidate, graph unchanged).

Intersection and Similarity export `example_inputs()` (small, deterministic inputs), which
`optimize-ts --check` uses to compare the original and the optimized module; NothingToFuse has none,
so its check needs `--input-shape a:8,16 --input-shape b:16,4`.

The fixtures are generated, never committed: tests and scripts/demo.sh call save_all().
"""
import pathlib
import sys
from typing import Tuple

import torch
from torch import Tensor


def intersection(boxes1: Tensor, boxes2: Tensor) -> Tensor:
    """Area of the overlap of every box of boxes1 [N, 4] with every box of boxes2 [M, 4] -> [N, M].

    Boxes are (x_min, y_min, x_max, y_max).
    """
    x_min1, y_min1, x_max1, y_max1 = boxes1.chunk(4, dim=1)
    x_min2, y_min2, x_max2, y_max2 = boxes2.chunk(4, dim=1)
    # height of the overlap
    all_pairs_min_ymax = torch.min(y_max1, y_max2.t())
    all_pairs_max_ymin = torch.max(y_min1, y_min2.t())
    intersect_heights = torch.clamp(all_pairs_min_ymax - all_pairs_max_ymin, min=0)
    # width of the overlap
    all_pairs_min_xmax = torch.min(x_max1, x_max2.t())
    all_pairs_max_xmin = torch.max(x_min1, x_min2.t())
    intersect_widths = torch.clamp(all_pairs_min_xmax - all_pairs_max_xmin, min=0)
    return intersect_heights * intersect_widths


def similarity(x: Tensor, y: Tensor) -> Tensor:
    """Counts, per pair of columns (i, j), the rows where |x[:, i] - y[:, j]| < 1 -> int64 [D, D]."""
    return (x[:, :, None] - y[:, None, :]).abs().lt(1).sum(dim=0)


def deterministic_boxes(n: int, phase: int) -> Tensor:
    """n valid boxes (x_min < x_max, y_min < y_max) from integer arithmetic: no RNG."""
    i = torch.arange(n, dtype=torch.int64) + phase
    x_min = ((i * 37) % 101).to(torch.float32)
    y_min = ((i * 53) % 97).to(torch.float32)
    w = ((i * 13) % 41 + 1).to(torch.float32) * 0.75
    h = ((i * 29) % 43 + 1).to(torch.float32) * 0.5
    return torch.stack([x_min, y_min, x_min + w, y_min + h], dim=1)


def random_boxes(n: int, generator: torch.Generator = None, dtype=torch.float32) -> Tensor:
    """n random valid boxes in [0, 100]^2 (for tests and benchmarks)."""
    xy = torch.rand(n, 2, generator=generator, dtype=dtype) * 100
    wh = torch.rand(n, 2, generator=generator, dtype=dtype) * 30 + 0.5
    return torch.cat([xy, xy + wh], dim=1)


class Intersection(torch.nn.Module):
    def __init__(self):
        super().__init__()
        # Plain tensor attributes (saved with the module, not buffers): example_inputs() then has
        # no arithmetic of its own for the pipeline to fuse, so the report counts only forward's.
        self.example_boxes1 = deterministic_boxes(64, 0)
        self.example_boxes2 = deterministic_boxes(16, 7)

    def forward(self, boxes1: Tensor, boxes2: Tensor) -> Tensor:
        return intersection(boxes1, boxes2)

    @torch.jit.export
    def example_inputs(self) -> Tuple[Tensor, Tensor]:
        return self.example_boxes1, self.example_boxes2


class Similarity(torch.nn.Module):
    def __init__(self):
        super().__init__()
        # values in [-2, 2], so that |x - y| < 1 is neither always nor never true
        self.example_x = torch.sin(torch.arange(32 * 24, dtype=torch.float32) * 0.37).reshape(32, 24) * 2
        self.example_y = torch.cos(torch.arange(32 * 24, dtype=torch.float32) * 0.61).reshape(32, 24) * 2

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        return (x[:, :, None] - y[:, None, :]).abs().lt(1).sum(dim=0)

    @torch.jit.export
    def example_inputs(self) -> Tuple[Tensor, Tensor]:
        return self.example_x, self.example_y


class NothingToFuse(torch.nn.Module):
    def forward(self, a: Tensor, b: Tensor) -> Tensor:
        return torch.matmul(a, b)


# name -> (module class, eager reference function)
MODELS = {
    "intersection": (Intersection, intersection),
    "similarity": (Similarity, similarity),
    "nothing_to_fuse": (NothingToFuse, torch.matmul),
}


def save_all(outdir) -> dict:
    """Scripts every seed module and saves it as <outdir>/<name>.pt; returns {name: path}."""
    outdir = pathlib.Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, (cls, _) in MODELS.items():
        path = outdir / f"{name}.pt"
        torch.jit.script(cls()).save(str(path))
        paths[name] = path
    return paths


def main(argv) -> int:
    if len(argv) != 2 or argv[1] in ("-h", "--help"):
        print(f"usage: {argv[0]} OUTDIR", file=sys.stderr)
        return 2
    for name, path in save_all(argv[1]).items():
        print(f"{name}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
