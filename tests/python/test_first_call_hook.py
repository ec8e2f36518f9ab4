"""The package's first-call hook (python/tsfuse/_first_call.py) for Python's calls of scripted
modules: a method whose first call stores no broadcast intermediate to fuse keeps PyTorch's
profiled first call, one that does is fused on its first call, and nothing stays in the way
afterwards.

Each scenario is a fresh process: libtsfuse from the build, the hook installed from the source
tree as `import tsfuse` installs it (the installed package is tests/package's subject).
"""
import os
import subprocess
import sys
import textwrap

from conftest import LIB, SOURCE

PRELUDE = f"""
import gc, importlib.util, io, weakref, torch
torch.ops.load_library({str(LIB)!r})
spec = importlib.util.spec_from_file_location("first_call", {str(SOURCE / 'python/tsfuse/_first_call.py')!r})
first_call = importlib.util.module_from_spec(spec)
spec.loader.exec_module(first_call)
first_call.install()

class NothingToFuse(torch.nn.Module):
    def forward(self, x):
        return torch.mm(x, x.t())

class CloseCounts(torch.nn.Module):
    def forward(self, x, y):
        return (x.unsqueeze(1) - y.unsqueeze(0)).abs().lt(1.0).sum(0)

def plan():
    g = str(torch.jit.last_executed_optimized_graph())
    return "fused" if "tsfuse::" in g else "profiled" if "prim::profile" in g else "optimized"

def reload(m):
    return torch.jit.load(io.BytesIO(m.save_to_buffer()))

x = torch.randn(6, 4)
"""


def run_py(tmp_path, code, **env_extra):
    # A file, not -c: torch.jit.script reads the modules' source.
    script = tmp_path / "scenario.py"
    script.write_text(PRELUDE + textwrap.dedent(code))
    env = dict(os.environ, **env_extra)
    p = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return p


def test_first_calls_by_how_the_module_was_made(tmp_path):
    out = run_py(tmp_path, """
        makers = {"script": torch.jit.script, "load": lambda m: reload(torch.jit.script(m)),
                  "trace": lambda m: torch.jit.trace(m, (x,) * len(m.forward.__code__.co_varnames[1:]),
                                                     check_trace=False)}
        with torch.no_grad():
            for how, make in makers.items():
                for cls, args in ((NothingToFuse, (x,)), (CloseCounts, (x, x))):
                    m = make(cls())
                    first = m(*args); p1 = plan()
                    second = m(*args); p2 = plan()
                    want = cls().forward(*args)
                    print(how, cls.__name__, p1, p2, torch.equal(first, want) and torch.equal(second, want),
                          torch._C._jit_get_num_profiled_runs())
    """).stdout.splitlines()
    for how in ("script", "load", "trace"):
        assert f"{how} NothingToFuse profiled optimized True 0" in out, out
        assert f"{how} CloseCounts fused fused True 0" in out, out


def test_the_call_values_decide(tmp_path):
    # The same method stores a broadcast intermediate for operands shaped [N, 1, D] and [1, M, D]
    # and none for two [N, M, D] (passes/analysis/broadcast_probe.h); keywords count as their position.
    out = run_py(tmp_path, """
        class Distances(torch.nn.Module):
            def forward(self, x, y):
                return (x - y).abs().sum(-1)

        a, b = torch.randn(6, 1, 4), torch.randn(1, 5, 4)
        same = torch.randn(6, 5, 4)
        with torch.no_grad():
            for name, args, kwargs in (("outer", (a, b), {}), ("outer-keyword", (a,), {"y": b}),
                                       ("same", (same, same), {}), ("same-keyword", (same,), {"y": same})):
                # A class per case: the executor (and the decision) belongs to the class's method.
                cls = type(name.replace("-", "_"), (Distances,), {})
                m = torch.jit.script(cls())
                got = m(*args, **kwargs)
                print(name, plan(), torch.allclose(got, Distances()(*args, **kwargs)))
    """).stdout.splitlines()
    assert out == ["outer fused True", "outer-keyword fused True", "same profiled True",
                   "same-keyword profiled True"], out


def test_first_call_fusible_fuses_every_region_on_its_first_call(tmp_path):
    # TSFUSE_FIRST_CALL=fusible: the rule before the probe, any region start decides.
    code = """
        class Distances(torch.nn.Module):
            def forward(self, x, y):
                return (x - y).abs().sum(-1)

        same = torch.randn(6, 5, 4)
        with torch.no_grad():
            torch.jit.script(Distances())(same, same); print(plan())
    """
    assert run_py(tmp_path, code).stdout.split() == ["profiled"]
    assert run_py(tmp_path, code, TSFUSE_FIRST_CALL="fusible").stdout.split() == ["fused"]


