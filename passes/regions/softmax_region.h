// softmax / log_softmax of an elementwise region, for the fuse_broadcast_reduce pass (a softmax
// is a normalising reduction: a maximum and a sum along one dim, broadcast back):
//
//   %d = aten::sub(%x, %y)                       %l = prim::ListConstruct(%x, %y)
//   %s = aten::softmax(%d, %dim, %none)    =>    %s = tsfuse::softmax(%l, "v1: sub($0, $1)", dim, False)
//
// The fused op never stores the region's value (kernels/runtime/softmax.h, runSoftmax). The same
// normalizations of a fused reduction's value (and a division by its sum) become a chain's last
// stage instead, for the nest_reductions pass (nestSoftmax, nestDivSum below).
#pragma once

#include "passes/framework/driver.h"

namespace tsfuse {

// Whether n is aten::softmax.int or aten::log_softmax.int (a candidate for fuseSoftmax).
bool isSoftmax(Node* n);

// Rewrites the softmax `n` with the region producing its input into one tsfuse::softmax; false
// (a recorded rejection, or no elementwise producer) otherwise.
bool fuseSoftmax(Node* n, Rewriter& rw);

// For the nest_reductions pass: the softmax `n` of a fused reduction's value (a tsfuse::reduce or
// a chain) becomes that chain's last stage (kernels/runtime/chain.h), so the value is computed slab by slab
// into ATen's softmax and never stored:
//
//   %d = tsfuse::reduce(%l, "v1: sub($0, $1); mul(%0, %0)", "sum", [2], False, None, "v1: mul($0, -2.0)", [])
//   %s = aten::softmax(%d, 1, None)
// =>
//   %s = tsfuse::reduce_chain(%l, "v1: sub($0, $1); mul(%0, %0)",
//                             ["sum(dim=[2], keepdim=False) |> v1: mul($0, -2.0)", "softmax(dim=1)"])
//
// False (a recorded rejection, or no fused reduction's value) otherwise.
bool nestSoftmax(Node* n, Rewriter& rw);

// The same for a division by the sum, for nest_reductions at the sum: v / v.sum(d, keepdim=True)
// of a fused reduction's value v (DEC's Student-t assignment, a softmax written out as
// e / e.sum(1, keepdim=True)) becomes the chain's last stage "div_sum(dim=d)":
//
//   %s = aten::sum(%q, [1], True, None)
//   %r = aten::div(%q, %s)                 =>    %r = tsfuse::reduce_chain(%l, ..., [..., "div_sum(dim=1)"])
//
// nullopt where `sum` and its value's readers are not that form (nothing recorded); else whether
// it was rewritten (a rejection is recorded).
std::optional<bool> nestDivSum(Node* sum, Rewriter& rw);

}  // namespace tsfuse
