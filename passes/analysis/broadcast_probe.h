// Whether a method's first call would store a broadcast intermediate that fusion removes, judged
// from the values the call passes. It decides first-call mode only (registration/first_call.h):
// that mode fuses the first call, the one that runs out of memory unfused, but also moves
// PyTorch's optimization into it, which is wasted where the fusible regions store nothing larger
// than their operands. A heuristic, never a gate on the pass: a miss leaves that first call
// unfused, a false alarm costs it PyTorch's optimization.
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/csrc/jit/ir/ir.h>

#include <memory>

namespace tsfuse {

// The probe follows sizes from the call's values (self's attributes included) through views,
// elementwise ops and reductions, and looks for a region start (op_table.h, startsRegion) whose
// operands broadcast against each other: an outer product, one operand flat (size 1, a missing
// leading axis, or an expanded stride-0 axis) where another is not, and the reverse on another
// axis; or a reshape of an expanded value (a copy of the broadcast). A size it cannot follow (a
// convolution's output, a data-dependent count) is unknown and counts as "not flat":
// `[N, 1] * [N, K]` with N and K unknown is not an outer product, `x[:, None] - y[None]` is,
// whatever x and y are.
//
// The first node of `graph` (nested blocks included) that starts a fused region over an outer
// product, given `inputs`, the values of the graph's inputs at this call (self first for a
// method; fewer than the graph's inputs leaves the rest unknown); or a call not yet inlined;
// nullptr if none.
torch::jit::Node* firstBroadcastCandidate(const std::shared_ptr<torch::jit::Graph>& graph,
                                          c10::ArrayRef<c10::IValue> inputs);

// Whether operands of these sizes broadcast to an outer product (the probe's test above, on
// sizes known in full): each flat (size 1, or a missing leading axis) on an axis where the other
// is not, and the reverse on another axis.
bool outerProduct(c10::IntArrayRef a, c10::IntArrayRef b);

}  // namespace tsfuse
