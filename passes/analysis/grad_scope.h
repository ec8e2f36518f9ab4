// Autograd-mode scopes: a fused op runs in one autograd mode, so the nodes it replaces must all
// run in one. `with torch.no_grad():` (and enable_grad(), inference_mode(), ...) scripts to
// prim::Enter / prim::Exit around the block's nodes (autocast too), torch.set_grad_enabled(b)
// to aten::set_grad_enabled; a value computed inside such a block carries no gradient to the code
// after it (complete IoU's `alpha`, a weight of the loss that must not be differentiated).
//
//   %v = aten::sub(...)                  a region may hold %v and %r, or %alpha alone,
//   prim::Enter(%no_grad)                but not %alpha with either: fused with %r, the
//   %alpha = aten::div(%v, ...)          op would differentiate through %alpha
//   prim::Exit(%no_grad)
//   %r = aten::sub(%iou, aten::mul(%alpha, %v))
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <string>

namespace tsfuse {

// Whether `n` changes the autograd mode of the nodes after it in its block, for fusion: the
// prim::Enter / prim::Exit of a sealed no_grad block (sealedNoGradBlock) do not.
bool changesGradMode(const torch::jit::Node* n);

// The prim::Exit of the `with torch.no_grad():` block `enter` opens (nullptr when `enter` is not
// such a prim::Enter).
torch::jit::Node* noGradBlockExit(const torch::jit::Node* enter);

// Whether `v` is read after `n` (a later node of n's block, or inside one) or outside n's block.
bool readAfter(const torch::jit::Value* v, const torch::jit::Node* n);

// Whether the no_grad block opened by `enter` hands the code after it no tensor but through
// aten::detach (seal_no_grad_blocks): a fused op spanning it differentiates as eager.
bool sealedNoGradBlock(const torch::jit::Node* enter);

// The strict form, for rewrites that move a write or a read of a value made outside the block
// into it or out of it (canonicalize's in-place -> out-of-place): every Enter/Exit counts.
bool changesGradModeStrictly(const torch::jit::Node* n);

// Whether one fused op may replace both `a` and `b`: nodes of one block with no node that changes
// the autograd mode between them.
bool sameGradScope(const torch::jit::Node* a, const torch::jit::Node* b);

// Whether `v` reaches `n` with no change of the autograd mode between its definition and n (in n's
// block and, up the blocks holding it, before the node holding n): a rewrite may then read v at n
// instead of what the nodes between made of it (a view of v, a reshape sunk to its reader).
bool readsInGradScope(const torch::jit::Value* v, const torch::jit::Node* n);

// The reason a fusion pass records when sameGradScope(a, b) fails ("" when it holds); `strict`:
// with changesGradModeStrictly.
std::string gradScopeBoundary(const torch::jit::Node* a, const torch::jit::Node* b, bool strict = false);

}  // namespace tsfuse
