// prototype_casts: a cast whose target type is known only at run time reads it from a 0-dim
// prototype of that type, the operand the registry's to_other casts to, so the cast fuses; what
// the type came from is then read for its metadata alone (which fuse_pairwise serves from a
// stand-in, tsfuse::shape_of, without computing it).
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

namespace tsfuse {

// Drops an identity to() (no dtype, layout, device or memory format, copy=False: it returns its
// input; scripted y.type() makes one), and rewrites, where x is a fusible elementwise op's result:
//   x.to(y) (aten::to.other), x.type_as(y)  -> x.to(p), p = torch.empty([], dtype=y.dtype,
//                                              layout=y.layout, device=y.device)
//   x.to(d) (aten::to.dtype, d not constant) -> x.to(p), p of dtype d and x's layout and device
// Each is x.to(p) exactly: to() reads only the dtype, layout and device of its target. A type_as
// of any other value becomes x.to(y): the same cast, spelled with the schema that says it may
// return x, so that the read hazards see an in-place write to x as a write to its result.
bool PrototypeCasts(std::shared_ptr<torch::jit::Graph>& graph);

}  // namespace tsfuse
