// Canonicalization, the first pipeline pass after inlining: rewrites the spellings real code uses
// into the one form the matchers know, so matchers stay small.
//
//   1. tuples built and immediately unpacked (inlined helpers returning tuples) are lowered, and
//      constants propagated (flags such as `mode == "giou"` or `GIoU=False` fold their branches)
//   2. x.op_(...) on a fresh elementwise intermediate      -> y = x.op(...), later uses of x -> y
//      (only when nothing else can observe x: no reader before the write may alias it; see
//      canonicalize.cpp)
//   3. values, _ = max|min(x, dim, keepdim) (indices dead) -> amax|amin(x, [dim], keepdim)
//   4. x[mask] = c (index_put_ of one bool mask)            -> y = where(mask, c, x), later uses of x -> y
//      (only when the mask is provably bool and of x's shape and strides, c converts to x's
//      dtype exactly, and x is fresh as in 2)
//   5. slice(x, d, None|0, None|INT64_MAX, 1) read only    -> x   (identity views, common in traces;
//      alias analysis shows nothing writes x or the slice), in a second walk after 2-4
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

namespace tsfuse {

bool Canonicalize(std::shared_ptr<torch::jit::Graph>& graph);

}  // namespace tsfuse
