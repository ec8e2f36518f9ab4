"""optimize-ts on models that need torchvision (installed from PyPI into BUILD/test-deps/ by
pypi_deps.py): a model calling torchvision's C++ op torchvision::nms, which loads only with
--library (or TSFUSE_LIBRARIES) naming torchvision/_C.so, a scripted ResNet-50, which has
nothing to fuse and must say so in a few lines, and torchvision's proposal Matcher, frozen, which
becomes one fused op."""
import json
import pathlib
import subprocess
import sys

import pytest
import torch

from optimize_ts_util import assert_one_error_line, run_tool
from pypi_deps import torchvision_env

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def models(torchvision_path, tmp_path_factory):
    outdir = tmp_path_factory.mktemp("torchvision_models")
    script = pathlib.Path(__file__).with_name("torchvision_models.py")
    subprocess.run([sys.executable, str(script), str(outdir)], check=True, capture_output=True,
                   env=torchvision_env(torchvision_path), timeout=600)
    return {"nms_iou": outdir / "nms_iou.pt", "resnet50": outdir / "resnet50.pt", "matcher": outdir / "matcher.pt"}


@pytest.fixture(scope="module")
def tv_library(torchvision_path):
    lib = torchvision_path / "torchvision" / "_C.so"
    assert lib.is_file()
    return lib


# --- extension libraries ------------------------------------------------------------------------

def test_unknown_op_suggests_library(models, optimize_ts, tmp_path):
    proc = run_tool(optimize_ts, models["nms_iou"], tmp_path / "o.pt")
    line = assert_one_error_line(proc, 3, "Unknown builtin op: torchvision::nms", "'torchvision'", "--library",
                                 "<site-packages>/torchvision/_C.so")
    assert str(models["nms_iou"]) in line
    assert not (tmp_path / "o.pt").exists()


def test_library_loads_model_then_fuses_and_checks(models, tv_library, optimize_ts, tmp_path):
    out, report = tmp_path / "o.pt", tmp_path / "r.json"
    proc = run_tool(optimize_ts, "--library", tv_library, "--check=2", "--report", report, models["nms_iou"], out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "check: passed" in proc.stdout and out.exists()
    doc = json.loads(report.read_text())
    assert doc["check"]["passed"] and doc["check"]["runs"] == 2
    # box_iou's [N, M] body became one fused op next to the torchvision::nms call
    fused = [e for e in doc["events"] if e["kind"] == "rewrite" and e["fused_op"] == "tsfuse::pairwise"]
    assert fused and any("div(" in e["expr"] for e in fused)


@pytest.mark.parametrize("mode", ["--explain", "--diff", "--html"])
def test_library_from_environment(models, tv_library, optimize_ts, tmp_path, mode):
    """TSFUSE_LIBRARIES (':'-separated, empty entries skipped) serves every mode, the viewer too."""
    page = tmp_path / "page.html"
    args = {"--explain": ["--explain"], "--diff": ["--dry-run", "--diff"],
            "--html": ["--dry-run", "-q", "--html", page]}[mode]
    proc = run_tool(optimize_ts, *args, models["nms_iou"], env={"TSFUSE_LIBRARIES": f"::{tv_library}:"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    shown = page.read_text() if mode == "--html" else proc.stdout
    assert "tsfuse::pairwise" in shown  # the model loaded (its torchvision::nms known) and was fused


# --- quiet by default -----------------------------------------------------------------------------

def test_resnet50_summary_is_short(models, optimize_ts, tmp_path):
    out = tmp_path / "r.pt"
    proc = run_tool(optimize_ts, "--check", "--input-shape", "x:1,3,224,224", models["resnet50"], out, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) <= 5, proc.stdout
    assert sum("nothing to fuse" in line for line in lines) == 1, proc.stdout
    assert "check: passed" in proc.stdout and "median of" in proc.stdout
    assert "relu_" not in proc.stdout and "canonicalize" in proc.stdout  # counted, not listed


def test_resnet50_verbose_lists_in_place_notes(models, optimize_ts, tmp_path):
    proc = run_tool(optimize_ts, "-v", "--dry-run", models["resnet50"], timeout=600)
    assert proc.returncode == 0, proc.stderr
    notes = [line for line in proc.stdout.splitlines() if "in-place aten::relu_ kept" in line]
    assert len(notes) > 10 and all("(canonicalize)" in n for n in notes)


# --- torchvision's Matcher ------------------------------------------------------------------------

def _boxes(n: int, g: torch.Generator) -> torch.Tensor:
    xy = torch.rand(n, 2, generator=g) * 200
    return torch.cat([xy, xy + 1 + torch.rand(n, 2, generator=g) * 40], 1)


def test_matcher_is_one_fused_op(models, optimize_ts, tsfuse_lib, tmp_path):
    """box_iou, max(dim=0), `matches[below] = -1`, `matches[between] = -2` and the Matcher's
    `numel() == 0` check: one tsfuse::reduce_with_indices (its epilogue the two writes), no [N, M]
    value stored; the same matches as torchvision's, and the same errors for empty inputs."""
    out = tmp_path / "m.pt"
    proc = run_tool(optimize_ts, "--check=3", "--input-shape", "gt:12,4", "--input-shape", "proposals:3000,4",
                    models["matcher"], out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ref, opt = torch.jit.load(str(models["matcher"])), torch.jit.load(str(out))
    kinds = [n.kind() for n in opt.graph.nodes()]
    assert kinds.count("tsfuse::reduce_with_indices") == 1, opt.graph
    assert not {"tsfuse::pairwise", "aten::index_put_", "aten::masked_fill", "aten::div", "aten::max"} & set(kinds)
    g = torch.Generator().manual_seed(0)
    for n, m in [(12, 3000), (1, 1), (40, 257)]:
        gt, proposals = _boxes(n, g), _boxes(m, g)
        proposals[: n // 2] = gt[: n // 2]  # some perfect matches
        want = ref(gt, proposals)
        assert {-1, -2} <= set(want.tolist()) or m < 40
        assert torch.equal(opt(gt, proposals), want)
    for n, m in [(0, 5), (5, 0)]:
        errors = []
        for model in (ref, opt):
            with pytest.raises(Exception) as e:
                model(_boxes(n, g), _boxes(m, g))
            errors.append(str(e.value).strip().splitlines()[-1])
        assert errors[0] == errors[1] and "available for one of the images" in errors[0]
