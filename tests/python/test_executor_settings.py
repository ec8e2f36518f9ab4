"""Executor settings (docs/registration.md, "Executor settings"): under each setting a user or a
server can choose, the load-time pass fuses, or tsfuse logs one warning naming the setting and the
remedy (registration/executor_settings.h).

Each setting runs in a fresh subprocess: the settings are process-wide (optimization is per
thread) and the warning is logged once per process.
"""
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import LIB, OPTIMIZE_TS, SOURCE

PY = sys.executable
WARNING = "[tsfuse.registration] [warning]"


@pytest.fixture(scope="module")
def models(seed_model_dir):
    return seed_model_dir


def run_seed_iou(model, before_load="", after_load="", context="contextlib.nullcontext()"):
    """Loads libtsfuse between the two snippets, then calls `model` (the seed intersection) three
    times under `context`; returns, per call, the count of tsfuse ops in the executed graph and
    whether the result equals eager's, and tsfuse's warning lines."""
    code = textwrap.dedent(f"""
        import contextlib, sys, torch
        sys.path.insert(0, {str(SOURCE / 'examples')!r})
        import seed_models
        {before_load}
        torch.ops.load_library({str(LIB)!r})
        {after_load}
        m = torch.jit.load({str(model)!r})
        g = torch.Generator().manual_seed(0)
        a, b = seed_models.random_boxes(300, g), seed_models.random_boxes(17, g)
        for _ in range(3):
            with {context}:
                r = m(a, b)
            fused = str(torch.jit.last_executed_optimized_graph()).count("tsfuse::")
            print("call", fused, torch.equal(r, seed_models.intersection(a, b)))
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TSFUSE_")}
    p = subprocess.run([PY, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    calls = [(int(f), e == "True") for _, f, e in (line.split() for line in p.stdout.splitlines())]
    warnings = [line for line in p.stderr.splitlines() if line.startswith(WARNING)]
    return calls, warnings


def assert_fused(calls, warnings, from_call=0):
    assert [f > 0 for f, _ in calls] == [i >= from_call for i in range(3)], calls
    assert all(equal for _, equal in calls), calls
    assert warnings == []


def assert_warned(calls, warnings, *names):
    assert all(f == 0 and equal for f, equal in calls), calls
    assert len(warnings) == 1, warnings
    for name in names + ("optimize-ts", "tsfuse.optimize", "tsfuse::optimize"):
        assert name in warnings[0], (name, warnings[0])


def test_default_settings_fuse_silently(models):
    assert_fused(*run_seed_iou(models / "intersection.pt"))


def test_graph_executor_optimize_off_warns_once(models):
    calls, warnings = run_seed_iou(models / "intersection.pt",
                                   after_load="torch._C._set_graph_executor_optimize(False)")
    assert_warned(calls, warnings, "_set_graph_executor_optimize(False)", "setGraphExecutorOptimize(false)",
                  "DISABLE_OPTIMIZED_EXECUTION")


def test_graph_executor_optimize_off_before_load_warns_once(models):
    calls, warnings = run_seed_iou(models / "intersection.pt",
                                   before_load="torch._C._set_graph_executor_optimize(False)")
    assert_warned(calls, warnings, "_set_graph_executor_optimize(False)")


def test_optimized_execution_off_warns_once(models):
    calls, warnings = run_seed_iou(models / "intersection.pt", context="torch.jit.optimized_execution(False)")
    assert_warned(calls, warnings, "optimized_execution(False)")


def test_graph_executor_optimize_off_runs_an_optimize_ts_model_fused(models, tmp_path):
    """The remedy the warning names: the fused ops are in the file, so nothing needs the executor."""
    out = tmp_path / "intersection.opt.pt"
    subprocess.run([str(OPTIMIZE_TS), str(models / "intersection.pt"), str(out)], check=True, capture_output=True)
    assert_fused(*run_seed_iou(out, after_load="torch._C._set_graph_executor_optimize(False)"))


def test_profiling_mode_off_warns_once(models):
    calls, warnings = run_seed_iou(models / "intersection.pt", after_load="torch._C._jit_set_profiling_mode(False)")
    assert_warned(calls, warnings, "_jit_set_profiling_mode(False)", "ENABLE_JIT_PROFILING")


def test_profiling_executor_off_fuses_first_call(models):
    """The legacy executor runs registered pre-passes when it optimizes, at the first call."""
    assert_fused(*run_seed_iou(models / "intersection.pt", after_load="torch._C._jit_set_profiling_executor(False)"))


def test_legacy_executor_ignores_profiling_mode(models):
    assert_fused(*run_seed_iou(models / "intersection.pt", after_load="torch._C._jit_set_profiling_executor(False); "
                               "torch._C._jit_set_profiling_mode(False)"))


def test_profiled_runs_set_after_load_fuse_after_them(models):
    """A count the user sets after loading stands: its profiled calls run unfused, the next is fused."""
    assert_fused(*run_seed_iou(models / "intersection.pt", after_load="torch._C._jit_set_num_profiled_runs(2)"),
                 from_call=2)


def test_profiled_runs_set_before_load_fuse_first_call(models):
    """Loading sets the count to 0 (first-call mode, docs/registration.md)."""
    assert_fused(*run_seed_iou(models / "intersection.pt", before_load="torch._C._jit_set_num_profiled_runs(2)"))


def test_texpr_fuser_off_fuses(models):
    assert_fused(*run_seed_iou(models / "intersection.pt", after_load="torch._C._jit_set_texpr_fuser_enabled(False)"))


def test_texpr_fuser_on_cpu_fuses(models):
    """Registered pre-passes run before torch's own fusers, so NNC finds tsfuse's op in their place."""
    assert_fused(*run_seed_iou(models / "intersection.pt", after_load="torch._C._jit_set_texpr_fuser_enabled(True); "
                               "torch._C._jit_override_can_fuse_on_cpu(True)"))


def test_inference_mode_fuses(models):
    assert_fused(*run_seed_iou(models / "intersection.pt", context="torch.inference_mode()"))


def test_no_grad_fuses(models):
    assert_fused(*run_seed_iou(models / "intersection.pt", context="torch.no_grad()"))
