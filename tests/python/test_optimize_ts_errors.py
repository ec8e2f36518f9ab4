"""optimize-ts error paths: exit code, ONE 'optimize-ts: error: ' line on stderr, no OUT and no
leftover temp file, the input's bytes unchanged."""
import os
import pathlib
import random
import re
import zipfile

import pytest
import torch

from optimize_ts_util import assert_one_error_line, generate_seed_models, leftover_temps, run_tool, sha256

USAGE, IO = 2, 3
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A valid seed model in a folder of its own (the tests never write there)."""
    return generate_seed_models(tmp_path_factory.mktemp("seeds"))["similarity"]


@pytest.fixture
def work(tmp_path):
    d = tmp_path / "work"
    d.mkdir()
    return d


def assert_failed_cleanly(proc, code, out, inputs_before=(), *fragments):
    """Exit code + one error line; OUT absent; no temp file next to OUT; inputs unchanged."""
    line = assert_one_error_line(proc, code, *fragments)
    assert proc.stdout == ""
    out = pathlib.Path(out)
    assert not out.exists() or out.is_dir()
    if out.parent.is_dir():
        assert leftover_temps(out.parent) == []
    for path, digest in inputs_before:
        assert sha256(path) == digest, f"{path} was modified"
    return line


# --- bad inputs (exit 3) ------------------------------------------------------------------------

def test_missing_input(optimize_ts, work):
    out = work / "out.pt"
    proc = run_tool(optimize_ts, work / "nope.pt", out)
    assert_failed_cleanly(proc, IO, out, (), "nope.pt", "No such file")


def test_input_is_a_directory(optimize_ts, work):
    (work / "dir.pt").mkdir()
    out = work / "out.pt"
    proc = run_tool(optimize_ts, work / "dir.pt", out)
    assert_failed_cleanly(proc, IO, out, (), "is a directory")


def test_empty_input(optimize_ts, work):
    empty = work / "empty.pt"
    empty.write_bytes(b"")
    out = work / "out.pt"
    proc = run_tool(optimize_ts, empty, out)
    assert_failed_cleanly(proc, IO, out, [(empty, sha256(empty))], "empty")


@pytest.mark.parametrize("kind", ["garbage", "truncated", "state_dict", "plain_zip"])
def test_corrupt_or_not_torchscript(optimize_ts, work, model, kind):
    bad = work / f"{kind}.pt"
    if kind == "garbage":
        bad.write_bytes(b"\x00not a torchscript archive\xff" * 10)
    elif kind == "truncated":
        data = model.read_bytes()
        bad.write_bytes(data[: len(data) // 2])
    elif kind == "state_dict":
        torch.save({"w": torch.ones(3)}, str(bad))
    else:
        with zipfile.ZipFile(bad, "w") as z:
            z.writestr("hello.txt", "not a model")
    before = sha256(bad)
    out = work / "out.pt"
    proc = run_tool(optimize_ts, bad, out)
    line = assert_failed_cleanly(proc, IO, out, [(bad, before)], "cannot load", "as a TorchScript module")
    assert "Traceback" not in line and "Exception raised from" not in line


@pytest.mark.parametrize("seed", range(6))
def test_random_bytes(optimize_ts, work, seed):
    bad = work / f"random{seed}.pt"
    rng = random.Random(seed)
    bad.write_bytes(bytes(rng.getrandbits(8) for _ in range(rng.choice([1, 7, 22, 512, 4096, 65536]))))
    before = sha256(bad)
    out = work / "out.pt"
    proc = run_tool(optimize_ts, bad, out)
    assert_failed_cleanly(proc, IO, out, [(bad, before)], "cannot load", "as a TorchScript module")


def rewrite_code(src, dst, edit):
    """Copies the TorchScript zip `src` to `dst`, passing the text of its code/__torch__.py through edit."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename.endswith("code/__torch__.py"):
                data = edit(data.decode()).encode()
            zout.writestr(info, data)


def test_torchscript_with_unknown_op(optimize_ts, work, model):
    bad = work / "unknown_op.pt"

    def edit(code):
        new, n = re.subn(r"torch\.(\w+)\(", "ops.tsfuse_nosuch.frobnicate(", code, count=1)
        assert n == 1, code
        return new

    rewrite_code(model, bad, edit)
    before = sha256(bad)
    out = work / "out.pt"
    proc = run_tool(optimize_ts, bad, out)
    line = assert_failed_cleanly(proc, IO, out, [(bad, before)], "cannot load", "tsfuse_nosuch::frobnicate",
                                 "'tsfuse_nosuch' ops come from an extension library", "--library PATH")
    assert "torchvision" not in line  # the pip location is said for torchvision's namespace only


