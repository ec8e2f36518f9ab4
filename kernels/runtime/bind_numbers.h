// Numbers known only at run time that an op reads by value, written into the expression as
// literals before a fast path compiles it.
//
// A Python number the graph computes is a tsfuse::wrapped_number operand. Where ATen computes on
// it as on the number wrapped (kRuntimeNumber) it stays an operand; where the op reads it by value
// (readsNumberByValue: pow, clamp, where), the fast paths first bind it, so the call analyses,
// lowers and raises as the same number written in the source would:
//   v1: minimum($0, $1); clamp(%0, $2, None), $2 = wrapped 1e-06 -> clamp(%0, 1e-06, None)
// Kernels take their literals with each call, so a changing number costs an analysis and a
// lowering, not a compile. The operands only the bound numbers read leave the list.
#pragma once

#include "kernels/reference/aten_eval.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tsfuse {

struct BoundNumbers {
  std::shared_ptr<const Expr> expr;
  std::string text;                  // expr->str()
  std::optional<ReduceSpec> reduce;  // the call's, its epilogue bound too
  std::vector<at::Tensor> operands;  // those the bound expressions still read, in order
  std::vector<int64_t> position;     // per operand of the call: its index in `operands`, -1 if gone
};

// The call (expression `e`, reduction `reduce` with its epilogue, `operands`: the expression's,
// then the epilogue's) with its by-value numbers bound; nullopt when it reads none. A thread's last
// binding is kept: the same expression with the same numbers again costs a scan and a compare.
std::optional<BoundNumbers> bindNumbers(const std::shared_ptr<const Expr>& e, const ReduceSpec* reduce,
                                        at::TensorList operands);

}  // namespace tsfuse
