"""Python: load libtsfuse, then run an unmodified TorchScript model — its first call is fused.

    .venv/bin/python examples/python_app.py build/lib/libtsfuse.so MODEL.pt
"""
import sys

import torch


def main(lib: str, model_path: str) -> None:
    torch.ops.load_library(lib)  # registers tsfuse::* ops and the executor pass
    model = torch.jit.load(model_path)
    inputs = model.example_inputs()
    with torch.no_grad():
        out = model(*inputs)
    graph = str(torch.jit.last_executed_optimized_graph())
    print(f"output {tuple(out.shape)} {out.dtype}")
    print("first call fused:", "yes" if "tsfuse::" in graph else "no")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
