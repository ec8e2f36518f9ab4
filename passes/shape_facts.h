// Facts about a tensor value that TorchScript's types do not carry but a rewrite needs, proven
// from how the value was computed. Each answers "provably yes" or "not known"; never a guess.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

namespace tsfuse {

// `v` is a bool tensor for every input: a comparison or logical op, or &, |, ^, ~ of such values.
bool provablyBool(torch::jit::Value* v);

// `v` has exactly `x`'s shape for every input: v is x, or an elementwise function whose tensor
// leaves all have x's shape. Known to have x's shape: x; both outputs of the max|min(dim) that
// made x; and, for x = masked_fill(x0, m, c) with m of x0's shape, what x0's shape is known from.
bool provablySameShape(torch::jit::Value* v, torch::jit::Value* x);

}  // namespace tsfuse
