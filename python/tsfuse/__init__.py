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
    iou, _ = tsfuse.optimize(box_iou)  # a @torch.jit.script function: an optimized copy of it

The console script ``optimize-ts`` is the command-line tool (docs/optimize-ts.md).
"""
import contextlib
import io
import json
import pathlib
from typing import Iterable, NamedTuple, Tuple, Union

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


_Scripted = Union[torch.jit.ScriptModule, torch.jit.ScriptFunction]


class Optimized(NamedTuple):
    """``module``: the optimized copy, a ScriptModule or a ScriptFunction as was passed in."""

    module: _Scripted
    report: Report


def _check(scripted) -> None:
    if isinstance(scripted, (torch.jit.ScriptModule, torch.jit.ScriptFunction)):
        return
    got, hint = type(scripted).__name__, ""
    if isinstance(scripted, (torch._C.ScriptMethod, _first_call._FirstCall)):
        got, hint = "ScriptMethod", " (pass the scripted module it belongs to)"
    elif callable(scripted):
        hint = f" (script it first: torch.jit.script({'module' if isinstance(scripted, torch.nn.Module) else 'fn'}))"
    raise TypeError(f"tsfuse expects a ScriptModule (torch.jit.script, trace or load) or a ScriptFunction "
                    f"(torch.jit.script of a function), got {got}{hint}")


def _copy(module: torch.jit.ScriptModule) -> torch.jit.ScriptModule:
    # A saved and reloaded copy: its own class types and graphs, as optimize-ts loads a file, so
    # the caller's module (and every other instance of its classes) is left as it was.
    return torch.jit.load(io.BytesIO(module.save_to_buffer()))


def _function_copy(fn: torch.jit.ScriptFunction) -> Tuple[torch.jit.ScriptModule, torch._C.CompilationUnit]:
    # ScriptFunction.save_to_buffer writes a module whose forward is the function (its callees
    # beside it); loaded into a compilation unit of our own (torch.jit.load's own steps), whose
    # functions, the callees included, are copies: the caller's function is left as it was.
    cu = torch._C.CompilationUnit()
    cpp = torch._C.import_ir_module_from_buffer(cu, fn.save_to_buffer(), None, {}, False)
    return torch.jit._recursive.wrap_cpp_module(cpp), cu


def _as_function(wrapper: torch.jit.ScriptModule, cu: torch._C.CompilationUnit,
                 fn: torch.jit.ScriptFunction) -> torch.jit.ScriptFunction:
    # The wrapper's optimized forward without its `self` (a function's body never reads it), as a
    # function of `cu` with the original's schema (the wrapper's lost the defaults): the unit owns
    # any callee the graph still calls, and the returned function keeps the unit alive.
    name = torch.ops.tsfuse.function_from_forward(wrapper, fn.qualified_name, str(fn.schema))
    return cu.find_function(name)


def _run(scripted, disable: Iterable[str], view: str, function=None):
    name = function if function is not None else getattr(scripted, "original_name", type(scripted).__name__)
    text, report = torch.ops.tsfuse.optimize_module(scripted, name, list(disable), view, function)
    return text, json.loads(report)


def optimize(module: _Scripted, disable: Iterable[str] = (), verbose: bool = False) -> Optimized:
    """Returns an optimized copy of a scripted or traced module, or of a scripted function, and the
    report of what was fused.

    The same pipeline as ``optimize-ts``: every method of a module, calls inlined (scripted
    functions a method calls included). A ``torch.jit.ScriptFunction`` gives a new
    ScriptFunction of the same name and signature, called like the original (and from other
    scripted code), its graph optimized. ``disable`` skips passes by name
    (``optimize-ts --list-passes``); ``verbose`` lists every event in the report's text. What is
    passed in is not changed.
    """
    _check(module)
    view = "verbose" if verbose else "summary"
    if isinstance(module, torch.jit.ScriptFunction):
        wrapper, cu = _function_copy(module)
        text, data = _run(wrapper, disable, view, module.name)
        return Optimized(_as_function(wrapper, cu, module), Report(text, data))
    copy = _copy(module)
    text, data = _run(copy, disable, view)
    return Optimized(copy, Report(text, data))


def explain(module: _Scripted, disable: Iterable[str] = ()) -> str:
    """``optimize-ts --explain``'s text for this module or scripted function: per method (or for
    the function), what would be fused (nodes, source lines, expression) and why each rejected
    candidate is not. Changes nothing."""
    _check(module)
    if isinstance(module, torch.jit.ScriptFunction):
        text, _ = _run(_function_copy(module)[0], disable, "explain", module.name)
    else:
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
