"""What a corpus entry is, the inputs the entries share, and how an entry becomes the scripted or
traced module a user would save. The entries themselves: entries.py (the first corpus) and
fresh.py (the second, of libraries the first does not use).

Every entry imports the library's own function or module (never a copy); the libraries are pinned
in tests/python/pypi_deps.py (CORPUS_PACKAGES, TORCHVISION_FOR_TORCH) and installed from PyPI into
BUILD/test-deps/, which must be on sys.path before make() is called.

An entry says:
  make()            -> the eager callable (function or nn.Module in eval mode, fixed weights)
  inputs(size, g)   -> the positional inputs, size "test" (small, for ctest) or "bench" (realistic)
  mode              -> "script" (torch.jit.script) or "trace" (torch.jit.trace, where the code
                       does not script: Literal/Optional arguments, LinearOperator, stats
                       bookkeeping, numpy-or-tensor paths)
  fused             -> the fused tsfuse ops (not the helpers the passes insert: is_fused_op) in the
                       optimize-ts output today, e.g. {"pairwise": 1}; the test asserts it, so a
                       change shows up. fused_loadtime: the same for the executor's pre-pass,
                       where it differs: the executor unrolls loops, copying their regions (the
                       test asserts both graphs hold the same distinct regions) or, in a body
                       unrolled into a run of elementwise ops, making a new one: loadtime_extra
                       lists the source line of each such region
  note              -> what fuses and what does not, and why (docs/corpus.md prints it)
  reorders          -> None when the fused outputs are bit-identical to eager's; else why they
                       may differ within TOLERANCE: a fused float reduction sums in another order
                       than ATen, allowed where it removes a broadcast intermediate
  check_runs        -> optimize-ts --check=N (1 where the function validates its inputs, which
                       --check's random later runs would fail)
  aten_on_tiles     -> None when every fused program runs compiled code with no ATen op called on
                       a tile (the test asserts it through torch.ops.tsfuse.path_counts()); else
                       which op still does, and why
  interpreted       -> None when no tile is evaluated whole by the tile interpreter; else which
                       program is, and why
"""
import dataclasses
import pathlib
import sys
from typing import Callable, Dict, List, Optional, Tuple

import torch
from torch import Tensor

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "examples"))
import detection_models  # noqa: E402  (with_example_inputs: the module optimize-ts --check runs)

# rtol, atol for outputs of a reordered float reduction (optimize-ts --check's defaults).
TOLERANCE = (1e-5, 1e-6)


@dataclasses.dataclass(frozen=True)
class Entry:
    name: str
    library: str
    make: Callable[[], Callable]
    inputs: Callable[[str, torch.Generator], Tuple[Tensor, ...]]
    mode: str
    fused: Dict[str, int]
    note: str
    reorders: Optional[str] = None
    fused_loadtime: Optional[Dict[str, int]] = None
    loadtime_extra: Tuple[str, ...] = ()
    needs_torchvision_ops: bool = False  # the scripted graph calls torchvision:: C++ ops
    kind: str = "function"               # "function" or "model"
    check_runs: int = 2
    aten_on_tiles: Optional[str] = None
    interpreted: Optional[str] = None
    corpus: str = "first"                # "first" (entries.py) or "second" (fresh.py)


# --- inputs ------------------------------------------------------------------------------------

def is_fused_op(kind: str) -> bool:
    """Whether tsfuse::<kind> is a fused op, not a helper a pass inserts: sink_views' view helpers
    (broadcast_*), fold_upcast's tsfuse::upcast (a dtype cast standing for torchvision's _upcast),
    tsfuse::shape_of (a stand-in for a fused value's metadata readers), tsfuse::wrapped_number
    (a Python number known at run time, as an operand), tsfuse::full_slice (the checks of a `:`
    over a whole dim), sink_reshapes' tsfuse::check_reshape (a moved reshape's size check),
    canonicalize's tsfuse::extremum_values and native_extrema's tsfuse::extremum/arg_extremum
    (max/min(dim), argmax/argmin(dim) left unfused, run by the fused kernels where ATen's are slow) and
    snapshot_written_operands' tsfuse::saved_operand (an operand written later, copied for a
    backward) and decompose's tsfuse::product_sums (the run-time guard between a decomposed matmul
    and the matmul) are not counted."""
    return not kind.startswith("broadcast_") and kind not in ("upcast", "shape_of", "wrapped_number", "full_slice",
                                                              "check_reshape", "extremum_values", "extremum",
                                                              "arg_extremum", "saved_operand", "product_sums")


