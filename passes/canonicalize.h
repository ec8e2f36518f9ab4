// Canonicalization, the first pipeline pass after inlining: rewrites the spellings real code uses
// into the one form the matchers know, so matchers stay small.
//
//   1. tuples built and immediately unpacked (inlined helpers returning tuples) are lowered, and
//      constants propagated (flags such as `mode == "giou"` or `GIoU=False` fold their branches)
//   2. x.op_(...) on a fresh elementwise intermediate      -> y = x.op(...), later uses of x -> y
//      (only when alias analysis shows nothing else can observe x: see canonicalize.cpp)
//   3. slice(x, d, None|0, None|INT64_MAX, 1) read only    -> x   (identity views, common in traces)
//   4. values, _ = max|min(x, dim, keepdim) (indices dead) -> amax|amin(x, [dim], keepdim)
//   5. x[mask] = c (index_put_ of one bool mask)            -> y = where(mask, c, x), later uses of x -> y
//      (only when the mask is provably bool and of x's shape and strides, c converts to x's
//      dtype exactly, and x is fresh as in 2)
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

namespace tsfuse {

bool Canonicalize(std::shared_ptr<torch::jit::Graph>& graph);

}  // namespace tsfuse