@pytest.mark.parametrize("kind", ["missing", "directory", "not_a_library", "missing_via_environment"])
def test_library_that_cannot_be_loaded(optimize_ts, work, model, kind):
    """Checked before the model is read: a bad --library (or TSFUSE_LIBRARIES entry) is an input error."""
    (work / "dir.so").mkdir()
    (work / "text.so").write_text("not a shared library\n" * 100)
    path, fragment = {"missing": (work / "nope.so", "no such file"),
                      "directory": (work / "dir.so", "not a regular file"),
                      "not_a_library": (work / "text.so", "invalid ELF header"),
                      "missing_via_environment": (work / "nope.so", "no such file")}[kind]
    out = work / "out.pt"
    if kind.endswith("environment"):
        proc = run_tool(optimize_ts, model, out, env={"TSFUSE_LIBRARIES": f"::{path}"})
    else:
        proc = run_tool(optimize_ts, "--library", path, model, out)
    assert_failed_cleanly(proc, IO, out, [(model, sha256(model))], str(path), fragment)


def test_torchscript_with_garbled_code(optimize_ts, work, model):
    bad = work / "garbled.pt"
    rewrite_code(model, bad, lambda code: code + "\ndef broken(self:\n    return ((\n")
    before = sha256(bad)
    out = work / "out.pt"
    proc = run_tool(optimize_ts, bad, out)
    assert_failed_cleanly(proc, IO, out, [(bad, before)], "cannot load")


def test_torchscript_with_damaged_debug_info(optimize_ts, work, model):
    """The source ranges (code/*.debug_pkl) load lazily: torch.jit.load succeeds and the first graph
    print unpickles them. A damaged one is an input error (3) found at load, not an internal error
    (found as mutant 19 of the test below on another checkout path)."""
    bad = work / "debug_info.pt"
    with zipfile.ZipFile(model) as zin, zipfile.ZipFile(bad, "w") as zout:
        damaged = 0
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename.endswith(".debug_pkl"):
                data = data[:2] + b"\x01" * (len(data) - 2)  # protocol header, then unknown opcodes
                damaged += 1
            zout.writestr(info, data)
    assert damaged >= 1
    before = sha256(bad)
    out = work / "out.pt"
    proc = run_tool(optimize_ts, bad, out)
    assert_failed_cleanly(proc, IO, out, [(bad, before)], "cannot load", "unpickling")


MUTANTS = 30


def test_mutated_models_fail_cleanly_or_optimize(optimize_ts, work, model, tsfuse_lib):
    """Seeded mutants of a valid model (truncations, byte flips, zeroed spans): each either
    optimizes (exit 0, OUT loads) or fails with exit 3 and one line; never a crash or exit 4."""
    data = model.read_bytes()
    rng = random.Random(1234)
    outcomes = {0: 0, IO: 0}
    for k in range(MUTANTS):
        m = bytearray(data)
        kind = k % 3
        if kind == 0:
            m = m[: rng.randrange(1, len(m))]
        elif kind == 1:
            for _ in range(rng.randint(1, 8)):
                m[rng.randrange(len(m))] = rng.getrandbits(8)
        else:
            at = rng.randrange(len(m))
            m[at:at + rng.randint(1, 64)] = bytes(min(64, len(m) - at))
        bad = work / f"mutant{k}.pt"
        bad.write_bytes(bytes(m))
        before = sha256(bad)
        out = work / f"mutant{k}.opt.pt"
        proc = run_tool(optimize_ts, "-q", bad, out)
        assert proc.returncode in (0, IO), (k, proc.returncode, proc.stderr)
        assert sha256(bad) == before
        assert leftover_temps(work) == []
        if proc.returncode == 0:
            torch.jit.load(str(out))
        else:
            assert_one_error_line(proc, IO)
            assert not out.exists()
        outcomes[proc.returncode] += 1
    assert outcomes[IO] > 0, outcomes


# --- bad outputs (exit 3) -----------------------------------------------------------------------

def test_output_folder_missing(optimize_ts, model, work):
    before = sha256(model)
    out = work / "missing" / "out.pt"
    proc = run_tool(optimize_ts, model, out)
    assert_failed_cleanly(proc, IO, out, [(model, before)], "does not exist")
    assert not out.parent.exists()


def unwritable_folder(work):
    d = work / "readonly"
    d.mkdir()
    d.chmod(0o555)
    if os.access(d, os.W_OK):  # root: permissions do not stop it; /proc takes no new files
        return pathlib.Path("/proc")
    return d


def test_output_folder_not_writable(optimize_ts, model, work):
    before = sha256(model)
    folder = unwritable_folder(work)
    out = folder / "tsfuse-optimize-ts-test.pt"
    try:
        proc = run_tool(optimize_ts, model, out)
        assert_failed_cleanly(proc, IO, out, [(model, before)], str(folder))
    finally:
        (work / "readonly").chmod(0o755)
    assert list((work / "readonly").iterdir()) == []


