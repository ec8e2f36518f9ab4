#include "kernels/runtime/product_sums.h"

#include <ATen/ExpandUtils.h>
#include <ATen/TensorUtils.h>
#include <torch/csrc/jit/runtime/custom_operator.h>

#include <algorithm>

namespace tsfuse {
namespace {

// Whether matmul's batched path (both operands >= 3-d: expand to the broadcast batch, reshape to
// [batch, rows, cols]) copies `t`: its expanded batch dims do not flatten as a view.
bool batchedMatmulCopies(const at::Tensor& t, at::IntArrayRef batch) {
  std::vector<int64_t> sizes(batch.begin(), batch.end());
  sizes.push_back(t.size(-2));
  sizes.push_back(t.size(-1));
  const at::Tensor e = t.expand(sizes);
  const int64_t flat = c10::multiply_integers(batch);
  return !at::detail::computeStride(e.sizes(), e.strides(), std::vector<int64_t>{flat, t.size(-2), t.size(-1)});
}

}  // namespace

bool productSums(const at::Tensor& self, const at::Tensor& other) {
  if (self.dim() < 3 || other.dim() < 3) return false;  // matmul folds, or reads the operand in place
  if (self.layout() != at::kStrided || other.layout() != at::kStrided) return false;
  if (self.device() != other.device() || self.scalar_type() != other.scalar_type()) return false;
  if (self.scalar_type() != at::kFloat && self.scalar_type() != at::kDouble) return false;
  if (self.size(-1) != other.size(-2)) return false;
  if (self.size(-2) != 1 && other.size(-1) != 1) return false;
  // The batch dims broadcast (else matmul raises), and matmul copies the matrix there: the copy is
  // what the sum saves; without one the BLAS reads both in place, faster than the sum.
  const at::IntArrayRef sb = self.sizes().slice(0, self.dim() - 2), ob = other.sizes().slice(0, other.dim() - 2);
  const int64_t n = std::min(sb.size(), ob.size());
  for (int64_t i = 1; i <= n; ++i) {
    const int64_t s = sb[sb.size() - i], o = ob[ob.size() - i];
    if (s != o && s != 1 && o != 1) return false;
  }
  // The copy of the matrix (the operand that is not a vector; either where both are): one of
  // the vector alone is small beside the product's work.
  const std::vector<int64_t> batch = at::infer_size(sb, ob);
  return batchedMatmulCopies(self.size(-2) == 1 ? other : self, batch) ||
         (self.size(-2) == 1 && other.size(-1) == 1 && batchedMatmulCopies(self, batch));
}

namespace {

void productSumsOp(torch::jit::Stack& stack) {
  const at::Tensor other = torch::jit::pop(stack).toTensor();
  const at::Tensor self = torch::jit::pop(stack).toTensor();
  torch::jit::push(stack, productSums(self, other));
}

const torch::jit::RegisterOperators kRegister(
    {torch::jit::Operator(std::string(kProductSumsOp) + "(Tensor self, Tensor other) -> bool", productSumsOp,
                          c10::AliasAnalysisKind::FROM_SCHEMA)});

}  // namespace
}  // namespace tsfuse
