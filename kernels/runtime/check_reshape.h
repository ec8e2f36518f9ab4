// tsfuse::check_reshape(Tensor(a) self, int[] shape) -> Tensor(a): the error self.reshape(shape)
// raises (a size that does not divide, an ambiguous -1 over 0 elements), else self itself. Put
// in place of a reshape a rewrite computes past (passes/sink_reshapes.cpp): that reshape's only
// effect the rewritten graph would otherwise lose is its error. A JIT operator, as full_slice.
#pragma once

namespace tsfuse {

inline constexpr const char* kCheckReshapeOp = "tsfuse::check_reshape";

}  // namespace tsfuse