def test_output_is_a_directory(optimize_ts, model, work):
    before = sha256(model)
    (work / "outdir").mkdir()
    for out in (work / "outdir", str(work / "outdir") + "/"):
        proc = run_tool(optimize_ts, model, out)
        assert_failed_cleanly(proc, IO, out, [(model, before)], "directory")
    assert list((work / "outdir").iterdir()) == [] and leftover_temps(work) == []


def test_output_is_the_input(optimize_ts, model, work):
    src = work / "in.pt"
    src.write_bytes(model.read_bytes())
    before = sha256(src)
    (work / "link.pt").symlink_to(src.name)
    os.link(src, work / "hard.pt")
    stat_before = src.stat()
    (work / "sub").mkdir()
    for out in (src, f"{work}/./in.pt", f"{work}/sub/../in.pt", work / "link.pt", work / "hard.pt"):
        proc = run_tool(optimize_ts, src, out)
        line = assert_one_error_line(proc, IO, "is the input file")
        assert sha256(src) == before, line
    assert src.stat().st_mtime_ns == stat_before.st_mtime_ns
    assert leftover_temps(work) == []


def test_report_in_missing_folder_writes_nothing(optimize_ts, model, work):
    before = sha256(model)
    out = work / "out.pt"
    proc = run_tool(optimize_ts, "--report", work / "missing" / "r.json", model, out)
    assert_failed_cleanly(proc, IO, out, [(model, before)], "report")


def test_report_is_the_input(optimize_ts, model, work):
    src = work / "in.pt"
    src.write_bytes(model.read_bytes())
    before = sha256(src)
    out = work / "out.pt"
    proc = run_tool(optimize_ts, "--report", src, src, out)
    assert_failed_cleanly(proc, IO, out, [(src, before)], "is the input file")


def test_existing_output_replaced_whole(optimize_ts, model, work, tsfuse_lib):
    out = work / "out.pt"
    out.write_bytes(b"old contents")
    proc = run_tool(optimize_ts, "-q", model, out)
    assert proc.returncode == 0, proc.stderr
    assert "tsfuse::reduce" in str(torch.jit.load(str(out)).graph)
    assert leftover_temps(work) == []


# --- usage errors (exit 2) ----------------------------------------------------------------------

@pytest.mark.parametrize("args,fragment", [
    (["--bogus"], "--bogus"),
    (["--disable", "no_such_pass"], "no_such_pass"),
    (["--disable", "fuse_pairwise", "--disable", "Fuse_Pairwise"], "Fuse_Pairwise"),
    (["--input-shape", "x:1"], "--check"),
    (["--atol", "1"], "--check"),
    (["--check", "--input-shape", "x:1,a"], "bad dimension"),
    (["--check", "--input-shape", "x"], "NAME:D1,D2"),
    (["--check", "--input-shape", "x:2@float33"], "unknown dtype 'float33'"),
    (["--check", "--input-shape", "q:2"], "no such argument"),
    (["--check", "--input-shape", "x:2", "--input-shape", "x:3"], "twice"),
    (["--check", "--rtol", "-1"], "--rtol"),
    (["--log-level", "loud"], "loud"),
    (["-v", "--log-level", "info"], "excludes"),
    (["--enable", "no_such_pass"], "no_such_pass"),
    (["--enable", "inline", "--disable", "cleanup"], "excludes"),
    (["--check=0"], "--check"),
    (["--device", "cpu"], "--check"),
    (["--check", "--device", "tpu"], "expected cpu, cuda or cuda:N"),
    (["--color", "sometimes", "--diff"], "sometimes"),
    (["--html", "x.html", "--report", "x.html"], "also the"),
])
def test_usage_errors(optimize_ts, model, work, args, fragment):
    before = sha256(model)
    out = work / "out.pt"
    proc = run_tool(optimize_ts, *args, model, out)
    assert_failed_cleanly(proc, USAGE, out, [(model, before)], fragment)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_device_cuda_without_cuda(optimize_ts, model, work):
    out = work / "out.pt"
    proc = run_tool(optimize_ts, "--check", "--device", "cuda", model, out)
    assert_failed_cleanly(proc, USAGE, out, [], "CUDA is not available")


def test_html_in_missing_folder_writes_nothing(optimize_ts, model, work):
    out = work / "out.pt"
    proc = run_tool(optimize_ts, "--html", work / "missing" / "v.html", model, out)
    assert_failed_cleanly(proc, IO, out, [], "html")


def test_missing_positionals(optimize_ts, model, work):
    assert_one_error_line(run_tool(optimize_ts), USAGE, "IN.pt and OUT.pt")
    assert_one_error_line(run_tool(optimize_ts, model), USAGE, "IN.pt and OUT.pt")
    assert_one_error_line(run_tool(optimize_ts, model, work / "a.pt", work / "b.pt"), USAGE)
    assert list(work.iterdir()) == []
