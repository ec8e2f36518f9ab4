// The reference semantics of a fused region: evaluate its expression with the ATen ops it names.
//
// Used (a) on meta tensors to infer dtypes, shapes, strides and every error eager would raise,
// (b) when autograd must record the computation, and (c) on slices of the operands by the
// chunked path. Everything the fast kernels do is defined as "what this function returns".
#pragma once

#include "kernels/ir/expr.h"

#include <ATen/ATen.h>

#include <memory>
#include <optional>
#include <vector>

namespace tsfuse {

struct ReduceSpec {
  Reduction kind = Reduction::Sum;
  std::optional<std::vector<int64_t>> dims;  // nullopt: all dims
  bool keepdim = false;
  std::optional<c10::ScalarType> dtype;  // sum/mean/prod/norm only
  double p = 2.0;                        // norm's order
  double correction = 1.0;               // var/std: the divisor is count - correction
  // amax/amin that are max/min(dim)'s values (tsfuse::extremum_values, one dim): the same values,
  // but the gradient goes to the one index max/min returns instead of being split among ties.
  // Text "amax:index".
  bool routesGradient = false;
  // Elementwise arithmetic applied to the reduced value: $0 is the reduced value, $k (k >= 1)
  // is epilogue operand k-1 (the fused op's operands after the expression's own). For max/min
  // with indices $0 is the values, $1 the indices, $k (k >= 2) operand k-2, and the epilogue's
  // value replaces the indices.
  std::shared_ptr<const Expr> epilogue;

  bool withIndices() const { return kind == Reduction::Max || kind == Reduction::Min; }
  // Whether the result's bits depend on the order values are folded in: sums, means, products,
  // logsumexp, var/std and norms of order other than 0 and +-inf, over floating (or complex) values.
  // Extrema, counts, any/all and integer folds are exact in any order.
  bool roundsByOrder(c10::ScalarType valueType) const;
  bool variance() const { return kind == Reduction::Var || kind == Reduction::Std; }
};

// torchvision's _upcast (ops/_utils.py) as a dtype map: floating dtypes other than float32/float64
// -> float32, every other dtype but int32/int64 (bool and complex included) -> int32. The op
// tsfuse::upcast and its expression form (kernels/ir/ops.def) cast to it; passes/fold_upcast.cpp
// checks a dtype If against it.
c10::ScalarType upcastDtype(c10::ScalarType d);

// What self.op_(args) leaves in self, given value = op(self, args) (the functional form on the
// same arguments): value converted to self's dtype and laid out as self, or the error the in-place
// op raises instead: value of another shape (the arguments broadcast beyond self), a dtype that
// cannot be cast to self's, another device. Exact where self is a fresh tensor nothing else
// holds (passes/canonicalize.cpp); tsfuse::inplace_result and its expression form compute it.
at::Tensor inplaceResult(const at::Tensor& value, const at::Tensor& self);

// x itself, as entry `entry` of at::cat(list, dim) (or at::stack with `stack`) whose entry 0 is
// `first`, or the error that op raises for it: the dim out of range, another rank or sizes. The
// checks are ATen's own, run on meta tensors of the two shapes.
at::Tensor catPiece(const at::Tensor& x, const at::Tensor& first, int64_t entry, int64_t dim, bool stack);
// mask itself, as x[mask]'s index of x (a bool mask of x's rank), or the error index_put_ raises
// for it: too many dims, or a size that is not x's.
at::Tensor indexMask(const at::Tensor& mask, const at::Tensor& x);
// max_join / min_join (ops.def): `kept` where it is the extremum of the two (ties included) or NaN,
// else `piece`; as a where, so ATen's autograd routes the gradient as the registry's derivative does.
at::Tensor extremumJoin(const at::Tensor& piece, const at::Tensor& kept, bool max);

// A Python number as ATen sees it: a 0-dim "wrapped number" tensor on `device` (the value of
// tsfuse::wrapped_number, the operand a number known only at run time becomes).
at::Tensor wrappedNumber(const c10::Scalar& s, c10::Device device = c10::kCPU);
at::Tensor reusedWrappedNumber(const c10::Scalar& s);
// A literal as a wrapped number.
at::Tensor wrappedLiteral(const Arg& arg, c10::Device device);
c10::Scalar literalScalar(const Arg& arg);

// Whether `t` is a Python number as ATen marks one (tsfuse::wrapped_number's value).
bool isWrappedNumber(const at::Tensor& t);
// Whether argument `position` of `ins`, an operand whose value is `operand`, is a number known
// only at run time that the op reads by value (readsNumberByValue): RefArgs reads it as the number,
// and the fast paths bind it as a literal (kernels/runtime/bind_numbers.h).
bool numberReadByValue(const Instr& ins, size_t position, const at::Tensor& operand);

// Throws c10::Error unless `n` is the number of operands `e` takes.
void checkOperandCount(const Expr& e, size_t n);

// An instruction's arguments as its registry reference (kernels/ir/ops.def) reads them.
class RefArgs {
 public:
  RefArgs(const Instr& ins, const std::vector<at::Tensor>& values, at::TensorList inputs)
      : ins_(ins), values_(values), inputs_(inputs) {}
  // Argument k as a tensor: an operand, a value, or a literal as ATen sees a Python number (a
  // 0-dim CPU wrapped number whatever the tensors' device: ATen's CUDA kernels read it on the host).
  at::Tensor T(size_t k) const;
  // Argument k as a Python number: a literal, or a number read by value (number()).
  c10::Scalar S(size_t k) const;
  std::optional<at::Tensor> optT(size_t k) const;
  std::optional<c10::Scalar> optS(size_t k) const;
  // Whether argument k is a Python number: a literal, or a number known only at run time read by
  // value (a wrapped-number operand where readsNumberByValue holds), which takes the op's Scalar
  // overload as the graph's number did.
  bool literal(size_t k) const { return ins_.args[k].isLiteral() || number(k); }
  bool tensor(size_t k) const { return ins_.args[k].isTensor() && !number(k); }
  c10::ScalarType dtype(size_t k) const { return ins_.args[k].dtype; }
  c10::Device device(size_t k) const { return ins_.args[k].device; }

