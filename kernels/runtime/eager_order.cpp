#include "kernels/runtime/eager_order.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>

namespace tsfuse {

namespace {

std::atomic<bool>& keepOrderState() {
  static std::atomic<bool> on = [] {
    const char* v = std::getenv("TSFUSE_REDUCE_ORDER");
    return !(v && std::string(v) == "any");
  }();
  return on;
}

}  // namespace

int64_t footprint(const at::Tensor& t) {
  int64_t n = 1;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.stride(d) != 0 || t.size(d) == 0) n *= t.size(d);
  return n;
}

int64_t largestFootprint(at::TensorList operands) {
  int64_t largest = 0;
  for (const at::Tensor& t : operands) largest = std::max<int64_t>(largest, footprint(t));
  return largest;
}

bool broadcastsBeyondOperands(const Analysis& an, at::TensorList operands) {
  return an.valueNumel() > largestFootprint(operands);
}

bool keepsEagerOrder() { return keepOrderState().load(std::memory_order_relaxed); }
void setKeepEagerOrder(bool on) { keepOrderState().store(on, std::memory_order_relaxed); }

}  // namespace tsfuse
