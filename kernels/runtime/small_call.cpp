#include "kernels/runtime/small_call.h"

#include "kernels/reference/analysis.h"

#include <atomic>
#include <optional>
#include <vector>
#include <cstdlib>

namespace tsfuse {
namespace {

std::atomic<int64_t>& bound() {
  static std::atomic<int64_t> n = [] {
    const char* v = std::getenv("TSFUSE_SMALL_CALL_VALUES");
    return v && *v ? std::max<int64_t>(0, std::atoll(v)) : int64_t(2048);
  }();
  return n;
}

}  // namespace

int64_t smallCallValues() { return bound().load(std::memory_order_relaxed); }
void setSmallCallValues(int64_t n) { bound().store(std::max<int64_t>(0, n), std::memory_order_relaxed); }

bool runsAsAtenOps(const Expr& e, at::TensorList operands, const ReduceSpec* reduce) {
  const int64_t most = smallCallValues();
  if (most == 0) return false;
  const size_t ops = e.instrs.size() + (reduce ? 1 + (reduce->epilogue ? reduce->epilogue->instrs.size() : 0) : 0);
  if (ops > (reduce ? 8u : 4u)) return false;
  for (const at::Tensor& t : operands)
    if (!t.is_cpu()) return false;
  std::optional<std::vector<int64_t>> space;
  try {
    space = cpuSpace(mainOperands(e, operands));
  } catch (const c10::Error&) {
    return false;  // (operands that do not broadcast: the fused path raises eager's error)
  }
  if (!space) return false;
  // A map's fixed cost is the lower: its ATen ops' work per value must stay within twice the bound.
  const int64_t values = reduce ? most : 2 * most / static_cast<int64_t>(std::max<size_t>(ops, 1));
  int64_t n = 1;
  for (int64_t s : *space)
    if ((n *= s) > values) return false;
  return true;
}

}  // namespace tsfuse