def boxes_xyxy(n: int, g: torch.Generator, scale: float = 512.0) -> Tensor:
    xy = torch.rand(n, 2, generator=g) * scale
    wh = torch.rand(n, 2, generator=g) * scale / 8 + 1.0
    return torch.cat([xy, xy + wh], dim=1)


def _boxes(test: Tuple[int, int], bench: Tuple[int, int]):
    def make(size, g):
        n, m = test if size == "test" else bench
        return boxes_xyxy(n, g), boxes_xyxy(m, g)
    return make


def _points(test: Tuple[int, int, int], bench: Tuple[int, int, int]):
    def make(size, g):
        n, m, d = test if size == "test" else bench
        return torch.randn(n, d, generator=g), torch.randn(m, d, generator=g)
    return make


def image_inputs(test: int, bench: int, batch: bool = True):
    def make(size, g):
        s = test if size == "test" else bench
        x = torch.rand(3, s, s, generator=g)
        return (x[None] if batch else x,)
    return make


EMB = _points((37, 23, 16), (1024, 1024, 64))    # embeddings: [N, D] x [M, D]
LOWD = _points((41, 29, 3), (2000, 2000, 8))     # low-dimensional GP / point inputs
BOXES = _boxes((37, 23), (20000, 500))           # anchors x ground truth (or detections)


class Detections(torch.nn.Module):
    """A torchvision detector on one image, returning (boxes, scores, labels): eager detection
    models return a list of dicts."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, image: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        d = self.model([image])[0]
        return d["boxes"], d["scores"], d["labels"]


class ScriptedDetections(Detections):
    """Scripted detection models return (losses, detections) instead."""

    def forward(self, image: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        d = self.model([image])[1][0]
        return d["boxes"], d["scores"], d["labels"]



def gpytorch_kernel(factory, module: str = "gpytorch.kernels"):
    """A gpytorch kernel's forward(x1, x2) as a dense tensor (`factory(module)` makes the kernel, of
    gpytorch or a library built on it). gpytorch.settings.trace_mode is on while tracing, so the
    kernel takes its plain-tensor path instead of a custom autograd.Function; a kernel whose
    forward sums sub-kernels still returns a LinearOperator, made dense as its users do."""
    def make():
        import importlib

        import gpytorch
        torch.manual_seed(0)
        kernel = factory(importlib.import_module(module)).eval()

        class Kernel(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.kernel = kernel

            def forward(self, x1, x2):
                with gpytorch.settings.trace_mode(True):
                    k = self.kernel.forward(x1, x2)
                    return k if torch.is_tensor(k) else k.to_dense()
        return Kernel()
    return make


def library_function(module: str, attr: str, *leading, **kwargs):
    """The library function `module.attr`, with leading and keyword arguments bound (traced, they
    are constants)."""
    def make():
        import importlib
        fn = getattr(importlib.import_module(module), attr)
        if not kwargs and not leading:
            return fn

        def bound(*args):
            return fn(*leading, *args, **kwargs)
        bound.__name__ = attr
        return bound
    return make




# --- exporting ---------------------------------------------------------------------------------------

def make(entry: Entry) -> Callable:
    """The eager callable: the library function, or the module (detectors wrapped in Detections)."""
    fn = entry.make()
    return Detections(fn) if entry.needs_torchvision_ops else fn


def export(entry: Entry, fn: Callable, inputs: Tuple[Tensor, ...]) -> torch.jit.ScriptModule:
    """The TorchScript module a user would save from make()'s `fn`: forward calls the scripted (or
    traced) library code; example_inputs() returns `inputs`, so optimize-ts --check needs no
    --input-shape."""
    if entry.mode == "script":
        inner = torch.jit.script(ScriptedDetections(fn.model) if isinstance(fn, Detections) else fn)
    else:
        with torch.no_grad():
            module = fn if isinstance(fn, torch.nn.Module) else detection_models.CallFunction(fn)
            inner = torch.jit.trace(module, inputs, check_trace=False)
    return detection_models.with_example_inputs(inner, inputs)


def inputs(entry: Entry, size: str, seed: int = 0) -> Tuple[Tensor, ...]:
    return entry.inputs(size, torch.Generator().manual_seed(seed))
