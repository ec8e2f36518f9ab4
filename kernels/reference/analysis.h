// Per-call analysis of a fused op, exactly as eager would compute it: every instruction's dtype
// (type promotion, 0-dim and wrapped-number rules included), every shape, the output's sizes and
// strides, and whether eager would raise (the caller then runs eager, which raises its own error).
// It evaluates the expression on tiny CPU stand-ins (same dtype, rank, 0-dim/wrapped status and
// stride order, each dim of size 1, 2 or 0, filled with ones), all that type promotion and
// TensorIterator's layout depend on; not Meta tensors, which several aten ops lack (abs).
#pragma once

#include "kernels/reference/aten_eval.h"

#include <memory>
#include <optional>

namespace tsfuse {

struct Analysis {
  std::vector<c10::ScalarType> resultType;    // dtype of each instruction's value
  std::vector<c10::ScalarType> computeType;   // dtype each instruction computes in
  std::vector<int64_t> shape;                 // broadcast shape of all operands
  std::vector<int64_t> valueShape;            // shape of the expression's value
  std::vector<int64_t> valueOrder;            // eager's layout of that value: dims outermost-first
  std::vector<int64_t> outSizes, outStrides;  // the op's output (after the reduction/epilogue)
  c10::ScalarType outDtype = c10::ScalarType::Undefined;

  // Reductions with an epilogue: the reduction's own result, and the analysis of the epilogue
  // over (reduced value, epilogue operands...). The epilogue runs per output tile only when its
  // value has the reduced value's shape (epilogueKeepsShape); otherwise it runs after the
  // reduction with ATen, as unfused code would.
  std::vector<int64_t> reducedSizes;
  c10::ScalarType reducedDtype = c10::ScalarType::Undefined;
  std::shared_ptr<const Analysis> epilogue;
  bool epilogueKeepsShape = true;

  // An operand the caller gave up, laid out as the output: allocOut returns it, and the output is
  // written over it (kernels/runtime/donation.h, takeDonated). Elementwise calls only.
  at::Tensor donated;

  int64_t outNumel() const;
  int64_t valueNumel() const;  // of valueShape
  at::Tensor allocOut(c10::Device device) const;
  // max/min with indices: the int64 indices, laid out like the values.
  at::Tensor allocIndices(c10::Device device) const;
};

// The operands of the expression itself and those of the reduction's epilogue (after them).
at::TensorList mainOperands(const Expr& e, at::TensorList operands);
at::TensorList epilogueOperands(const Expr& e, at::TensorList operands);
// The broadcast space of CPU operands, nullopt for any other device (or an undefined operand);
// throws where they do not broadcast (the call then raises eager's error).
std::optional<std::vector<int64_t>> cpuSpace(at::TensorList operands);

// nullopt when eager would raise (or the meta run is not possible).
std::optional<Analysis> analyze(const Expr& e, at::TensorList operands, const ReduceSpec* reduce);
// The same, kept per call signature: the expression and epilogue objects, the reduction's
// parameters, and each operand's dtype, sizes, strides, 0-dim wrapped-number status and device
// (all an analysis reads: its stand-ins hold ones). A model's steady-state calls repeat a few
// signatures, and the stand-in evaluation is most of a small call's cost.
std::optional<Analysis> analyzeCached(const std::shared_ptr<const Expr>& e, at::TensorList operands,
                                      const ReduceSpec* reduce);

// Dims ordered outermost-first by stride (on a tie a size-1 dim is the inner one), and the dense
// strides of `sizes` laid out in such an order: the layout TensorIterator gives a fresh output.
std::vector<int64_t> strideOrder(at::IntArrayRef sizes, at::IntArrayRef strides);
std::vector<int64_t> denseStrides(at::IntArrayRef sizes, const std::vector<int64_t>& order);

// Parsed expressions, cached by text (thread-safe, bounded).
std::shared_ptr<const Expr> cachedExpr(const std::string& text);

// Each instruction's shape over `operands` (their real sizes; literals are 0-dim): its arguments
// broadcast. The last is the value's, which spans only what the value reads. Throws where
// arguments do not broadcast (eager's error).
std::vector<at::DimVector> instructionShapes(const Expr& e, at::TensorList operands);

// Reduced dims of `shape` after wrapping, sorted, unique; all dims when r.dims is nullopt or
// (for amax/amin, like ATen) empty.
std::vector<int64_t> reducedDims(const ReduceSpec& r, int64_t rank);

}  // namespace tsfuse
