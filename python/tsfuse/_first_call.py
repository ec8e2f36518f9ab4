"""First-call mode per method, for Python's calls of scripted modules.

Loading libtsfuse sets the executor's profiled-run count to 0, so that a fusible model is fused
on its first call (the call that runs out of memory unfused). For a call that stores no broadcast
intermediate (nothing to fuse, or regions over operands of one shape) that only moves PyTorch's
own optimization into the first call (ResNet-50: +96 ms there, -102 ms on the second). The
library decides per method where it can see a call coming: a LibTorch app's call opens a record
before it reaches the executor, and the library observes it. Python's call of a scripted method
reaches the executor with nothing before it (registration/first_call.h), so the package gives it
something:

A scripted module's method, where Python would cache it on the instance (its ``__dict__``: when
torch.jit.script compiles it, or when a loaded or traced module's method is first looked up),
becomes a :class:`_FirstCall` that brackets the method's first call with the library's decision
(``tsfuse::_first_call_begin`` with the call's values: PyTorch's count for that graph unless the
call stores a broadcast intermediate a fusion would remove, passes/analysis/broadcast_probe.h) and puts
the method itself back in its place. Later calls go straight to the method: nothing is added to
them. Submodules' methods compiled by torch.jit.script (called from Python only by hand) and
scripted free functions keep first-call mode.
"""
import weakref

import torch

_ScriptMethod = torch._C.ScriptMethod
_installed = False


class _FirstCall:
    """Stands in for ``module.<name>`` (a ScriptMethod) until its first call."""

    __slots__ = ("_module", "_c", "_name", "_method")

    def __init__(self, module, name, method):
        # Weak: this object lives in the module's __dict__, and a cycle would keep a deleted
        # module's parameters until the garbage collector runs.
        self._module = weakref.ref(module)
        self._c = module._c
        self._name = name
        self._method = method

    def _resolve(self):
        module = self._module()
        if module is None:
            raise ReferenceError(f"the scripted module of method '{self._name}' no longer exists")
        if module._c is not self._c:
            # torch's _reconstruct rebuilt the module around another C++ module (quantization):
            # the method to run is that module's.
            return module, module._c._get_method(self._name)
        return module, self._method

    def __call__(self, *args, **kwargs):
        module, method = self._resolve()
        if module.__dict__.get(self._name) is self:
            module.__dict__[self._name] = method
        lent = _begin(module, self._name, method, args, kwargs)
        try:
            return method(*args, **kwargs)
        finally:
            if lent:
                torch.ops.tsfuse._first_call_end()

    def __getattr__(self, attr):
        return getattr(self._resolve()[1], attr)

    def __repr__(self):
        return repr(self._resolve()[1])


def _begin(module, name, method, args, kwargs):
    """The library's decision for this first call, judged from its values where they convert."""
    try:
        if kwargs:
            # The method's inputs in its order: keywords by name, defaults unknown (None).
            names = [a.name for a in method.schema.arguments[1 + len(args):]]
            args = args + tuple(kwargs.get(n) for n in names)
        return torch.ops.tsfuse._first_call_begin(module, name, args)
    except (RuntimeError, TypeError):
        # A value the op's Any cannot carry: decide without the values.
        return torch.ops.tsfuse._first_call_begin(module, name)


def _stand_in(module, name):
    method = module.__dict__.get(name)
    if type(method) is _ScriptMethod:
        module.__dict__[name] = _FirstCall(module, name, method)
    return module.__dict__.get(name)


def install():
    """Installs the stand-ins (once per process; ``import tsfuse`` does it)."""
    global _installed
    if _installed:
        return
    _installed = True
    recursive = torch.jit._recursive
    module_class = torch.jit.RecursiveScriptModule
    getattr_ = module_class.__getattr__
    create = recursive.create_script_module

    # A loaded, traced or wrapped module's method is cached in __dict__ at its first lookup.
    def __getattr__(self, attr):
        value = getattr_(self, attr)
        if type(value) is _ScriptMethod and self.__dict__.get(attr) is value:
            return _stand_in(self, attr)
        return value

    # torch.jit.script puts the methods it compiled into the new module's __dict__.
    def create_script_module(*args, **kwargs):
        module = create(*args, **kwargs)
        for name in [k for k, v in module.__dict__.items() if type(v) is _ScriptMethod]:
            _stand_in(module, name)
        return module

    module_class.__getattr__ = __getattr__
    recursive.create_script_module = create_script_module
