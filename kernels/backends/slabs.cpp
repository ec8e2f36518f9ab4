#include "kernels/backends/slabs.h"

namespace tsfuse {

std::vector<at::Tensor> narrowOperands(at::TensorList ts, int64_t rank, int64_t dim, int64_t start, int64_t len) {
  std::vector<at::Tensor> out(ts.begin(), ts.end());
  for (auto& t : out) {
    const int64_t d = dim - (rank - t.dim());
    if (d >= 0 && t.size(d) != 1) t = t.narrow(d, start, len);
  }
  return out;
}

}  // namespace tsfuse
