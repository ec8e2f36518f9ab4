// Facts about a tensor value that TorchScript's types do not carry but a rewrite needs, proven
// from how the value was computed. Each answers "provably yes" or "not known"; never a guess.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

namespace tsfuse {

// values, indices = aten::max|min(x, dim, keepdim)
bool isMinMaxDim(torch::jit::Node* n);
// aten::where(condition, <number>, other)
bool isWhereScalarSelf(torch::jit::Node* n);

// `v` is a bool tensor for every input: a comparison or logical op, or &, |, ^, ~ of such values.
bool provablyBool(torch::jit::Value* v);

// `v` has exactly the shape and strides of `x`, a fresh (dense) tensor, for every input: v is x,
// or the result of TensorIterator elementwise ops whose tensor leaves all have x's layout (such
// an op lays its result out as its inputs when they agree). Known to have x's layout: x; the
// other output of the max|min(dim) that made x; and, for x = where(m, c, x0) with m of x0's
// layout, what has x0's. (masked_fill is not such an op: it returns a contiguous clone.)
bool provablySameLayout(torch::jit::Value* v, torch::jit::Value* x);

}  // namespace tsfuse
