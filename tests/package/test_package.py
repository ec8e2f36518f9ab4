"""The Python package from the checkout: `pip install --no-build-isolation .` into a fresh venv,
then `import tsfuse` and the console script `optimize-ts` on the seed models (examples/).

The venv sees the project's .venv (torch, scikit-build-core) through a .pth file (site.addsitedir): a venv made with
--system-site-packages would see the base interpreter's packages, not .venv's. pip runs with
--no-index, so nothing is downloaded: the build uses the installed torch, and the dependency on
torch is met by it. The package's CMake build folder is TSFUSE_PACKAGE_BUILD (ctest: build-py
beside build/), kept between runs and compiled through ccache.
"""
import os
import pathlib
import re
import subprocess
import sys
import sysconfig
import textwrap

import pytest

SOURCE = pathlib.Path(os.environ.get("TSFUSE_SOURCE", pathlib.Path(__file__).resolve().parents[2]))
PACKAGE_BUILD = pathlib.Path(os.environ.get("TSFUSE_PACKAGE_BUILD", SOURCE / "build-py"))


class Venv:
    def __init__(self, root: pathlib.Path):
        self.root = root
        self.python = root / "bin" / "python"
        self.optimize_ts = root / "bin" / "optimize-ts"

    def run(self, *args, **kw):
        return subprocess.run([str(a) for a in args], capture_output=True, text=True, **kw)

    def py(self, code, check=True):
        p = self.run(self.python, "-c", textwrap.dedent(code), cwd=self.root)
        if check:
            assert p.returncode == 0, p.stdout + p.stderr
        return p


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    try:
        import scikit_build_core  # noqa: F401  (the build backend, from the project's .venv)
    except ImportError:
        pytest.fail("scikit-build-core is not installed in the project's .venv: run scripts/setup.sh")
    v = Venv(tmp_path_factory.mktemp("pkg") / "venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(v.root)], check=True)
    purelib = v.run(v.python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))").stdout.strip()
    # addsitedir, not a bare path: .pth files in the project's site-packages are processed too.
    pathlib.Path(purelib, "_project_venv.pth").write_text(
        f"import site; site.addsitedir({sysconfig.get_path('purelib')!r})\n")
    p = v.run(v.python, "-m", "pip", "install", "--no-build-isolation", "--no-index", "--disable-pip-version-check",
              "-C", f"build-dir={PACKAGE_BUILD}", SOURCE, cwd=v.root, timeout=1500)
    assert p.returncode == 0, p.stdout + p.stderr
    return v


@pytest.fixture(scope="module")
def seeds(venv):
    out = venv.root.parent / "seeds"
    venv.py(f"""
        import sys; sys.path.insert(0, {str(SOURCE / 'examples')!r})
        import seed_models
        seed_models.save_all({str(out)!r})
    """)
    return out


def test_import_loads_the_installed_library(venv):
    out = venv.py("""
        import tsfuse, torch
        print(tsfuse.__version__, tsfuse.library_path())
        print(sorted(torch.ops.loaded_libraries))
        print(tsfuse.is_enabled())
    """).stdout.splitlines()
    assert str(venv.root) in out[0], out  # the venv's copy, not build/lib
    assert out[0].endswith("tsfuse/lib/libtsfuse.so")
    assert "libtsfuse_tool.so" in out[1]
    assert out[2] == "True"


def test_import_keeps_pytorchs_first_call_where_nothing_fuses(venv, seeds):
    # The package's first-call hook (tsfuse/_first_call.py): a model with nothing to fuse runs
    # PyTorch's profiling plan first; a fusible one is fused on its first call.
    out = venv.py(f"""
        import torch, tsfuse
        def plan():
            g = str(torch.jit.last_executed_optimized_graph())
            return "fused" if "tsfuse::" in g else "profiled" if "prim::profile" in g else "optimized"
        with torch.no_grad():
            m = torch.jit.load({str(seeds / 'nothing_to_fuse.pt')!r})
            m(torch.randn(8, 16), torch.randn(16, 4)); print(plan())
            m = torch.jit.load({str(seeds / 'intersection.pt')!r})
            m(*m.example_inputs()); print(plan())
    """).stdout.split()
    assert out == ["profiled", "fused"], out


