// Canonicalization, the first pipeline pass after inlining: rewrites the spellings real code uses
// into the one form the matchers know, so matchers stay small.
#pragma once

#include <torch/csrc/jit/ir/alias_analysis.h>
#include <torch/csrc/jit/ir/ir.h>

#include <memory>

namespace tsfuse {

// The rewrites:
//   1. tuples built and immediately unpacked (inlined helpers returning tuples) are lowered, and
//      constants propagated (flags such as `mode == "giou"` or `GIoU=False` fold their branches;
//      a folded 0-dim tensor read as add/sub/mul/div's other stays a tensor: UnfoldZeroDimOthers)
//   2. x.op_(...) on a fresh tensor                        -> y = x.op(...), later uses of x -> y
//      (only when nothing else can observe x: no reader before the write may alias it; see
//      canonicalize.cpp); y = tsfuse::inplace_result(x.op(...), x) where x.op(...) could have
//      another dtype or shape than x (x's dtype, or the in-place op's error)
//   3. values, _ = max|min(x, dim, keepdim) (indices dead) -> amax|amin(x, [dim], keepdim)
//   4. x[mask] = c (index_put_ of one bool mask)            -> y = where(mask, c, x), later uses of x -> y
//      (only when the mask is provably bool and of x's shape and strides, c converts to x's
//      dtype exactly, and x is fresh as in 2)
//   4b. x.expand_as(y)                                      -> x.expand(y.size())  (y's sizes alone read)
//   5. slice(x, d, None|0, None|INT64_MAX, 1) read only    -> x   (identity views, common in traces;
//      alias analysis shows nothing writes x or the slice), in a second walk after 2-4, where the
//      slice raises nothing of its own: x's rank is proven >= d + 1, or d is 0 or -1 and every
//      use is a slice (x[:, None, :] on a 1-D x raises; without the slice it would broadcast)
bool Canonicalize(std::shared_ptr<torch::jit::Graph>& graph);

// n is slice(x, d, None|0, None|INT64_MAX, 1) with a constant d whose uses only read values (fresh
// readers; select, slice or unsqueeze of it; with `fusedOperands`, lists only tsfuse ops read), and
// nothing writes x or it: a view equal to x whose identity nothing observes. Canonicalize drops
// such a slice where it raises nothing of its own (5 above); full_slice_checks replaces the others.
bool isReadOnlyFullSlice(torch::jit::Node* n, const torch::jit::AliasDb& aliases, bool fusedOperands);

}  // namespace tsfuse
