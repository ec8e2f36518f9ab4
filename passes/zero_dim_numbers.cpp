#include "passes/zero_dim_numbers.h"

#include <torch/csrc/jit/ir/constants.h>

#include <optional>
#include <vector>

namespace tsfuse {

using torch::jit::Block;
using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

namespace {

// The 0-dim tensor constant n reads as add/sub/mul/div's `other` (CanonicalizeOps' slot).
std::optional<at::Tensor> zeroDimConstantOther(Node* n) {
  const bool binary = n->matches("aten::add(Tensor self, Tensor other, *, Scalar alpha) -> Tensor") ||
                      n->matches("aten::sub(Tensor self, Tensor other, *, Scalar alpha) -> Tensor") ||
                      n->matches("aten::mul(Tensor self, Tensor other) -> Tensor") ||
                      n->matches("aten::div(Tensor self, Tensor other) -> Tensor");
  if (!binary) return std::nullopt;
  auto other = n->get<at::Tensor>(c10::attr::other);
  if (!other || other->dim() != 0) return std::nullopt;
  return other;
}

bool numbersForZeroDimOthers(Block* block) {
  bool any = false;
  for (auto it = block->nodes().begin(); it != block->nodes().end();) {
    Node* n = *it++;
    for (Block* sub : n->blocks()) any |= numbersForZeroDimOthers(sub);
    auto other = zeroDimConstantOther(n);
    if (!other) continue;
    Graph& g = *n->owningGraph();
    torch::jit::WithInsertPoint guard(n);
    std::vector<Value*> inputs = n->inputs().vec();
    inputs.at(1) = g.insertConstant(other->item());
    Node* scalar = g.insertNode(g.create(n->kind(), inputs));  // the Scalar overload
    scalar->copyMetadata(n);
    scalar->output()->copyMetadata(n->output());
    n->output()->replaceAllUsesWith(scalar->output());
    n->destroy();
    any = true;
  }
  return any;
}

bool tensorsForFoldedZeroDimOthers(Block* block, const std::unordered_set<Node*>& before) {
  bool any = false;
  for (Node* n : block->nodes()) {
    for (Block* sub : n->blocks()) any |= tensorsForFoldedZeroDimOthers(sub, before);
    auto other = zeroDimConstantOther(n);
    if (!other || before.count(n->input(1)->node())) continue;
    Graph& g = *n->owningGraph();
    torch::jit::WithInsertPoint guard(n);
    Value* folded = n->input(1);
    Value* made =
        g.insert(c10::aten::tensor, {other->item()},
                 {torch::jit::NamedValue("dtype", other->scalar_type()),
                  torch::jit::NamedValue("device", other->device()), torch::jit::NamedValue("requires_grad", false)});
    made->setType(folded->type());
    n->replaceInput(1, made);
    if (!folded->hasUses()) folded->node()->destroy();
    any = true;
  }
  return any;
}

}  // namespace

bool ZeroDimNumbers(std::shared_ptr<Graph>& graph) { return numbersForZeroDimOthers(graph->block()); }

bool UnfoldZeroDimOthers(Graph& graph, const std::unordered_set<Node*>& before) {
  return tensorsForFoldedZeroDimOthers(graph.block(), before);
}

}  // namespace tsfuse