def test_optimize_explain_enabled(venv, seeds):
    out = venv.py(f"""
        import sys, torch, tsfuse
        sys.path.insert(0, {str(SOURCE / 'examples')!r})
        import seed_models
        g = torch.Generator().manual_seed(0)

        m = torch.jit.script(seed_models.Intersection())
        opt, report = tsfuse.optimize(m)
        print("rewrites", report.rewrites, "graph", str(opt.graph).count("tsfuse::pairwise"))
        print("original untouched", "tsfuse::" not in str(m.graph))
        a, b = seed_models.random_boxes(300, g), seed_models.random_boxes(17, g)
        with torch.no_grad():
            print("equal", torch.equal(opt(a, b), seed_models.intersection(a, b)))
        print("report", report.data["passes"][-1]["name"], "|", report.text.splitlines()[0])

        s = torch.jit.load({str(seeds / 'similarity.pt')!r})
        opt, report = tsfuse.optimize(s)
        x, y = torch.randn(40, 30, generator=g), torch.randn(40, 30, generator=g)
        with torch.no_grad():
            print("reduce", str(opt.graph).count("tsfuse::reduce"), torch.equal(opt(x, y), seed_models.similarity(x, y)))
        opt.save({str(seeds / 'similarity.opt.pt')!r})

        with open({str(seeds / 'explain.txt')!r}, "w") as f:
            f.write(tsfuse.explain(torch.jit.load({str(seeds / 'intersection.pt')!r})))

        fresh = torch.jit.script(seed_models.Similarity())
        with tsfuse.enabled(False):
            print("inside", tsfuse.is_enabled())
            with torch.no_grad():
                fresh(x, y)
            print("off fused", "tsfuse::" in str(torch.jit.last_executed_optimized_graph()))
        print("after", tsfuse.is_enabled())
        with torch.no_grad():
            torch.jit.script(seed_models.Intersection())(a, b)
        print("on fused", "tsfuse::pairwise" in str(torch.jit.last_executed_optimized_graph()))
    """).stdout
    assert "rewrites 1 graph 1" in out, out
    assert "original untouched True" in out
    assert "equal True" in out
    assert "report note_stored_broadcasts |   pass" in out, out  # the summary's pass table, no file line
    assert "reduce 1 True" in out
    assert "inside False" in out and "off fused False" in out
    assert "after True" in out and "on fused True" in out

    # The optimized module saved from Python loads in a process that imports tsfuse.
    out = venv.py(f"""
        import torch, tsfuse
        m = torch.jit.load({str(seeds / 'similarity.opt.pt')!r})
        print("loaded", "tsfuse::reduce" in str(m.graph))
    """).stdout
    assert "loaded True" in out

    # tsfuse.explain's text is optimize-ts --explain's (the header names the module, not a file).
    cli = venv.run(venv.optimize_ts, "--explain", seeds / "intersection.pt")
    assert cli.returncode == 0, cli.stderr
    text = (seeds / "explain.txt").read_text()
    assert text.splitlines()[0] == "optimize-ts --explain: Intersection (nothing written)"
    assert "FUSE" in text
    assert text.splitlines()[1:] == cli.stdout.splitlines()[1:]


def test_console_script(venv, seeds):
    p = venv.run(venv.optimize_ts, "--version")
    assert p.returncode == 0 and "optimize-ts (tsfuse)" in p.stdout, p.stdout + p.stderr
    p = venv.run(venv.optimize_ts, "--check", seeds / "intersection.pt", seeds / "intersection.opt.pt")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "check: passed" in p.stdout
    p = venv.run(venv.optimize_ts, "--bogus")
    assert p.returncode == 2, p.stdout + p.stderr  # the tool's own exit codes pass through


def test_torch_version_mismatch_is_refused(venv):
    build_info = pathlib.Path(venv.py("import tsfuse._build as b; print(b.__file__)").stdout.strip())
    saved = build_info.read_text()
    try:
        build_info.write_text(re.sub(r"TORCH_VERSION = .*", 'TORCH_VERSION = "0.0.1"', saved))
        for p in (venv.py("import tsfuse", check=False), venv.run(venv.optimize_ts, "--version")):
            assert p.returncode != 0
            assert "was built against torch 0.0.1, but torch 2." in p.stderr, p.stderr
            assert "pip install --no-build-isolation" in p.stderr
    finally:
        build_info.write_text(saved)
