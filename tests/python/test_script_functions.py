"""tsfuse.optimize and tsfuse.explain on what users script: a @torch.jit.script function (a
torch.jit.ScriptFunction), and a module whose forward calls one.

The package is the source tree's over the build's libraries (conftest's source_package), imported
in a fresh process per scenario (the installed package is tests/package's subject). Box IoU is
torchvision's formula; elementwise ops give eager's bits (docs/exactness.md), so results are
compared with torch.equal.
"""
import os
import subprocess
import sys
import textwrap

from conftest import SOURCE


PRELUDE = """
import gc, io, sys, warnings
import torch
from torch import Tensor
warnings.simplefilter("ignore", DeprecationWarning)  # torch.jit.script / load in torch >= 2.11
import tsfuse
import detection_models


def box_area(boxes: Tensor) -> Tensor:
    return (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])


def box_iou_eager(boxes1: Tensor, boxes2: Tensor) -> Tensor:
    area1 = box_area(boxes1)
    area2 = box_area(boxes2)
    lt = torch.max(boxes1[:, None, :2], boxes2[:, :2])
    rb = torch.min(boxes1[:, None, 2:], boxes2[:, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[:, :, 0] * wh[:, :, 1]
    union = area1[:, None] + area2 - inter
    return inter / union


@torch.jit.script
def box_iou(boxes1: Tensor, boxes2: Tensor) -> Tensor:
    area1 = box_area(boxes1)
    area2 = box_area(boxes2)
    lt = torch.max(boxes1[:, None, :2], boxes2[:, :2])
    rb = torch.min(boxes1[:, None, 2:], boxes2[:, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[:, :, 0] * wh[:, :, 1]
    union = area1[:, None] + area2 - inter
    return inter / union


def random_boxes(n, g, dtype=torch.float32):
    xy = torch.rand(n, 2, generator=g, dtype=dtype) * 100
    return torch.cat([xy, xy + torch.rand(n, 2, generator=g, dtype=dtype) * 30 + 0.5], dim=1)


def pairs(seed=0):
    g = torch.Generator().manual_seed(seed)
    for n, m, dtype in ((300, 17, torch.float32), (64, 64, torch.float64), (1, 5, torch.float32),
                        (0, 3, torch.float32), (1000, 40, torch.float32)):
        yield random_boxes(n, g, dtype), random_boxes(m, g, dtype)


def plan():
    return str(torch.jit.last_executed_optimized_graph())
"""


def run_py(tmp_path, package, code, extra_paths=()):
    # A file, not -c: torch.jit.script reads the functions' source.
    script = tmp_path / "scenario.py"
    script.write_text(PRELUDE + textwrap.dedent(code))
    paths = [str(package), str(SOURCE / "examples"), *map(str, extra_paths)]
    paths += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths))
    p = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def test_scripted_function_gives_an_optimized_function_with_eagers_bits(tmp_path, source_package):
    out = run_py(tmp_path, source_package, """
        before = (str(box_iou.graph), box_iou.code)
        opt, report = tsfuse.optimize(box_iou)
        print("type", isinstance(opt, torch.jit.ScriptFunction), opt is not box_iou)
        print("name", opt.name, str(opt.schema) == str(box_iou.schema))
        print("fused", "tsfuse::" in str(opt.graph), "prim::CallFunction" in str(opt.graph), report.rewrites >= 1)
        print("graphs", report.data["graphs"])
        print("original untouched", (str(box_iou.graph), box_iou.code) == before,
              "tsfuse::" not in str(box_iou.graph), "prim::CallFunction" in str(box_iou.graph))
        with torch.no_grad():
            # The original, run unfused (its first call inside enabled(False) fixes its plan).
            with tsfuse.enabled(False):
                for a, b in pairs():
                    box_iou(a, b)
            print("reference unfused", "tsfuse::" not in plan())
            same, fused = [], []
            for a, b in pairs():
                got = opt(a, b)
                fused.append("tsfuse::" in plan())
                same.append(torch.equal(got, box_iou(a, b)) and torch.equal(got, box_iou_eager(a, b))
                            and got.dtype == a.dtype)
            print("exact", all(same), len(same))
            print("opt ran fused", all(fused))

        # Callable from other scripted code, and saved as ScriptFunction.save saves.
        class Calls(torch.nn.Module):
            def forward(self, a: Tensor, b: Tensor) -> Tensor:
                return opt(a, b)
        a, b = next(pairs(1))
        with torch.no_grad():
            print("from script", torch.equal(torch.jit.script(Calls())(a, b), box_iou_eager(a, b)))
            loaded = torch.jit.load(io.BytesIO(opt.save_to_buffer()))
            print("saved", "tsfuse::" in str(loaded.forward.graph), torch.equal(loaded(a, b), box_iou_eager(a, b)))
    """)
    assert "type True True" in out, out
    assert "name box_iou True" in out
    assert "fused True False True" in out  # the callee box_area inlined, the regions fused
    assert "graphs ['box_iou']" in out
    assert "original untouched True True True" in out
    assert "reference unfused True" in out
    assert "exact True 5" in out
    assert "opt ran fused True" in out
    assert "from script True" in out
    assert "saved True True" in out


