// tsfuse::full_slice(Tensor(a) self, int dim) -> Tensor(a): the `:` of x[:, None, :] that canonicalize
// could not drop (passes/canonicalize.h, 5). slice(x, dim, None, None, 1) returns a view equal to x
// whose only observable effect, once alias analysis shows nothing writes or identifies it, is the
// error it raises on a tensor of too low a rank. This op raises the same errors, with aten::slice's
// own checks, and returns x itself.
//
// It is a JIT operator, not a dispatcher op: the interpreter calls it directly, with no dispatch,
// no autograd kernel and no view to allocate (an aten::slice costs about half a microsecond a call,
// which is a tenth of a fused call on small boxes). Autograd sees x itself, so gradients are x's.
#pragma once

namespace tsfuse {

inline constexpr const char* kFullSliceOp = "tsfuse::full_slice";

}  // namespace tsfuse
