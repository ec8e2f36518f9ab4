// The once-per-process check that at::sum follows eagerRowSum (kernels/backends/cpu/row_sum.h; its loops
// are compiled per instruction set with the tile ops, in tile_program.cpp).
#include "kernels/backends/cpu/row_sum.h"

#include "kernels/backends/cpu/inner_sum.h"

#include <ATen/ATen.h>

#include <vector>

namespace tsfuse::cpu {

bool eagerSumsRowsInCascade() {
  // Lengths that take each branch: scalar rows, vectors with and without values and vectors after
  // the groups, and groups past the first cascade level's 16 and the second's 256.
  const std::vector<int64_t> counts{3, 7, 9, 100, 511, 1024, 4099, 16 * 16 * 4 * 8 + 4 * 8 * 17 + 13};
  const char* what = "do not follow the modelled cascade; their rows are summed by ATen";
  static const bool matches =
      sumsMatchEager<float>(
          at::kFloat, counts, 4, 20261128, [](const float* v, int64_t n) { return eagerRowSum(v, n); }, what) &&
      sumsMatchEager<double>(
          at::kDouble, counts, 4, 20261128, [](const double* v, int64_t n) { return eagerRowSum(v, n); }, what);
  return matches;
}

bool eagerSumsWholeRows(c10::ScalarType type, int64_t count, int64_t outputs, int dimsAboveOne, bool innermost) {
  if ((type != c10::ScalarType::Float && type != c10::ScalarType::Double) || dimsAboveOne != 1 || !innermost)
    return false;
  if (outputs < 1 || (outputs == 1 && count >= 32768)) return false;
  return eagerSumsRowsInCascade();
}

}  // namespace tsfuse::cpu
