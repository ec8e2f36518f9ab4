// A chain's normalizing stage (NormalizeStage): softmax, log_softmax or a division by the sum, with
// ATen's ops.
#include "kernels/runtime/chain.h"

namespace tsfuse {

at::Tensor NormalizeStage::apply(const at::Tensor& value, const at::Tensor* out) const {
  const bool fresh = out == nullptr;
  at::Tensor o = fresh ? at::Tensor() : *out;  // a handle on the output's slab
  switch (kind) {
    case Kind::Softmax:
      return fresh ? at::softmax(value, dim) : at::softmax_out(o, value, dim);
    case Kind::LogSoftmax:
      return fresh ? at::log_softmax(value, dim) : at::log_softmax_out(o, value, dim);
    case Kind::DivSum: {
      const at::Tensor sum = at::sum(value, {dim}, /*keepdim=*/true);
      return fresh ? at::div(value, sum) : at::div_out(o, value, sum);
    }
  }
  TORCH_INTERNAL_ASSERT(false, "unknown normalization");
}

}  // namespace tsfuse
