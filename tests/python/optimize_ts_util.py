"""Helpers shared by the optimize-ts tests (imported by test_optimize_ts_*.py; fixtures there)."""
import hashlib
import os
import pathlib
import subprocess
import sys

SOURCE = pathlib.Path(os.environ.get("TSFUSE_SOURCE", pathlib.Path(__file__).resolve().parents[2]))
EXAMPLES = SOURCE / "examples"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))

ERROR_PREFIX = "optimize-ts: error: "


def run_tool(tool, *args, env=None, timeout=120):
    """Runs optimize-ts; returns the CompletedProcess (text stdout/stderr)."""
    full_env = dict(os.environ)
    full_env.pop("TSFUSE_LOG_LEVEL", None)
    if env:
        full_env.update(env)
    return subprocess.run([str(tool), *map(str, args)], capture_output=True, text=True, env=full_env,
                          timeout=timeout)


def generate_seed_models(outdir):
    """Runs examples/seed_models.py OUTDIR, as a user would; returns {name: path}."""
    subprocess.run([sys.executable, str(EXAMPLES / "seed_models.py"), str(outdir)], check=True,
                   capture_output=True)
    return {name: pathlib.Path(outdir) / f"{name}.pt" for name in ("intersection", "similarity", "nothing_to_fuse")}


def sha256(path):
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()


def leftover_temps(folder):
    """Temp files optimize-ts may have left in `folder` (it names them .NAME.tmp-XXXXXX)."""
    return sorted(p.name for p in pathlib.Path(folder).iterdir() if ".tmp-" in p.name)


def assert_one_error_line(proc, code, *fragments):
    """The process failed with `code` and exactly one stderr line, 'optimize-ts: error: ...'."""
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(ERROR_PREFIX), proc.stderr
    for f in fragments:
        assert f in lines[0], (f, lines[0])
    return lines[0]
