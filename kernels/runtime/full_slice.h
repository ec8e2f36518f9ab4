// tsfuse::full_slice(Tensor(a) self, int dim) -> Tensor(a): the `:` of x[:, None, :] that
// canonicalize could not drop (passes/canonicalize.h, 5). Such a slice is a view equal to x whose
// only observable effect, once alias analysis shows nothing writes or identifies it, is the error
// it raises on a tensor of too low a rank; this op raises the same errors (aten::slice's checks)
// and returns x itself. A JIT operator, not a dispatcher op: no dispatch, autograd kernel or view
// to allocate, which on small calls cost a noticeable share of a fused call. Gradients are x's.
#pragma once

namespace tsfuse {

inline constexpr const char* kFullSliceOp = "tsfuse::full_slice";

}  // namespace tsfuse