def test_acceptance_torchvision_box_iou(tmp_path, source_package):
    # issue 52's acceptance line: tsfuse.optimize(torch.jit.script(box_iou)) works and is exact
    # (box_iou -> _box_inter_union -> box_area: two levels of scripted calls, a tuple between).
    out = run_py(tmp_path, source_package, """
        opt, report = tsfuse.optimize(torch.jit.script(detection_models.box_iou))
        print("fused", "tsfuse::" in str(opt.graph), report.rewrites >= 1)
        with torch.no_grad():
            print("exact", all(torch.equal(opt(a, b), detection_models.box_iou(a, b)) for a, b in pairs(2)))
    """)
    assert "fused True True" in out, out
    assert "exact True" in out


def test_default_arguments_and_names_are_kept(tmp_path, source_package):
    # torchvision >= 0.21 spells box_iou(boxes1, boxes2, fmt: str = "xyxy"): the copy keeps the
    # original's schema, so calls that leave a default out, or pass by keyword, still work.
    out = run_py(tmp_path, source_package, """
        from typing import Optional

        @torch.jit.script
        def scaled_iou(boxes1: Tensor, boxes2: Tensor, fmt: str = "xyxy", eps: float = 1e-7,
                       scale: Optional[float] = None) -> Tensor:
            if fmt != "xyxy":
                raise ValueError("only xyxy")
            iou = box_iou(boxes1, boxes2) + eps
            if scale is not None:
                iou = iou * scale
            return iou

        opt, report = tsfuse.optimize(scaled_iou)
        print("schema", str(opt.schema) == str(scaled_iou.schema), report.rewrites >= 1)
        a, b = next(pairs(5))
        with torch.no_grad():
            print("defaults", torch.equal(opt(a, b), scaled_iou(a, b)))
            print("keywords", torch.equal(opt(a, b, scale=2.0, eps=0.5), scaled_iou(a, b, eps=0.5, scale=2.0)))
            try:
                opt(a, b, fmt="cxcywh")
            except Exception as e:
                print("raises", "only xyxy" in str(e))
    """)
    assert "schema True True" in out, out
    assert "defaults True" in out
    assert "keywords True" in out
    assert "raises True" in out


def test_torchvision_box_iou_keeps_its_fmt_default(tmp_path, source_package, torchvision_path):
    # The PyPI torchvision's own box_iou (0.26: box_iou(boxes1, boxes2, fmt: str = "xyxy")),
    # called as its users call it, without fmt.
    out = run_py(tmp_path, source_package, """
        from torchvision.ops import boxes as tv_boxes
        f = torch.jit.script(tv_boxes.box_iou)
        opt, report = tsfuse.optimize(f)
        print("schema", str(opt.schema) == str(f.schema))
        print("fused", "tsfuse::" in str(opt.graph), report.rewrites >= 1)
        with torch.no_grad():
            print("exact", all(torch.equal(opt(a, b), f(a, b)) for a, b in pairs(6)))
    """, extra_paths=[torchvision_path])
    assert "schema True" in out, out
    assert "fused True True" in out
    assert "exact True" in out


