"""The console script ``optimize-ts``: the package's optimize-ts binary (docs/optimize-ts.md).

Importing this module imports tsfuse, whose torch version check then guards the binary too; the
binary replaces this process, so its exit codes are the tool's.
"""
import os
import pathlib
import sys


def main() -> None:
    binary = pathlib.Path(__file__).resolve().parent / "bin" / "optimize-ts"
    os.execv(binary, ["optimize-ts", *sys.argv[1:]])
