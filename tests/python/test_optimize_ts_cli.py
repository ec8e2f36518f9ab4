"""optimize-ts options: --disable, --list-passes, --version, -q/-v/--log-level, --check inputs,
tolerances and mismatches."""
import json
import re
from typing import List, Tuple

import pytest
import torch
from torch import Tensor

from optimize_ts_util import assert_one_error_line, generate_seed_models, leftover_temps, run_tool, sha256

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    return generate_seed_models(tmp_path_factory.mktemp("seeds"))


def script_and_save(module, path):
    torch.jit.script(module).save(str(path))
    return path


class RandomTail(torch.nn.Module):
    """Not deterministic: the original and the optimized module can never agree (to test mismatches)."""

    def forward(self, x: Tensor) -> Tuple[Tensor, List[Tensor]]:
        return x, [x * 2 + torch.rand_like(x)]


class RandomScalar(torch.nn.Module):
    """A 0-dim output the original and the optimized module never agree on."""

    def forward(self, x: Tensor) -> Tensor:
        return (x * 2).sum() + torch.rand(())


class IntAndBool(torch.nn.Module):
    """Integer and bool inputs; a broadcast region for fuse_pairwise."""

    def forward(self, a: Tensor, b: Tensor, m: Tensor, scale: int = 3) -> Tensor:
        return torch.where(m[None, :], (a[:, None] - b[None, :]) * 3, a[:, None] + scale)


def graph_of(path, tsfuse_lib):
    return str(torch.jit.load(str(path)).graph)


# --- passes ---------------------------------------------------------------------------------------

def test_list_passes(optimize_ts):
    proc = run_tool(optimize_ts, "--list-passes")
    assert proc.returncode == 0 and proc.stderr == ""
    names = [line.split("\t")[0] for line in proc.stdout.splitlines()]
    assert names == ["inline", "seal_no_grad_blocks", "zero_dim_numbers", "unroll_accumulations", "canonicalize",
                     "prototype_casts",
                     "fold_upcast", "decompose", "count_selected", "split_cat_reductions", "reduce_transposed", "sink_reshapes", "sink_views",
                     "sink_into_branches",
                     "fuse_broadcast_reduce", "nest_reductions", "count_bool_sums",
                     "fuse_pairwise", "hoist_into_epilogue", "chain_fused_reductions", "fold_indices_epilogue",
                     "native_extrema", "cleanup", "note_stored_broadcasts", "snapshot_written_operands", "donate_operands", "full_slice_checks"]
    assert all(len(line.split("\t")) == 2 and line.split("\t")[1] for line in proc.stdout.splitlines())


def test_version(optimize_ts):
    proc = run_tool(optimize_ts, "--version")
    assert proc.returncode == 0
    assert "optimize-ts" in proc.stdout and torch.__version__.split("+")[0] in proc.stdout


def test_help_documents_exit_codes(optimize_ts):
    proc = run_tool(optimize_ts, "--help")
    assert proc.returncode == 0
    for text in ("--check", "--input-shape", "--disable", "--report", "Exit codes", "  3  input/output error",
                 "--enable", "--dry-run", "--explain", "--diff", "--html", "--device", "--color", "Examples:"):
        assert text in proc.stdout


def test_disable_reduce_leaves_pairwise(seeds, optimize_ts, tmp_path, tsfuse_lib):
    out, report = tmp_path / "s.pt", tmp_path / "s.json"
    # (count_bool_sums would count the stored compare in place: off too, the sum stays ATen's)
    proc = run_tool(optimize_ts, "-q", "--disable", "fuse_broadcast_reduce", "--disable", "count_bool_sums",
                    "--report", report, seeds["similarity"], out)
    assert proc.returncode == 0, proc.stderr
    graph = graph_of(out, tsfuse_lib)
    assert "tsfuse::reduce" not in graph and graph.count("tsfuse::pairwise") == 1 and "aten::sum" in graph
    stats = {p["name"]: p["rewrites"] for p in json.loads(report.read_text())["passes"]}
    assert stats == {"unroll_accumulations": 0, "prototype_casts": 0, "decompose": 0, "count_selected": 0, "split_cat_reductions": 0, "reduce_transposed": 0, "sink_reshapes": 0, "sink_into_branches": 0, "fuse_broadcast_reduce": 0, "nest_reductions": 0, "count_bool_sums": 0, "fuse_pairwise": 1, "hoist_into_epilogue": 0,
                     "chain_fused_reductions": 0, "fold_indices_epilogue": 0, "native_extrema": 0, "note_stored_broadcasts": 0}


