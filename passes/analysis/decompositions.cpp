#include "passes/analysis/decompositions.h"

#include "kernels/runtime/product_sums.h"
#include "passes/analysis/shape_facts.h"

#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/irparser.h>

#include <cmath>

namespace tsfuse {
namespace {

using torch::jit::Node;

// p is a constant, finite. ATen reports an inf norm over an empty dim with the dim it was given
// (pairwise_distance's is the positive innermost one), so only finite orders decompose.
bool finiteOrder(Node* n, std::string* why) {
  const std::optional<c10::IValue> p = torch::jit::toIValue(n->namedInput("p"));
  if (!p || !(p->isDouble() || p->isInt())) {
    if (why) *why = "p is not a constant";
    return false;
  }
  if (!std::isfinite(p->toScalar().toDouble())) {
    if (why) *why = "p is infinite (ATen's error over an empty dim names the dim it was given)";
    return false;
  }
  return true;
}

bool always(Node*, std::string*) { return true; }

// An operand is an expanded view, which matmul copies whole before its batched product.
bool expandedOperand(Node* n, std::string*) {
  for (torch::jit::Value* v : n->inputs())
    if (isExpand(v->node())) return true;
  return false;  // no candidate: the matmul copies nothing
}

struct Entry {
  const char* schema;
  bool (*applies)(Node*, std::string*);
  const char* guard;
  const char* ir;
};

// Each unguarded graph is what the op's ATen kernel calls (aten/src/ATen/native), in the same
// order, so the decomposed graph run unfused gives the op's bits.
const Entry kEntries[] = {
    // Distance.cpp: norm(x1 - x2 + eps, p, innermost_dim, keepdim); norm is linalg_vector_norm.
    // innermost_dim = max(x1.dim(), x2.dim()) - 1, the broadcast result's last dim: -1.
    {"aten::pairwise_distance(Tensor x1, Tensor x2, float p=2., float eps=9.9999999999999995e-07, bool keepdim=False) "
     "-> Tensor",
     finiteOrder, nullptr, R"IR(
graph(%x1 : Tensor, %x2 : Tensor, %p : float, %eps : float, %keepdim : bool):
  %one : int = prim::Constant[value=1]()
  %last : int = prim::Constant[value=-1]()
  %none : NoneType = prim::Constant()
  %diff : Tensor = aten::sub(%x1, %x2, %one)
  %shifted : Tensor = aten::add(%diff, %eps, %one)
  %dims : int[] = prim::ListConstruct(%last)
  %out : Tensor = aten::linalg_vector_norm(%shifted, %p, %dims, %keepdim, %none)
  return (%out)
)IR"},
    // Distance.cpp: at::norm(self - other, p), whose checks (the dtype's) are the op's.
    {"aten::dist(Tensor self, Tensor other, Scalar p=2) -> Tensor", always, nullptr, R"IR(
graph(%self : Tensor, %other : Tensor, %p : Scalar):
  %one : int = prim::Constant[value=1]()
  %diff : Tensor = aten::sub(%self, %other, %one)
  %out : Tensor = aten::norm(%diff, %p)
  return (%out)
)IR"},
    // A matrix-vector product over an expanded operand (soft k-means' weights @ x[:, None, None]
    // .expand(...)): where matmul copies the expanded matrix, its sum of products over the
    // broadcast reads it in place. The products rounded and summed in tsfuse's order, not the BLAS's: the
    // reductions' tolerance (docs/exactness.md). Guarded (kernels/runtime/product_sums.h).
    {"aten::matmul(Tensor self, Tensor other) -> Tensor", expandedOperand, kProductSumsOp, R"IR(
graph(%self : Tensor, %other : Tensor):
  %column : int = prim::Constant[value=-1]()
  %inner : int = prim::Constant[value=-2]()
  %row : int = prim::Constant[value=-3]()
  %false : bool = prim::Constant[value=0]()
  %none : NoneType = prim::Constant()
  %a : Tensor = aten::unsqueeze(%self, %column)
  %b : Tensor = aten::unsqueeze(%other, %row)
  %products : Tensor = aten::mul(%a, %b)
  %dims : int[] = prim::ListConstruct(%inner)
  %out : Tensor = aten::sum(%products, %dims, %false, %none)
  return (%out)
)IR"},
};

}  // namespace

const std::vector<Decomposition>& decompositions() {
  static const std::vector<Decomposition> table = [] {
    std::vector<Decomposition> out;
    for (const Entry& e : kEntries) {
      auto g = std::make_shared<torch::jit::Graph>();
      torch::jit::parseIR(e.ir, g.get());
      out.push_back({e.schema, e.applies, e.guard, std::move(g)});
    }
    return out;
  }();
  return table;
}

const Decomposition* decompositionOf(Node* n) {
  for (const Decomposition& d : decompositions())
    if (n->matches(d.schema)) return &d;
  return nullptr;
}

}  // namespace tsfuse
