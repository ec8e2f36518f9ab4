// Operand donation: whether an elementwise call's output may take the memory of an operand its
// caller gives up (the fused op's `donated` argument, kernels/runtime/fused_call.h).
#pragma once

#include "kernels/reference/analysis.h"

#include <vector>

namespace tsfuse {

// The donated operand an elementwise call's output may take (undefined: none). It must be a CPU
// or CUDA tensor laid out exactly as the output would be (dtype, sizes, strides, dense), held by
// nothing but this call: by at most kCallReferences handles, its storage by no other tensor (no
// live view of it; a view's base that only the view holds counts as part of it), and its memory
// must come from ATen's allocator (not from_blob's). The interpreter moves the operand list into
// the call, where the dispatcher copies it into the kernel's vector and frees it: a dead operand
// then has one handle, one that a register still holds for a later reader has two.
constexpr long kCallReferences = 1;
at::Tensor takeDonated(at::TensorList operands, at::IntArrayRef donated, const Analysis& an);

// An operand list a call hands on to the call it makes (bound numbers: kernels/runtime/bind_numbers.h;
// hoisting: kernels/runtime/hoist.h), while that call runs on this thread: its handles are the outer call's
// own, so a donated operand may be held by them too (by each list of a nested hand-on).
class HandedOnOperands {
 public:
  explicit HandedOnOperands(const std::vector<at::Tensor>& ops) : ops_(ops), previous_(tls_) { tls_ = this; }
  ~HandedOnOperands() { tls_ = previous_; }
  HandedOnOperands(const HandedOnOperands&) = delete;
  HandedOnOperands& operator=(const HandedOnOperands&) = delete;
  static long handles(const at::Tensor& t) {
    long n = 0;
    for (const HandedOnOperands* list = tls_; list; list = list->previous_)
      for (const at::Tensor& o : list->ops_) n += o.is_same(t);
    return n;
  }

 private:
  const std::vector<at::Tensor>& ops_;
  const HandedOnOperands* previous_;
  static thread_local const HandedOnOperands* tls_;
};

}  // namespace tsfuse
