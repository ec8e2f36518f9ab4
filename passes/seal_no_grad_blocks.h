// seal_no_grad_blocks: each tensor a `with torch.no_grad():` block hands to the code after it is
// read there through aten::detach, which says in the dataflow what the block's autograd mode did
// (a value computed without grad carries no gradient). A fusion region may then span the block
// (passes/analysis/grad_scope.h: a sealed block does not change the mode for fusion): its fused
// op differentiates through detach as eager does not through the block. Complete IoU's penalty:
//
//   prim::Enter(%no_grad)                          prim::Enter(%no_grad)
//   %alpha = aten::div(%v, %den)                   %alpha = aten::div(%v, %den)
//   prim::Exit(%no_grad)                   ->      prim::Exit(%no_grad)
//   %p = aten::mul(%alpha, %v)                     %a = aten::detach(%alpha)
//                                                  %p = aten::mul(%a, %v)
//
// Other `with` blocks (enable_grad, autocast, ...) and set_grad_enabled stay boundaries.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

namespace tsfuse {

bool SealNoGradBlocks(std::shared_ptr<torch::jit::Graph>& graph);

}  // namespace tsfuse
