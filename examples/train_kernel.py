"""Python: train through a scripted kernel loss with libtsfuse loaded — no code change.

    .venv/bin/python examples/train_kernel.py build/lib/libtsfuse.so

Moves 2-D points towards a target cloud by SGD on a Gaussian-kernel MMD loss. The scripted loss's
kernel matrices fuse to tsfuse ops whose backward is fused too (kernels/runtime/fused_grad.h), so
no [N, M] intermediate is kept for the backward. Prints each step's loss beside eager's.
"""
import sys

import torch


class KernelMMD(torch.nn.Module):
    """MMD^2 between two point clouds with the kernel exp(-|a - b|^2 / s), coordinates spelled out."""

    def __init__(self, s: float = 0.5, x0=None, target=None):
        super().__init__()
        self.s = s
        if x0 is not None:  # what examples/cpp_train reads: the points to move, and where to
            self.register_buffer("x0", x0)
            self.register_buffer("target", target)

    def mean_kernel(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        d2 = (a[:, None, 0] - b[None, :, 0]) ** 2 + (a[:, None, 1] - b[None, :, 1]) ** 2
        return torch.exp(-d2 / self.s).mean()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.mean_kernel(x, x) - 2 * self.mean_kernel(x, y) + self.mean_kernel(y, y)


def points(n: int = 400, m: int = 300):
    """The starting points and the target cloud."""
    g = torch.Generator().manual_seed(0)
    return torch.randn(n, 2, generator=g), torch.randn(m, 2, generator=g) * 0.5 + 1.0


def train(loss_fn, steps: int = 5, lr: float = 20.0):
    x0, y = points()
    x = x0.clone().requires_grad_()
    opt = torch.optim.SGD([x], lr=lr)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_fn(x, y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def main(lib: str) -> list:
    torch.ops.load_library(lib)  # registers tsfuse::* ops and the executor pass
    scripted = torch.jit.script(KernelMMD())
    fused = train(scripted)
    graph = str(torch.jit.last_executed_optimized_graph())
    eager = train(KernelMMD())
    for step, (f, e) in enumerate(zip(fused, eager)):
        print(f"step {step}: loss {f:.6f} (eager {e:.6f})")
    print("fused with grad:", "yes" if "tsfuse::" in graph else "no")
    return [fused, eager, graph]


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