def test_the_method_itself_takes_over_after_its_first_call(tmp_path):
    out = run_py(tmp_path, """
        m = torch.jit.script(NothingToFuse())
        stand_in = m.forward
        original = lambda method: method.__wrapped__.__func__ is NothingToFuse.forward  # functools.wraps
        print(type(stand_in).__name__, stand_in.name, "aten::mm" in str(stand_in.graph), original(stand_in))
        with torch.no_grad():
            m(x)
        print(type(m.forward).__name__, original(m.forward))
        ref = weakref.ref(m)
        gc.disable()
        del m, stand_in
        print("freed", ref() is None)
    """).stdout.splitlines()
    assert out[0] == "_FirstCall forward True True", out
    assert out[1] == "ScriptMethod True", out
    assert out[2] == "freed True", out  # no reference cycle through the stand-in


def test_a_module_rebuilt_around_another_cpp_module_runs_the_new_method(tmp_path):
    # torch's _reconstruct (quantization) swaps the C++ module behind a Python one and drops the
    # methods it cached; the stand-in must not run the old one.
    out = run_py(tmp_path, """
        m = torch.jit.script(NothingToFuse())
        other = torch.jit.script(CloseCounts())
        m.forward  # the stand-in, created before the swap
        m._reconstruct(other._c)
        with torch.no_grad():
            print(torch.equal(m.forward(x, x), CloseCounts()(x, x)))
    """).stdout
    assert out.strip() == "True"


def test_switched_off_keeps_the_documented_first_call(tmp_path):
    # Inside tsfuse.enabled(False) the executor optimizes at the first call, without the pass,
    # and keeps that plan (the package's `enabled` docstring): no profiled run to defer it.
    out = run_py(tmp_path, """
        m = torch.jit.script(CloseCounts())
        previous = torch.ops.tsfuse.set_enabled(False)
        with torch.no_grad():
            m(x, x); print(plan())
        torch.ops.tsfuse.set_enabled(previous)
        with torch.no_grad():
            m(x, x); print(plan())
    """).stdout.split()
    assert out == ["optimized", "optimized"], out


def test_a_count_the_user_set_stands(tmp_path):
    out = run_py(tmp_path, """
        torch._C._jit_set_num_profiled_runs(2)
        m = torch.jit.script(CloseCounts())
        with torch.no_grad():
            m(x, x); print(plan()); m(x, x); print(plan()); m(x, x); print(plan())
    """).stdout.split()
    assert out == ["profiled", "profiled", "fused"], out


def test_library_log_says_who_decides_in_a_python_process(tmp_path):
    p = run_py(tmp_path, "pass", TSFUSE_LOG_LEVEL="info")
    assert "first-call mode per method only for Python calls through the tsfuse package's hook" in p.stderr, p.stderr


def test_every_example_with_a_broadcast_intermediate_is_fused_on_its_first_call(tmp_path):
    # The decision (passes/analysis/broadcast_probe.h) against the pipeline, over the bundled examples,
    # scripted and traced: each stores a broadcast intermediate unfused, so each must be fused on
    # its first call. Named negative: gpytorch's periodic kernel, whose region (sin, pow, ... over
    # torch.cdist's [D, N, M] output, then a sum) broadcasts nothing; it is fused from its second call.
    out = run_py(tmp_path, f"""
        import sys
        sys.path.insert(0, {str(SOURCE / 'examples')!r})
        import detection_models as dm, reduce_models as rm
        models = [(n + " " + how, lambda n=n, how=how: getattr(dm, how)(n)) for n in dm.FUNCTIONS
                  for how in ("scripted", "traced")]
        models += [(n + " reduce", lambda cls=cls: torch.jit.script(cls())) for n, (cls, _) in rm.MODELS.items()]
        with torch.no_grad():
            for name, make in models:
                m = make()
                args = m.example_inputs()
                first = m(*args); p1 = plan()
                second = m(*args); p2 = plan()
                print(name, p1, p2)
    """).stdout.splitlines()
    assert len(out) == 2 * 31 + 13, out
    for line in out:
        name, first, second = line.rsplit(" ", 2)
        want = "profiled" if name.startswith("periodic_kernel ") else "fused"
        assert (first, second) == (want, "fused"), line
