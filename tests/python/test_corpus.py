"""The real-model corpus (bench/corpus/entries.py) end to end, at small sizes: torchvision models
and box functions, and pairwise distance / kernel functions of seven other PyTorch libraries from
PyPI (pinned in pypi_deps.py, installed into BUILD/test-deps/).

For every entry:
  * `optimize-ts --check` passes on the saved scripted/traced module (--library torchvision/_C.so
    for the detectors), and the optimized graph holds the expected fused ops (entry.fused);
  * load-time optimization (libtsfuse loaded, the unmodified .pt loaded and called twice) gives
    outputs torch.equal to eager's, or, where a fused float reduction sums in another order
    and removes a broadcast intermediate (entry.reorders), outputs within entries.TOLERANCE;
  * every fused program runs compiled code (torch.ops.tsfuse.path_counts(): no tile interpreted
    whole, no ATen op on a tile unless entry.aten_on_tiles says why);
  * training (every entry but the detectors): with its float inputs and parameters requiring grad,
    the gradients through the load-time-fused module are eager's within 1e-4 of the largest
    (fused sums reorder; NaN and infinities where eager's are), or, where unfused TorchScript's
    own gradients differ from eager's (a trace drops a `with torch.no_grad()`), that module's; an
    entry that fuses executes a fused op with grad enabled;
  * do no harm: the fused run differs from eager no more than the unfused TorchScript run does,
    except where a reordered reduction removes a broadcast intermediate (entry.reorders). A fused
    float reduction of a value no larger than its operands (the row norms `x.pow(2).sum(-1)`
    around a matmul expansion) runs ATen's kernels at call time, so it must be torch.equal.

The heavy lifting runs in two subprocesses of bench/corpus/worker.py (export without libtsfuse,
then load-time with it) and one optimize-ts per entry, two at a time.
"""
import concurrent.futures
import json
import pathlib
import subprocess
import sys

import pytest
import torch

import pypi_deps
from conftest import LIB
from optimize_ts_util import SOURCE, run_tool

sys.path.insert(0, str(SOURCE / "bench" / "corpus"))
import entries  # noqa: E402
import worker  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

NAMES = [e.name for e in entries.ENTRIES]


