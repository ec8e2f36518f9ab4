#!/usr/bin/env python3
"""Checks that a lower layer never includes a higher one (docs/architecture.md, "The layers").

Each source file belongs to the layer of its folder (the first prefix that matches its path); each quoted #include
of a project file must name a file of the same or a lower layer, and the backends stay apart
(kernels/backends/cpu never includes kernels/backends/cuda, nor the reverse). Exits 1 listing every violation.

    python3 scripts/check_layers.py [ROOT]
"""
import pathlib
import re
import sys

# Lowest first. One folder per layer; the first match wins (passes/ holds the passes themselves,
# its subfolders what they share). (The SDK, include/tsfuse, is
# checked by ctest sdk_headers: it includes nothing of the project but itself.)
LAYERS = [
    ("common", ["common/"]),
    ("ir", ["kernels/ir/"]),
    ("reference", ["kernels/reference/"]),
    ("lowering", ["kernels/lower/"]),
    ("plan", ["kernels/plan/"]),
    ("backends", ["kernels/backends/"]),
    ("runtime", ["kernels/runtime/"]),
    ("pass framework", ["passes/framework/"]),
    ("pass analyses", ["passes/analysis/"]),
    ("regions", ["passes/regions/"]),
    ("passes", ["passes/"]),
    ("registration", ["registration/"]),
    ("tools", ["tools/"]),
]
APART = [("kernels/backends/cpu/", "kernels/backends/cuda/"), ("kernels/backends/cuda/", "kernels/backends/cpu/")]
SOURCES = ("common", "kernels", "passes", "registration", "tools")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_of(path):
    for rank, (name, prefixes) in enumerate(LAYERS):
        if any(path.startswith(p) for p in prefixes):
            return rank, name
    return None


def included_path(inc):
    # SDK headers are included as "tsfuse/x.h" (include/ is on the include path): no layer's.
    return "include/" + inc if inc.startswith("tsfuse/") else inc


def main(root):
    root = pathlib.Path(root)
    problems, files = [], 0
    for top in SOURCES:
        for f in sorted((root / top).rglob("*")):
            if f.suffix not in (".h", ".cpp", ".cu", ".inc", ".def"):
                continue
            rel = f.relative_to(root).as_posix()
            mine = layer_of(rel)
            if mine is None:
                problems.append(f"{rel}: in no layer's folder")
                continue
            files += 1
            for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                target = included_path(m.group(1))
                theirs = layer_of(target)
                if theirs is None:
                    continue
                if theirs[0] > mine[0]:
                    problems.append(f"{rel}:{n}: the {mine[1]} layer includes {target} (layer {theirs[1]})")
                for a, b in APART:
                    if rel.startswith(a) and target.startswith(b):
                        problems.append(f"{rel}:{n}: {a} includes {target} ({b} is another backend)")
    for p in problems:
        print(p)
    print(f"layers: {files} files, {len(problems)} violations")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent))
