// fold_upcast: a prim::If that picks, from a tensor's dtype alone, between the tensor and casts
// of it (torchvision's _upcast, which every box IoU variant applies to the [N, M, 2] corner
// difference) becomes the one op tsfuse::upcast, so the elementwise region continues through it
// instead of storing the difference. The If and its dtype tests (prim::dtype, is_floating_point,
// __contains__ over dtype lists, aten::to in the branches) are then dead.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

namespace tsfuse {

// The If is folded only when evaluating it for every dtype gives exactly upcast's result
// (float16/bfloat16/float8 -> float32, integers narrower than int32 and bool -> int32, complex
// -> int32, the rest unchanged): its conditions may read only constants, prim::dtype and
// aten::is_floating_point of the same tensor, int lists, __contains__, eq/ne and not, and its
// branches may only return the tensor or aten::to of it to a constant dtype. Otherwise rejected
// with a reason.
bool FoldUpcast(std::shared_ptr<torch::jit::Graph>& graph);

}  // namespace tsfuse