def _worker(env, *args, timeout):
    proc = subprocess.run([sys.executable, str(SOURCE / "bench" / "corpus" / "worker.py"), *map(str, args)],
                          capture_output=True, text=True, env=env, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return {r["name"]: r for r in rows}


def _optimize(optimize_ts, tv_lib, folder, entry):
    stem = folder / worker.slug(entry.name)
    args = ["--check" if entry.check_runs == 1 else f"--check={entry.check_runs}",
            "--report", f"{stem}.json", f"{stem}.pt", f"{stem}.opt.pt"]
    if entry.needs_torchvision_ops:
        args = ["--library", tv_lib] + args
    return run_tool(optimize_ts, *args, timeout=600)


@pytest.fixture(scope="module")
def corpus(torchvision_path, optimize_ts, tmp_path_factory):
    env = pypi_deps.torchvision_env(torchvision_path, pypi_deps.corpus_dir())
    folder = tmp_path_factory.mktemp("corpus")
    exported = _worker(env, "export", "--size", "test", folder, timeout=900)
    tv_lib = torchvision_path / "torchvision" / "_C.so"
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        procs = dict(zip(NAMES, pool.map(lambda e: _optimize(optimize_ts, tv_lib, folder, e), entries.ENTRIES)))
    loadtime = _worker(env, "loadtime", "--lib", LIB, folder, timeout=900)
    return exported, procs, loadtime, folder, env


@pytest.fixture(scope="module")
def trained(corpus):
    """Each entry trained once through unfused TorchScript and once through the load-time hook
    (worker.py train): (folder, rows without libtsfuse, rows with it)."""
    folder, env = corpus[3], corpus[4]
    unfused = _worker(env, "train", "--tag", "unfused", folder, timeout=900)
    fused = _worker(env, "train", "--lib", LIB, "--tag", "fused", folder, timeout=900)
    return folder, unfused, fused


def test_corpus_size():
    """The first corpus: >= 20 functions from >= 4 libraries besides torchvision, and torchvision
    models: a classifier, two detectors, a model with an IoU matcher; scripted and traced. The
    second: >= 20 functions from >= 6 libraries the first does not use."""
    first = [e for e in entries.ENTRIES if e.corpus == "first"]
    others = [e for e in first if e.library != "torchvision"]
    assert len(others) >= 20 and len({e.library for e in others}) >= 4
    models = [e for e in first if e.library == "torchvision" and e.kind == "model"]
    assert sum(e.needs_torchvision_ops for e in models) >= 2 and any("Matcher" in e.name for e in models)
    assert {e.mode for e in first} == {"script", "trace"}
    second = [e for e in entries.ENTRIES if e.corpus == "second"]
    assert len(second) >= 20 and len({e.library for e in second}) >= 6
    assert not {e.library for e in second} & {e.library for e in first}


@pytest.mark.parametrize("name", NAMES)
def test_optimize_ts_check(corpus, name):
    proc = corpus[1][name]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "check: passed" in proc.stdout


@pytest.mark.parametrize("name", NAMES)
def test_fused_ops(corpus, name):
    e, row = entries.BY_NAME[name], corpus[2][name]
    assert row["optimize_ts_ops"] == e.fused
    want = e.fused if e.fused_loadtime is None else e.fused_loadtime
    assert row["loadtime_ops"] == want and row["loadtime_ops_second_call"] == want


@pytest.mark.parametrize("name", NAMES)
def test_loadtime_fuses_the_regions_optimize_ts_fuses(corpus, name):
    """Load time = offline: the executed graph holds the same distinct fused regions as the
    optimize-ts output (worker.fused_regions: kind and source line), whatever number of copies the
    executor's loop unrolling makes; a region only the executor's unrolling creates is listed by
    the entry (loadtime_extra)."""
    e, row = entries.BY_NAME[name], corpus[2][name]
    offline, loaded = set(row["optimize_ts_regions"]), set(row["loadtime_regions"])
    assert set(row["loadtime_regions_second_call"]) == loaded
    assert not offline - loaded, sorted(offline - loaded)
    extra = sorted(loaded - offline)
    assert len(extra) == len(e.loadtime_extra), extra
    for region, where in zip(extra, sorted(e.loadtime_extra)):
        assert region.endswith(where), (region, where)


@pytest.mark.parametrize("name", NAMES)
def test_loadtime_outputs_equal_eager(corpus, name):
    e, row = entries.BY_NAME[name], corpus[2][name]
    assert corpus[0][name]["script_vs_eager"] == 0  # the unfused TorchScript run is eager's
    if e.reorders:
        assert row["within_tolerance"], row
    else:
        assert row["equal"], row


@pytest.mark.parametrize("name", NAMES)
def test_fused_programs_run_compiled_code(corpus, name):
    """Every fused program runs compiled code: no tile evaluated whole by the tile interpreter, and
    no ATen op called on a tile, except where the entry says why (entry.interpreted,
    entry.aten_on_tiles)."""
    e, counts = entries.BY_NAME[name], corpus[2][name]["path_counts"]
    if e.interpreted:
        assert counts["interpreted_tiles"] > 0, f"no interpreted tile any more: drop interpreted ({counts})"
    else:
        assert counts["interpreted_tiles"] == 0, counts
    if e.aten_on_tiles:
        assert counts["aten_tile_ops"] > 0, f"no ATen op on tiles any more: drop aten_on_tiles ({counts})"
    else:
        assert counts["aten_tile_ops"] == 0, counts


@pytest.mark.parametrize("name", NAMES)
def test_no_worse_than_unfused_torchscript(corpus, name):
    e, row = entries.BY_NAME[name], corpus[2][name]
    if e.reorders:
        pytest.skip(f"reordered reduction that removes a broadcast intermediate: {e.reorders}")
    assert row["fused_vs_eager"] <= row["script_vs_eager"], row


TRAINED = [e.name for e in entries.ENTRIES if not e.needs_torchvision_ops]


@pytest.mark.parametrize("name", TRAINED)
def test_training_gradients(trained, name):
    folder, unfused, fused = trained
    row = fused[name]
    assert row["trainable"] == unfused[name]["trainable"]
    if not row["trainable"]:
        return  # (no output requires grad: a matcher's indices, a mask)
    assert "error" not in row, row["error"]  # (unfused TorchScript may raise where eager does not)
    if entries.BY_NAME[name].fused:
        assert row["fused_ops"], "no fused op executed with grad enabled"
    f = torch.load(str(folder / f"{worker.slug(name)}.grads.fused.pt"), weights_only=False)
    u = torch.load(str(folder / f"{worker.slug(name)}.grads.unfused.pt"), weights_only=False)
    script_grads = u["module"] or [None] * len(f["eager"])
    for k, (want, got, script) in enumerate(zip(f["eager"], f["module"], script_grads)):
        assert worker.same_gradient(got, want) or (script is not None and worker.same_gradient(got, script)), (
            f"gradient {k}: fused vs eager max {float((got - want).abs().nan_to_num(0).max())}, "
            f"unfused TorchScript: {unfused[name].get('error') or float((script - want).abs().nan_to_num(0).max())}")