def test_enable_runs_only_the_named_passes(seeds, optimize_ts, tmp_path, tsfuse_lib):
    out, report = tmp_path / "s.pt", tmp_path / "s.json"
    proc = run_tool(optimize_ts, "-q", "--enable", "inline", "--enable", "fuse_pairwise", "--report", report,
                    seeds["similarity"], out)
    assert proc.returncode == 0, proc.stderr
    graph = graph_of(out, tsfuse_lib)
    assert "tsfuse::reduce" not in graph and graph.count("tsfuse::pairwise") == 1
    stats = {p["name"]: p["rewrites"] for p in json.loads(report.read_text())["passes"]}
    assert stats == {"unroll_accumulations": 0, "prototype_casts": 0, "decompose": 0, "count_selected": 0, "split_cat_reductions": 0, "reduce_transposed": 0, "sink_reshapes": 0, "sink_into_branches": 0, "fuse_broadcast_reduce": 0, "nest_reductions": 0, "count_bool_sums": 0, "fuse_pairwise": 1, "hoist_into_epilogue": 0,
                     "chain_fused_reductions": 0, "fold_indices_epilogue": 0, "native_extrema": 0, "note_stored_broadcasts": 0}
    # without inline, forward's call to intersection() hides the region
    proc = run_tool(optimize_ts, "-q", "--enable", "fuse_pairwise", seeds["intersection"], tmp_path / "i.pt")
    assert proc.returncode == 0 and "tsfuse::" not in graph_of(tmp_path / "i.pt", tsfuse_lib)


def test_disable_both_fusions_changes_nothing(seeds, optimize_ts, tmp_path, tsfuse_lib):
    out = tmp_path / "s.pt"
    # the option may come before the positionals: it takes exactly one value
    proc = run_tool(optimize_ts, "-q", "--disable", "fuse_pairwise", "--disable", "fuse_broadcast_reduce",
                    "--disable", "count_bool_sums", seeds["similarity"], out)
    assert proc.returncode == 0, proc.stderr
    assert "tsfuse::" not in graph_of(out, tsfuse_lib)


def test_disable_inline_keeps_call_unfused(seeds, optimize_ts, tmp_path, tsfuse_lib):
    out = tmp_path / "i.pt"
    proc = run_tool(optimize_ts, "--disable", "inline", seeds["intersection"], out)
    assert proc.returncode == 0, proc.stderr
    graph = graph_of(out, tsfuse_lib)
    assert "prim::CallFunction" in graph and "tsfuse::" not in graph


# --- output and logging ---------------------------------------------------------------------------

def test_quiet_prints_nothing(seeds, optimize_ts, tmp_path):
    proc = run_tool(optimize_ts, "-q", "--check", seeds["intersection"], tmp_path / "o.pt")
    assert proc.returncode == 0 and proc.stdout == "" and proc.stderr == ""


class InPlaceAndRejected(torch.nn.Module):
    """fuse_pairwise rejects the broadcast region (its operand `a` is written in place between
    the region's reads), and canonicalize notes that it keeps a.add_ (a graph input) in place."""

    def forward(self, a: Tensor, b: Tensor) -> Tensor:
        d = (a[:, None] - b[None, :]).abs()
        a.add_(1)
        return d * a[:, None]


class ViewOfCandidate(torch.nn.Module):
    """sink_views cannot move the select out of the broadcast region: d is also used whole."""

    def forward(self, a: Tensor, b: Tensor) -> Tuple[Tensor, Tensor]:
        d = (a[:, None] - b[None, :]).abs()
        return d * 2, d.select(1, 0)


def test_summary_lists_candidates_not_in_place_notes(optimize_ts, tmp_path):
    model = script_and_save(InPlaceAndRejected(), tmp_path / "m.pt")
    proc = run_tool(optimize_ts, "--dry-run", model)
    assert proc.returncode == 0, proc.stderr
    rejects = [line for line in proc.stdout.splitlines() if line.lstrip().startswith("reject")]
    assert len(rejects) == 1 and "forward (fuse_pairwise): operand" in rejects[0], proc.stdout
    assert "aten::add_ kept" not in proc.stdout
    assert "  1 note(s) from canonicalize not listed (--verbose or --explain lists them)" in proc.stdout
    verbose = run_tool(optimize_ts, "-v", "--dry-run", model)
    assert "forward (canonicalize): in-place aten::add_ kept" in verbose.stdout
    assert "not listed" not in verbose.stdout


