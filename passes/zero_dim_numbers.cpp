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

bool isBinaryWithTensorOther(Node* n) {
  return n->matches("aten::add(Tensor self, Tensor other, *, Scalar alpha) -> Tensor") ||
         n->matches("aten::sub(Tensor self, Tensor other, *, Scalar alpha) -> Tensor") ||
         n->matches("aten::mul(Tensor self, Tensor other) -> Tensor") ||
         n->matches("aten::div(Tensor self, Tensor other) -> Tensor");
}

bool numbersForZeroDimOthers(Block* block) {
  bool any = false;
  for (auto it = block->nodes().begin(); it != block->nodes().end();) {
    Node* n = *it++;
    for (Block* sub : n->blocks()) any |= numbersForZeroDimOthers(sub);
    if (!isBinaryWithTensorOther(n)) continue;
    auto other = n->get<at::Tensor>(c10::attr::other);
    if (!other || other->dim() != 0) continue;
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

// The constant 0-dim `other` of such an op, if it is a tensor constant not in `before`.
std::optional<at::Tensor> foldedZeroDimOther(Node* n, const std::unordered_set<Node*>& before) {
  if (!isBinaryWithTensorOther(n) || before.count(n->input(1)->node())) return std::nullopt;
  auto other = n->get<at::Tensor>(c10::attr::other);
  if (!other || other->dim() != 0) return std::nullopt;
  return other;
}

bool tensorsForFoldedZeroDimOthers(Block* block, const std::unordered_set<Node*>& before) {
  bool any = false;
  for (Node* n : block->nodes()) {
    for (Block* sub : n->blocks()) any |= tensorsForFoldedZeroDimOthers(sub, before);
    auto other = foldedZeroDimOther(n, before);
    if (!other) continue;
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
