// Whether a method's first call would store a broadcast intermediate that fusion removes, judged
// from the values the call passes. Used for one decision only: first-call mode
// (registration/first_call.h). The first call is the one fusion must cover, because it is the
// call that runs out of memory unfused; but first-call mode moves PyTorch's own optimization of
// the graph into that call, which costs a detector 1.3-1.8x on its first call while its fusible
// regions (box decoding over [N, 4]) store nothing larger than their operands.
//
// The probe follows sizes from the call's values (self's attributes included) through views,
// elementwise ops and reductions, and looks for a region start (passes/analysis/op_table.h, startsRegion)
// whose operands broadcast against each other: an outer product, one operand flat (size 1, a
// missing leading axis, or an expanded stride-0 axis) where another is not, and the reverse on
// another axis. A size it cannot follow (a convolution's output, a data-dependent count) is
// unknown, and an unknown size counts as "not flat", so `[N, 1] * [N, K]` with N and K unknown is
// not an outer product and `x[:, None] - y[None]` is, whatever x and y are.
//
//   %xa = aten::unsqueeze(%x, 1)       # [N, 1, D]    (x: [N, D] at this call)
//   %yb = aten::unsqueeze(%y, 0)       # [1, M, D]    (y: [M, D])
//   %d  = aten::sub(%xa, %yb, %one)    # [N, M, D]: flat at 1 vs 0 -> an outer product
//   %s  = aten::sum(%d, [-1], ...)     # d only reduced -> a region starts at %d
//
// A heuristic: a miss leaves that method's first call unfused (the pass still fuses it from the
// second call), a false alarm costs its first call PyTorch's optimization. Never a gate on the
// pass itself.
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/csrc/jit/ir/ir.h>

#include <memory>

namespace tsfuse {

// The first node of `graph` (nested blocks included) that starts a fused region over an outer
// product, given `inputs`, the values of the graph's inputs at this call (self first for a
// method; fewer than the graph's inputs leaves the rest unknown); or a call not yet inlined;
// nullptr if none.
torch::jit::Node* firstBroadcastCandidate(const std::shared_ptr<torch::jit::Graph>& graph,
                                          c10::ArrayRef<c10::IValue> inputs);

}  // namespace tsfuse