def test_summary_lists_views_that_block_a_candidate(optimize_ts, tmp_path):
    model, report = script_and_save(ViewOfCandidate(), tmp_path / "m.pt"), tmp_path / "r.json"
    proc = run_tool(optimize_ts, "--dry-run", "--report", report, model)
    assert proc.returncode == 0, proc.stderr
    events = json.loads(report.read_text())["events"]
    sink = [e for e in events if e["pass"] == "sink_views" and e["kind"] == "reject"]
    assert len(sink) == 1 and "also used by" in sink[0]["reason"]
    if not sink[0]["node_ids"]:
        pytest.skip("sink_views rejections carry no node_ids in this build: the summary cannot tie them to a candidate")
    fused = [e for e in events if e["pass"] == "fuse_pairwise" and e["kind"] == "rewrite"]
    assert set(sink[0]["node_ids"]) & set(fused[0]["node_ids"])  # d's producer is in the fused region
    assert "forward (sink_views): " + sink[0]["reason"] in proc.stdout


def test_nothing_to_fuse_is_one_line(seeds, optimize_ts):
    proc = run_tool(optimize_ts, "--dry-run", seeds["nothing_to_fuse"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[1:] == ["  nothing to fuse: no fusion candidate in 'forward'"]
    proc = run_tool(optimize_ts, "--dry-run", seeds["intersection"])
    assert "  nothing to fuse in 1 other method(s): example_inputs" in proc.stdout.splitlines()


class ExpandedPairwiseDistance(torch.nn.Module):
    """k-means assignment as libraries write it: both sides expanded and flattened for
    F.pairwise_distance, the distances viewed back and reduced. sink_reshapes moves the flattening
    past the distance: one fused op, no copy stored, nothing to name."""

    def forward(self, x: Tensor, c: Tensor) -> Tensor:
        n, k, d = x.size(0), c.size(0), x.size(1)
        xe = x[:, None, :].expand(n, k, d).reshape(-1, d)
        ce = c[None, :, :].expand(n, k, d).reshape(-1, d)
        return torch.nn.functional.pairwise_distance(xe, ce).view(n, k).argmin(1)


class ExpandedProjection(torch.nn.Module):
    """Every pair's x row, expanded and flattened, then projected: the matmul reads the copy, which
    is stored in full, and named."""

    def forward(self, x: Tensor, c: Tensor, w: Tensor) -> Tensor:
        n, k, d = x.size(0), c.size(0), x.size(1)
        xe = x[:, None, :].expand(n, k, d).reshape(-1, d)
        return xe.matmul(w)


def test_flattened_pairs_fuse_whole(optimize_ts, tmp_path):
    path = script_and_save(ExpandedPairwiseDistance(), tmp_path / "kmeans.pt")
    proc = run_tool(optimize_ts, "--dry-run", path)
    assert proc.returncode == 0, proc.stderr
    assert "rewrite  forward: tsfuse::reduce_chain" in proc.stdout and "norm:2.0" in proc.stdout, proc.stdout
    assert "(note_stored_broadcasts)" not in proc.stdout, proc.stdout


def test_a_stored_broadcast_is_named_not_nothing_to_fuse(optimize_ts, tmp_path):
    path = script_and_save(ExpandedProjection(), tmp_path / "projection.pt")
    proc = run_tool(optimize_ts, "--dry-run", path)
    assert proc.returncode == 0, proc.stderr
    assert "nothing to fuse: no fusion candidate" not in proc.stdout, proc.stdout
    notes = [line for line in proc.stdout.splitlines() if "(note_stored_broadcasts)" in line]
    assert len(notes) == 1, proc.stdout
    assert notes[0].startswith("  reject   forward (note_stored_broadcasts): aten::reshape @ ")
    assert "copies the broadcast aten::expand @ " in notes[0] and "made, so the expanded value is stored" in notes[0]


def test_verbose_logs_rewrites(seeds, optimize_ts, tmp_path):
    proc = run_tool(optimize_ts, "-q", "-v", seeds["intersection"], tmp_path / "o.pt")
    assert proc.returncode == 0
    assert "[tsfuse.pass]" in proc.stderr and "tsfuse::pairwise" in proc.stderr
    quiet = run_tool(optimize_ts, "-q", "--log-level", "error", seeds["intersection"], tmp_path / "o2.pt")
    assert quiet.returncode == 0 and quiet.stderr == ""


def test_check_runs_the_original_unfused(seeds, optimize_ts, tmp_path):
    # libtsfuse's executor pre-pass would fuse the original at its first call ("executor" graph)
    proc = run_tool(optimize_ts, "-q", "--check", seeds["similarity"], tmp_path / "o.pt",
                    env={"TSFUSE_LOG_LEVEL": "info"})
    assert proc.returncode == 0, proc.stderr
    assert "of 'forward'" in proc.stderr  # the explicit rewrite is logged...
    assert "'executor'" not in proc.stderr  # ...and nothing else got fused


def test_the_models_extra_files_are_kept(optimize_ts, tmp_path, tsfuse_lib):
    # torch.jit.save(..., _extra_files=...) metadata (labels, versions) was dropped from OUT.pt
    src = tmp_path / "in.pt"
    files = {"meta.json": '{"version": 3}', "labels.txt": "person\ncar\n", "empty": ""}
    torch.jit.save(torch.jit.script(IntAndBool()), str(src), _extra_files=files)
    proc = run_tool(optimize_ts, "-q", src, tmp_path / "out.pt")
    assert proc.returncode == 0, proc.stderr
    got = dict.fromkeys(files, "")
    torch.jit.load(str(tmp_path / "out.pt"), _extra_files=got)
    assert got == {k: v.encode() for k, v in files.items()}
    assert "tsfuse::" in graph_of(tmp_path / "out.pt", tsfuse_lib)


def test_an_output_name_near_the_name_limit(optimize_ts, tmp_path, tsfuse_lib):
    # The temp file (".NAME.tmp-XXXXXX") passed the 255-byte limit where OUT's own name did not
    src = script_and_save(IntAndBool(), tmp_path / "in.pt")
    dst = tmp_path / ("m" * 247 + ".opt.pt")  # 254 bytes
    proc = run_tool(optimize_ts, "-q", src, dst)
    assert proc.returncode == 0, proc.stderr
    assert "tsfuse::" in graph_of(dst, tsfuse_lib)
    assert leftover_temps(tmp_path) == []


# --- --check inputs and mismatches ------------------------------------------------------------------

def test_check_mismatch(optimize_ts, tmp_path):
    model = script_and_save(RandomTail(), tmp_path / "rand.pt")
    before = sha256(model)
    out, report = tmp_path / "out.pt", tmp_path / "r.json"
    out.write_bytes(b"previous")
    proc = run_tool(optimize_ts, "--check", "--input-shape", "x:3,4@float64", "--report", report, model, out)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("optimize-ts: check failed: output[1][0]: ")
    assert "12 of 12 values of float64[3, 4] differ, max abs diff" in lines[0]
    assert "check: FAILED" in proc.stdout
    assert out.read_bytes() == b"previous"  # not replaced by a module that failed its check
    assert leftover_temps(tmp_path) == [] and sha256(model) == before
    doc = json.loads(report.read_text())
    assert doc["output_written"] is False and doc["check"]["passed"] is False
    assert doc["check"]["differences"][0]["where"] == "output[1][0]"
    assert 0 < doc["check"]["max_abs_diff"] < 1


def test_check_mismatch_of_a_0_dim_output(optimize_ts, tmp_path):
    # The report of a differing 0-dim value indexed it with an empty index list and raised, so
    # optimize-ts said "internal error" instead of naming the value (seen on a corpus run).
    model = script_and_save(RandomScalar(), tmp_path / "rand.pt")
    proc = run_tool(optimize_ts, "--check", "--input-shape", "x:3,4@float64", model, tmp_path / "out.pt")
    assert proc.returncode == 1, proc.stderr
    assert "internal error" not in proc.stderr
    assert "1 of 1 values of float64[] differ" in proc.stderr and ": expected " in proc.stderr


def test_check_n_compares_n_input_sets(seeds, optimize_ts, tmp_path):
    report = tmp_path / "r.json"
    proc = run_tool(optimize_ts, "--check=3", "--device", "cpu", "--report", report, seeds["intersection"],
                    tmp_path / "o.pt")
    assert proc.returncode == 0, proc.stderr
    check = json.loads(report.read_text())["check"]
    assert check["passed"] and check["runs"] == 3 and check["tensors_compared"] == 3 and check["device"] == "cpu"
    # each later run draws new inputs: a module that is never equal differs in every run
    model = script_and_save(RandomTail(), tmp_path / "rand.pt")
    proc = run_tool(optimize_ts, "-q", "--check=2", "--input-shape", "x:3,4", model, tmp_path / "r.pt")
    assert proc.returncode == 1
    wheres = [l.split(": ")[2] for l in proc.stderr.splitlines()]
    assert wheres == ["output[1][0]", "run 1"], proc.stderr


def test_check_reports_steady_state_medians(seeds, optimize_ts, tmp_path):
    report = tmp_path / "r.json"
    proc = run_tool(optimize_ts, "--check", "--dry-run", "--report", report, seeds["similarity"])
    assert proc.returncode == 0, proc.stderr
    timing = json.loads(report.read_text())["check"]["timing"]
    assert timing["warmup_calls"] == 2 and 3 <= timing["timed_calls"] <= 10
    assert all(timing[k] > 0 for k in ("original_median_ms", "optimized_median_ms", "original_first_call_ms",
                                       "optimized_first_call_ms"))
    line = [l for l in proc.stdout.splitlines() if l.startswith("  time: ")]
    t = r"[\d.]+ [mu]s"
    assert len(line) == 1 and re.fullmatch(
        rf"  time: original {t}, optimized {t} \(median of {timing['timed_calls']} calls after 2 "
        rf"warm-up calls\); first call {t}, {t}", line[0]), proc.stdout


def test_check_tolerance_flags(optimize_ts, tmp_path):
    model = script_and_save(RandomTail(), tmp_path / "rand.pt")
    # x*2 + U[0,1) vs x*2 + U[0,1): the difference is below 1
    proc = run_tool(optimize_ts, "-q", "--check", "--input-shape", "x:3,4", "--atol", "1", "--rtol", "0",
                    model, tmp_path / "out.pt")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out.pt").exists()


def test_check_input_shape_dtypes_and_defaults(optimize_ts, tmp_path, tsfuse_lib):
    model = script_and_save(IntAndBool(), tmp_path / "ib.pt")
    out, report = tmp_path / "out.pt", tmp_path / "r.json"
    proc = run_tool(optimize_ts, "--check", "--report", report, "--input-shape", "a:6@int64",
                    "--input-shape", "b:5@int64", "--input-shape", "m:5@bool", model, out)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(report.read_text())
    assert doc["check"]["inputs"] == ["a: int64[6]", "b: int64[5]", "m: bool[5]"]
    assert doc["check"]["inputs_from"] == "--input-shape"
    assert "tsfuse::pairwise" in graph_of(out, tsfuse_lib)


def test_check_needs_input_shapes(seeds, optimize_ts, tmp_path):
    out = tmp_path / "o.pt"
    proc = run_tool(optimize_ts, "--check", seeds["nothing_to_fuse"], out)
    assert_one_error_line(proc, 2, "'a'", "--input-shape a:")
    assert not out.exists() and leftover_temps(tmp_path) == []


def test_check_bad_input_shape_for_forward(seeds, optimize_ts, tmp_path):
    # the shapes do not multiply: the ORIGINAL fails on them -> usage error, nothing written
    out = tmp_path / "o.pt"
    proc = run_tool(optimize_ts, "--check", "--input-shape", "a:2,3", "--input-shape", "b:4,5",
                    seeds["nothing_to_fuse"], out)
    assert_one_error_line(proc, 2, "original module's forward fails", "cannot be multiplied")
    assert not out.exists() and leftover_temps(tmp_path) == []


class NeedsInt(torch.nn.Module):
    def forward(self, x: Tensor, k: int) -> Tensor:
        return x * k


def test_check_non_tensor_argument_without_default(optimize_ts, tmp_path):
    model = script_and_save(NeedsInt(), tmp_path / "k.pt")
    out = tmp_path / "o.pt"
    proc = run_tool(optimize_ts, "--check", "--input-shape", "x:3", model, out)
    assert_one_error_line(proc, 2, "'k'", "without a default")
    proc = run_tool(optimize_ts, "--check", "--input-shape", "x:3", "--input-shape", "k:1", model, out)
    assert_one_error_line(proc, 2, "'k'", "not a Tensor")
    assert not out.exists() and leftover_temps(tmp_path) == []


class RaisingExamples(torch.nn.Module):
    def forward(self, x: Tensor) -> Tensor:
        return x * 2

    @torch.jit.export
    def example_inputs(self) -> Tuple[Tensor]:
        raise RuntimeError("no examples here")


class MismatchedExamples(torch.nn.Module):
    def forward(self, a: Tensor, b: Tensor) -> Tensor:
        return torch.matmul(a, b)

    @torch.jit.export
    def example_inputs(self) -> Tuple[Tensor, Tensor]:
        return torch.ones(2, 3), torch.ones(4, 5)


@pytest.mark.parametrize("cls,fragment", [(RaisingExamples, "no examples here"),
                                          (MismatchedExamples, "cannot be multiplied")])
def test_check_broken_example_inputs_is_an_input_error(optimize_ts, tmp_path, cls, fragment):
    model = script_and_save(cls(), tmp_path / "m.pt")
    out = tmp_path / "o.pt"
    proc = run_tool(optimize_ts, "--check", model, out)
    assert_one_error_line(proc, 3, fragment)
    assert not out.exists() and leftover_temps(tmp_path) == []
