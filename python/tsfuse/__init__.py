"""tsfuse: fuses broadcast elementwise and broadcast-then-reduce subgraphs of TorchScript models.

``import tsfuse`` loads libtsfuse once: it registers the fused ops (``torch.ops.tsfuse.*``) and the
graph-executor pass, so every TorchScript model this process runs is optimized from its first
call, while a scripted module's method whose first call stores no broadcast intermediate to fuse
keeps PyTorch's own first call (switches: ``TSFUSE_DISABLE=1`` and the others of
docs/registration.md, or :func:`enabled`). Explicitly:

    optimized, report = tsfuse.optimize(torch.jit.script(model))
    print(report)                    # what was fused, and why the rest was not
    optimized.save("model.opt.pt")   # loads wherever libtsfuse is loaded (import tsfuse)
    print(tsfuse.explain(scripted))  # `optimize-ts --explain`'s text

The console script ``optimize-ts`` is the command-line tool (docs/optimize-ts.md).
"""
import contextlib
import io
import json
import pathlib
from typing import Iterable, NamedTuple

import torch

from . import _build, _first_call

__version__ = _build.VERSION
__all__ = ["optimize", "explain", "enabled", "is_enabled", "Report", "Optimized", "library_path"]

_LIB_DIR = pathlib.Path(__file__).resolve().parent / "lib"


def _check_torch(built: str, running: str) -> None:
    """Raises ImportError unless the running torch is the one tsfuse was built against."""
    if built != running:
        raise ImportError(
            f"tsfuse {__version__} was built against torch {built}, but torch {running} is running: "
            f"its C++ library only works with the torch it was compiled for. Rebuild it for this torch "
            f"(from the tsfuse source: pip install --no-build-isolation --force-reinstall .)")


_check_torch(_build.TORCH_VERSION, torch.__version__)


def library_path() -> pathlib.Path:
    """libtsfuse.so of this package (for torch.ops.load_library elsewhere, or a C++ app)."""
    return _LIB_DIR / "libtsfuse.so"


# Once per process (Python imports a module once). A libtsfuse loaded from elsewhere before
# (torch.ops.load_library("build/lib/libtsfuse.so")) already owns the tsfuse op namespace.
_other = sorted(p for p in torch.ops.loaded_libraries
                if pathlib.Path(p).name == "libtsfuse.so" and pathlib.Path(p).resolve() != library_path())
if _other:
    raise ImportError(f"libtsfuse is already loaded from {_other[0]}; import tsfuse loads its own "
                      f"({library_path()}): use one or the other in a process")
torch.ops.load_library(str(library_path()))
# optimize-ts's run and reports as an op (tools/tool_ops.cpp); it links the libtsfuse above.
torch.ops.load_library(str(_LIB_DIR / "libtsfuse_tool.so"))
# A scripted module's method whose first call stores no broadcast intermediate keeps PyTorch's
# profiled first call (_first_call.py says how, registration/first_call.h why).
_first_call.install()


class Report(NamedTuple):
    """What the pipeline did: ``text`` is optimize-ts's summary, ``data`` its --report JSON."""

    text: str
    data: dict

    @property
    def rewrites(self) -> int:
        return sum(p["rewrites"] for p in self.data["passes"])

    def __str__(self) -> str:
        return self.text


class Optimized(NamedTuple):
    module: torch.jit.ScriptModule
    report: Report


def _name(module) -> str:
    return getattr(module, "original_name", type(module).__name__)


def _copy(module: torch.jit.ScriptModule) -> torch.jit.ScriptModule:
    # A saved and reloaded copy: its own class types and graphs, as optimize-ts loads a file, so
    # the caller's module (and every other instance of its classes) is left as it was.
    if not isinstance(module, torch.jit.ScriptModule):
        raise TypeError(f"tsfuse expects a ScriptModule (torch.jit.script, trace or load), got {type(module).__name__}")
    return torch.jit.load(io.BytesIO(module.save_to_buffer()))


def _run(module, disable: Iterable[str], view: str):
    text, report = torch.ops.tsfuse.optimize_module(module, _name(module), list(disable), view)
    return text, json.loads(report)


def optimize(module: torch.jit.ScriptModule, disable: Iterable[str] = (), verbose: bool = False) -> Optimized:
    """Returns an optimized copy of a scripted or traced module, and the report of what was fused.

    The same pipeline as ``optimize-ts``: every method, calls inlined. ``disable`` skips passes
    by name (``optimize-ts --list-passes``); ``verbose`` lists every event in the report's text.
    The module passed in is not changed.
    """
    copy = _copy(module)
    text, data = _run(copy, disable, "verbose" if verbose else "summary")
    return Optimized(copy, Report(text, data))


def explain(module: torch.jit.ScriptModule, disable: Iterable[str] = ()) -> str:
    """``optimize-ts --explain``'s text for this module: per method, what would be fused (nodes,
    source lines, expression) and why each rejected candidate is not. Changes nothing."""
    text, _ = _run(_copy(module), disable, "explain")
    return text


def is_enabled() -> bool:
    """Whether the graph-executor pass is on (it is after import, unless TSFUSE_DISABLE=1 kept it
    from registering at all)."""
    return torch.ops.tsfuse.is_enabled()


@contextlib.contextmanager
def enabled(on: bool = True):
    """Switches the graph-executor pass on or off for the block, then restores it.

    Process-wide (every thread), and read when the executor optimizes a graph: a model first run
    inside ``with tsfuse.enabled(False):`` keeps its unfused plan afterwards, and one already run
    keeps its fused plan. :func:`optimize` and :func:`explain` do not depend on it.
    """
    previous = torch.ops.tsfuse.set_enabled(bool(on))
    try:
        yield
    finally:
        torch.ops.tsfuse.set_enabled(previous)
