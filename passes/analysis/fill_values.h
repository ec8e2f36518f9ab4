// What x[mask] = c writes, for canonicalize's bool-mask fill (passes/canonicalize.cpp): the
// number c of index_put_'s value, and whether where(mask, c, x) converts it as index_put_ does.
#pragma once

#include <c10/core/Scalar.h>
#include <torch/csrc/jit/ir/ir.h>

#include <optional>
#include <string>
#include <unordered_map>

namespace tsfuse {

// The value each in-place rewrite made, to the value it was written into (their dtype and device
// are one).
using MadeFrom = std::unordered_map<torch::jit::Value*, torch::jit::Value*>;

// Whether index_put_'s value is tensor(c, dtype=x.dtype, device=x.device), as scripting builds it:
// a 0-dim tensor of x's dtype and device, which where(mask, value, x) writes unchanged. x's dtype
// and device may be read from what x is a view or copy of, or from the value `madeFrom` says x
// was made from.
bool scriptedValue(torch::jit::Value* value, torch::jit::Value* x, const MadeFrom& madeFrom);

// The number c of index_put_'s value in x[mask] = c, or nullopt and *why. Scripted code builds the
// value as aten::tensor(c, dtype(x), device(x), False) (c converted to x's dtype, then copied),
// traces as a constant 0-dim tensor: index_put_ of one bool mask and a one-element CPU value is
// masked_fill_(mask, value.item()), which converts c to x's dtype (raising where it overflows).
std::optional<c10::Scalar> fillNumber(torch::jit::Value* value, torch::jit::Value* x, const MadeFrom& madeFrom,
                                      std::string& why);

// c itself where where(mask, c, x) holds what x holds after index_put_; otherwise nullopt and *why.
// where converts c itself, to x's dtype when c's kind cannot promote x's. The two conversions
// agree where c converts exactly: an integer into an int64 or floating x, a float-exact number
// into a floating x, and an integer in [0, 127] (as an int) into any but bool.
std::optional<c10::Scalar> convertsAlike(const c10::Scalar& number, torch::jit::Value* x, std::string& why);

}  // namespace tsfuse
