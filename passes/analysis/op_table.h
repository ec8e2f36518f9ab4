// Which TorchScript nodes the fusion passes understand, and how each becomes an expression
// instruction or a reduction. Matching is by schema (name + overload), so scripted and traced
// graphs, and every spelling that resolves to the same ATen overload, are handled alike.
#pragma once

#include "kernels/reference/aten_eval.h"
#include "kernels/ir/expr.h"

#include <torch/csrc/jit/ir/ir.h>

#include <string>
#include <vector>

namespace tsfuse {

using torch::jit::Node;
using torch::jit::Value;

// One expression argument of a matched node: a tensor Value (leaf or in-region value), an
// already-evaluated constant (literal, None, dtype), or a Python number known only at run time
// (a graph input, a module attribute, a size): an operand of the fused op once wrapped
// (insertOperandList), at a tensor-or-number position of the op (kernels/runtime/bind_numbers.h).
struct MatchedArg {
  Value* tensor = nullptr;  // set for tensor arguments
  Arg constant;             // for constants
  Value* number = nullptr;  // set for numbers known only at run time
  // The Value the fused op reads as an operand, if any.
  Value* operand() const { return tensor ? tensor : number; }
};

struct ElementwiseMatch {
  Op op;
  std::vector<MatchedArg> args;
};

// Whether v is a tensor Value (not a number, list, ...).
bool isTensor(Value* v);

// True when `n` is a functional elementwise op the expression can carry; otherwise false with
// the reason in *why (unknown op, non-constant scalar, unsupported argument value, ...).
bool matchElementwise(Node* n, ElementwiseMatch& out, std::string* why);

// Whether the matched op over views of its tensor arguments computes the same view of its result
// (sink_views, sink_reshapes move views that way): not for an op whose checks read its operands'
// sizes (kChecksSizes), since a view changes what they see.
bool viewsCommute(const ElementwiseMatch& m);

struct ReductionMatch {
  Value* input = nullptr;
  ReduceSpec spec;
};

bool matchReduction(Node* n, ReductionMatch& out, std::string* why);
// The position of a node's `dim` argument (a reduction's int or int[] dims), or nullopt.
std::optional<size_t> dimArgumentOf(Node* n);

// True when `n` reads nothing of its tensor input but metadata: its dtype, device, layout, sizes (all, or
// one dim's), rank or element count.
bool isMetadataRead(Node* n);
// How many readers of v read its values: its uses but those reading its metadata alone.
size_t valueReaders(torch::jit::Value* v);

// True when `n` only reads its tensor inputs and returns fresh tensors or metadata: a matched
// elementwise op other than to() (which may return its input), a matched reduction, or a dtype,
// device, size, dim or numel query. Such a use can neither observe a later write to its input
// nor let one escape.
bool isFreshReader(Node* n);

// Whether `n` is an aten in-place op (`x.add_(y)`: a name ending in one underscore, or `x &= y`:
// aten::__iand__; its first argument a tensor, the one it writes).
bool isInPlaceAtenOp(const Node* n);

// The out-of-place op's name of an in-place op's (add_ -> add, __iand__ -> __and__), or "".
std::string outOfPlaceName(const std::string& inPlace);

// Whether `n` is one of tsfuse's own ops (a fused op, a view helper, a check, a wrapped number).
bool isTsfuseOp(const Node* n);

}  // namespace tsfuse
