"""Load-time optimization: loading libtsfuse optimizes every TorchScript model.

Each scenario runs in a fresh subprocess: the executor registration happens once per process at
load, and the graph executor caches plans per function.
"""
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import BUILD, LIB, OPTIMIZE_TS, SOURCE

PY = sys.executable
APP = BUILD / "bin" / "tsfuse-example-app"


@pytest.fixture(scope="module")
def models(seed_model_dir):
    return seed_model_dir


def run_py(code, env_extra=None):
    env = dict(os.environ)
    env.update(env_extra or {})
    prelude = textwrap.dedent(f"""
        import sys, torch
        sys.path.insert(0, {str(SOURCE / 'examples')!r})
        import seed_models
        torch.ops.load_library({str(LIB)!r})
        def executed():
            return str(torch.jit.last_executed_optimized_graph())
    """)
    p = subprocess.run([PY, "-c", prelude + textwrap.dedent(code)], env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_cpp_app_first_call_is_fused(models):
    for name in ("intersection", "similarity"):
        p = subprocess.run([str(APP), str(models / f"{name}.pt")], capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        assert "first call fused: yes" in p.stdout


def test_cpp_app_respects_tsfuse_disable(models):
    env = dict(os.environ, TSFUSE_DISABLE="1")
    p = subprocess.run([str(APP), str(models / "intersection.pt")], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    assert "first call fused: no" in p.stdout


def test_python_first_call_fused_and_exact(models):
    out = run_py(f"""
        m = torch.jit.load({str(models / 'intersection.pt')!r})
        g = torch.Generator().manual_seed(0)
        a, b = seed_models.random_boxes(300, g), seed_models.random_boxes(17, g)
        with torch.no_grad():
            r = m(a, b)
        print("fused", executed().count("tsfuse::pairwise"))
        print("equal", torch.equal(r, seed_models.intersection(a, b)))
        s = torch.jit.load({str(models / 'similarity.pt')!r})
        x, y = torch.randn(40, 30, generator=g), torch.randn(40, 30, generator=g)
        with torch.no_grad():
            r = s(x, y)
        print("reduce", executed().count("tsfuse::reduce"), "aten::sum" in executed())
        print("equal", torch.equal(r, seed_models.similarity(x, y)))
    """)
    assert "fused 1" in out
    assert "reduce 1 False" in out
    assert out.count("equal True") == 2


def test_first_call_switch_off_defers_to_second_call(models):
    out = run_py(f"""
        m = torch.jit.load({str(models / 'intersection.pt')!r})
        a, b = m.example_inputs()
        with torch.no_grad():
            m(a, b); first = "tsfuse::" in executed()
            m(a, b); second = "tsfuse::" in executed()
        print(first, second)
    """, {"TSFUSE_FIRST_CALL": "0"})
    assert out.strip() == "False True"


def test_already_optimized_model_is_not_rewritten_twice(models, tmp_path):
    opt = tmp_path / "intersection.opt.pt"
    subprocess.run([str(OPTIMIZE_TS), "-q", str(models / "intersection.pt"), str(opt)], check=True)
    out = run_py(f"""
        m = torch.jit.load({str(opt)!r})
        a, b = m.example_inputs()
        with torch.no_grad():
            r = m(a, b)
        print("count", executed().count("tsfuse::pairwise"))
        print("equal", torch.equal(r, seed_models.intersection(a, b)))
    """)
    assert "count 1" in out and "equal True" in out


def test_nothing_to_fuse_runs_unchanged(models):
    out = run_py(f"""
        m = torch.jit.load({str(models / 'nothing_to_fuse.pt')!r})
        a, b = torch.randn(8, 16), torch.randn(16, 4)
        with torch.no_grad():
            r = m(a, b)
        print("tsfuse" in executed(), torch.allclose(r, a @ b))
    """)
    assert out.strip() == "False True"


def test_graph_without_candidates_is_left_as_torch_made_it():
    """A model with nothing to fuse runs the very plan PyTorch makes without tsfuse: the pass
    neither strips the executor's profile nodes nor rewrites spellings (here an identity slice
    read by a reduction, which canonicalize would remove, next to in-place ops it keeps)."""
    code = """
        f = torch.jit.CompilationUnit('''
        def f(a, b, c):
            y = torch.mm(a, b)
            y += c
            return y.relu_(), c[:, :].sum(0)
        ''').f
        a, b, c = torch.randn(8, 16), torch.randn(16, 4), torch.randn(8, 4)
        with torch.no_grad():
            for _ in range(3):
                f(a, b, c)
        print(executed())
    """
    with_pass = run_py(code, {"TSFUSE_FIRST_CALL": "0"})
    without = run_py(code, {"TSFUSE_DISABLE": "1"})
    assert "aten::slice" in with_pass and "aten::relu_" in with_pass
    assert with_pass == without


def test_threads_run_models_concurrently(models):
    out = run_py(f"""
        import threading
        errors = []
        def work(seed):
            try:
                g = torch.Generator().manual_seed(seed)
                m = torch.jit.load({str(models / 'intersection.pt')!r})
                s = torch.jit.load({str(models / 'similarity.pt')!r})
                for i in range(10):
                    a, b = seed_models.random_boxes(50 + i, g), seed_models.random_boxes(9 + i, g)
                    x, y = torch.randn(12, 7 + i, generator=g), torch.randn(12, 7 + i, generator=g)
                    with torch.no_grad():
                        assert torch.equal(m(a, b), seed_models.intersection(a, b))
                        assert torch.equal(s(x, y), seed_models.similarity(x, y))
            except Exception as e:
                errors.append(repr(e))
        ts = [threading.Thread(target=work, args=(k,)) for k in range(8)]
        [t.start() for t in ts]; [t.join() for t in ts]
        print("errors", len(errors), errors[:1])
    """)
    assert "errors 0" in out
