"""The source tree's tsfuse package over a build's libraries, for processes that `import tsfuse`
without installing it (the tests' own processes, bench/serving.py's Ray replicas): a folder to put
on PYTHONPATH, holding python/tsfuse's .py files, a _build.py for the running torch, and lib/
linked to the build's lib folder. The installed package (pip install .) is tests/package's subject.

    python scripts/source_package.py BUILD_LIB_DIR DEST     # prints DEST
"""
import pathlib
import shutil
import sys

SOURCE = pathlib.Path(__file__).resolve().parents[1]


def make(lib_dir: pathlib.Path, dest: pathlib.Path) -> pathlib.Path:
    import torch

    lib_dir = pathlib.Path(lib_dir).resolve()
    for name in ("libtsfuse.so", "libtsfuse_tool.so"):
        if not (lib_dir / name).exists():
            raise FileNotFoundError(f"{lib_dir / name} not built (make build)")
    pkg = pathlib.Path(dest) / "tsfuse"
    pkg.mkdir(parents=True)
    for f in (SOURCE / "python" / "tsfuse").glob("*.py"):
        shutil.copy(f, pkg / f.name)
    (pkg / "_build.py").write_text(f"VERSION = '0+source'\nTORCH_VERSION = {torch.__version__!r}\n")
    (pkg / "lib").symlink_to(lib_dir, target_is_directory=True)
    return pathlib.Path(dest)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    print(make(pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])))