def test_the_copy_owns_the_functions_it_still_calls(tmp_path, source_package):
    # With inline skipped the copy still calls box_area: its copy of box_area lives in the copy's
    # own compilation unit, which the returned function keeps alive.
    out = run_py(tmp_path, source_package, """
        opt, _ = tsfuse.optimize(box_iou, disable=["inline"])
        gc.collect()
        print("calls", "prim::CallFunction" in str(opt.graph))
        with torch.no_grad():
            print("exact", all(torch.equal(opt(a, b), box_iou_eager(a, b)) for a, b in pairs(3)))
    """)
    assert "calls True" in out, out
    assert "exact True" in out


def test_module_whose_forward_calls_a_scripted_function(tmp_path, source_package):
    out = run_py(tmp_path, source_package, """
        class Distance(torch.nn.Module):
            def forward(self, a: Tensor, b: Tensor) -> Tensor:
                return 1 - box_iou(a, b)

        m = torch.jit.script(Distance())
        before = (str(m.graph), str(box_iou.graph))
        opt, report = tsfuse.optimize(m)
        print("module", isinstance(opt, torch.jit.ScriptModule), report.data["graphs"])
        print("fused", "tsfuse::" in str(opt.graph), "prim::CallFunction" in str(opt.graph))
        print("originals untouched", (str(m.graph), str(box_iou.graph)) == before, "prim::CallFunction" in str(m.graph))
        with torch.no_grad():
            print("exact", all(torch.equal(opt(a, b), 1 - box_iou_eager(a, b)) for a, b in pairs(4)))
        text = tsfuse.explain(m)
        print("explain", text.splitlines()[0], "FUSE" in text)
    """)
    assert "module True ['forward']" in out, out
    assert "fused True False" in out
    assert "originals untouched True True" in out
    assert "exact True" in out
    assert "explain optimize-ts --explain: Distance (nothing written) True" in out


def test_explain_on_a_scripted_function(tmp_path, source_package):
    out = run_py(tmp_path, source_package, """
        before = str(box_iou.graph)
        text = tsfuse.explain(box_iou)
        print("unchanged", str(box_iou.graph) == before)
        sys.stdout.write(text)
    """)
    lines = out.splitlines()
    assert lines[0] == "unchanged True", out
    assert lines[1] == "optimize-ts --explain: box_iou (nothing written)", out
    assert any(line.startswith("box_iou: ") and "fusion(s)" in line for line in lines), out
    assert "FUSE" in out
    assert not any(line.startswith("forward: ") for line in lines), out  # named after the function


def test_what_is_not_torchscript_is_refused_clearly(tmp_path, source_package):
    out = run_py(tmp_path, source_package, """
        cases = {"function": box_iou_eager, "module": torch.nn.Linear(2, 2), "number": 3,
                 "method": torch.jit.script(torch.nn.Linear(2, 2)).forward}
        for what, value in cases.items():
            for api in (tsfuse.optimize, tsfuse.explain):
                try:
                    api(value)
                    print(what, api.__name__, "accepted")
                except TypeError as e:
                    print(what, api.__name__, "TypeError:", e)
    """)
    lines = out.splitlines()
    assert len(lines) == 8, out
    for line in lines:
        assert "TypeError: tsfuse expects a ScriptModule (torch.jit.script, trace or load) or a " \
               "ScriptFunction (torch.jit.script of a function), got " in line, line
    assert out.count("got function (script it first: torch.jit.script(fn))") == 2, out
    assert out.count("got Linear (script it first: torch.jit.script(module))") == 2, out
    assert [line.endswith("got int") for line in lines].count(True) == 2, out
    assert out.count("got ScriptMethod (pass the scripted module it belongs to)") == 2, out
