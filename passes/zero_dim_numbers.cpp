#include "passes/zero_dim_numbers.h"

#include <torch/csrc/jit/ir/constants.h>

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

}  // namespace

bool ZeroDimNumbers(std::shared_ptr<Graph>& graph) { return numbersForZeroDimOthers(graph->block()); }

}  // namespace tsfuse
