// Numbers known only at run time that an op reads by value, written into the expression as
// literals before a fast path compiles it.
//
// A Python number the graph computes (clamp(d, min=self.eps), d.pow(p), where(m, d, thr * 2)) is a
// tsfuse::wrapped_number operand of the fused op. Where ATen computes on a number as on the number
// wrapped (kRuntimeNumber: add, mul, lt, ...) it stays an operand: one kernel for every value.
// Where the op reads it by value (readsNumberByValue: pow's special exponents, clamp's NaN bounds,
// where's checked conversion run other kernels for a number than for a tensor), the reference reads
// it as the number (RefArgs), and the fast paths first bind it:
//
//   v1: minimum($0, $1); clamp(%0, $2, None)     $2 = wrapped 1e-06
//   -> v1: minimum($0, $1); clamp(%0, 1e-06, None)   over ($0, $1)
//
// (runFusedAll, shapeOf, and a chain's folded row sums, the one path that runs a stage itself),
// so the call is the call the same number written in the source would make: its analysis, its
// lowering (pow(x, 2.0) multiplies) and its errors (where(m, x, 1e300) over float32 raises). Its
// compiled kernel is shared by every value whose lowering is the same: the CPU and CUDA kernels
// take their literals with each call (Kernel::literals, Param::Literal), so a number that changes
// on every call costs an analysis and a lowering, not a compile. The operands only the bound
// numbers read leave the list.
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