 private:
  bool number(size_t k) const;

  const Instr& ins_;
  const std::vector<at::Tensor>& values_;
  at::TensorList inputs_;
};

// Evaluates instruction `k` given its already evaluated arguments (its registry reference).
at::Tensor evalInstr(const Instr& ins, const std::vector<at::Tensor>& values, at::TensorList inputs);

// Value of every instruction (for analysis); keeps all of them alive.
std::vector<at::Tensor> evalAtenAll(const Expr& e, at::TensorList inputs);
// Value of the expression; frees each intermediate after its last use, as the interpreter would.
at::Tensor evalAten(const Expr& e, at::TensorList inputs);
at::Tensor applyReduction(const ReduceSpec& r, const at::Tensor& value);
// max/min(x, dim, keepdim)'s values: tsfuse::extremum_values, what a routed amax/amin computes.
at::Tensor extremumValues(const at::Tensor& x, int64_t dim, bool keepdim, bool max);
// Every output of the reduction: (values, indices) for max/min, else the one result.
std::vector<at::Tensor> applyReductionAll(const ReduceSpec& r, const at::Tensor& value);
// The epilogue's value for the reduced value `reduced` (r.epilogue must be set).
at::Tensor applyEpilogue(const ReduceSpec& r, const at::Tensor& reduced, at::TensorList epilogueOperands);
// max/min with indices: the epilogue reads ($0 values, $1 indices, $2... its operands), and its
// value takes the indices' place (the op's second output).
at::Tensor applyIndicesEpilogue(const ReduceSpec& r, const at::Tensor& values, const at::Tensor& indices,
                                at::TensorList epilogueOperands);
// Its operands: the values, the indices where it reads them ($1: an epilogue of the values alone
// drops them), then `epilogueOperands`.
std::vector<at::Tensor> indicesEpilogueOperands(const ReduceSpec& r, at::Tensor values, at::Tensor indices,
                                                at::TensorList epilogueOperands);
// The reduction text of the op: "sum", "norm:2.0", "var:1.0", ...
std::string reductionText(const ReduceSpec& r);

// "sum(dim=[1, 2], keepdim=True)": for logs and the report, and a stage of tsfuse::reduce_chain
// (kernels/runtime/chain.h parses it back).
std::string describe(const ReduceSpec& r);

}  // namespace tsfuse
