// A sum or product over a few values per output (a box's coordinate pair, a point's three
// coordinates) as the map that folds them: the expression written once per index of the reduced
// dim, over the operands' slices at that index, folded in index order from the identity, then the
// epilogue. That is eager's order for so few values (reduction_rules.h, foldsInFloat), so the map
// gives the reduction's bits, and it runs as one compiled elementwise kernel along the kept dims
// where the reduction's tiles would walk two or three rows per output (yolov5's wh_iou
// `torch.min(wh1[:, None], wh2[None]).prod(2)`: 4x faster single-threaded).
#pragma once

#include "kernels/reference/analysis.h"

#include <optional>
#include <string>
#include <vector>

namespace tsfuse {

struct UnrolledReduction {
  std::vector<at::Tensor> operands;  // the slices, then the epilogue's operands
  std::string expr;                  // the map's text
};

// The map computing reduction `r` of `e` over `operands` (an: the call's analysis), or nullopt
// where it does not apply: another reduction kind or a dtype argument, a value that is not float32
// or float64 (or whose dtype the reduction changes), more than one reduced dim of extent > 1 or
// more than kMaxUnrolled values per output, too many operands for one compiled kernel, or a map
// whose output would not have the reduction's layout.
constexpr int64_t kMaxUnrolled = 4;
std::optional<UnrolledReduction> unrollSmallReduction(const Expr& e, at::TensorList operands, const ReduceSpec& r,
                                                      const Analysis& an);
// Reductions so far that unrollSmallReduction made maps of: tests check that the path ran.
int64_t smallReductionsUnrolled();
// On by default; tests of the reduction kernels' own paths over few values switch it off.
void setUnrollSmallReductions(bool on);
bool unrollsSmallReductions();

}  // namespace tsfuse
