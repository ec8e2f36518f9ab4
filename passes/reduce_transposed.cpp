// reduce_transposed (passes/reduce_transposed.h):
//
//   %y = aten::add(%a, %b)                          %y = aten::add(%a, %b)
//   %t = aten::transpose(%y, -2, -1)         =>     %r = aten::logsumexp(%y, [-2], False)
//   %r = aten::logsumexp(%t, [-1], False)
#include "passes/reduce_transposed.h"

#include "passes/analysis/grad_scope.h"
#include "passes/analysis/op_table.h"
#include "passes/analysis/shape_facts.h"
#include "passes/analysis/symbolic_shapes.h"
#include "passes/framework/driver.h"

#include <torch/csrc/jit/ir/constants.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

namespace tsfuse {
namespace {

using torch::jit::Node;
using torch::jit::Value;

// The reductions whose ATen kernels iterate in TensorIterator's stride order (reduce_transposed.h).
bool stridesOrderIt(Reduction r) { return r != Reduction::Var && r != Reduction::Std; }

class ReduceTransposedPattern : public Pattern {
 public:
  ReduceTransposedPattern() : Pattern("reduce_transposed", WalkOrder::Forward, NestedBlocks::AtOwner) {}

  bool matchAndRewrite(Node* n, Rewriter& rw) override {
    ReductionMatch red;
    if (!matchReduction(n, red, nullptr) || !stridesOrderIt(red.spec.kind)) return false;
    // argmax/argmin over every dim index the flattened operand: its order is the dims' positions.
    const bool flatIndex = !red.spec.dims && (red.spec.kind == Reduction::Argmax || red.spec.kind == Reduction::Argmin);
    if (flatIndex) return false;
    Node* t = red.input->node();
    if (t->kind() != c10::aten::transpose && t->kind() != c10::aten::t) return false;
    Value* x = t->input(0);
    const std::vector<Node*> nodes = {t, n};
    auto reject = [&](const std::string& why) {
      return rw.notifyMatchFailure(
          nodes, describeNode(n) + " of a transpose of %" + x->debugName() + " stays over the transposed view: " + why);
    };
    ElementwiseMatch m;
    if (x->node()->outputs().size() != 1 || !matchElementwise(x->node(), m, nullptr))
      return reject("it is not an elementwise op's result (whose dense layout fixes the order the reduction folds in)");
    if (!readsInGradScope(red.input, n) || !readsInGradScope(x, t))
      return reject("the autograd mode changes between them");

    const std::optional<size_t> typed = x->type()->expectRef<c10::TensorType>().dim();
    int64_t rank = typed ? static_cast<int64_t>(*typed) : -1;  // -1: not known
    int64_t i = 0, j = 1;
    if (t->kind() == c10::aten::t) {
      if (RankBounds().atLeast(x) < 2) return reject("t() of a tensor not provably of rank 2 swaps nothing there");
      rank = 2;
    } else {
      auto a = constantInt(t->input(1)), b = constantInt(t->input(2));
      if (!a || !b) return reject("its dims are not constants");
      i = *a, j = *b;
    }
    std::optional<std::vector<int64_t>> dims = red.spec.dims;
    // One frame for every dim: normalized where the rank is known, else all of one sign.
    std::vector<int64_t*> all = {&i, &j};
    if (dims)
      for (int64_t& d : *dims) all.push_back(&d);
    if (rank >= 0) {
      for (int64_t* d : all) {
        if (*d < -rank || *d >= rank) return reject("a dim is out of range (the ops raise their own errors)");
        if (*d < 0) *d += rank;
      }
    } else if (!std::all_of(all.begin(), all.end(), [&](int64_t* d) { return (*d < 0) == (i < 0); })) {
      return reject("its dims mix signs and the rank of %" + x->debugName() + " is not known");
    }
    if (i == j) return reject("it swaps a dim with itself");

    if (dims) {
      const auto has = [&](int64_t d) { return std::find(dims->begin(), dims->end(), d) != dims->end(); };
      const int swappedReduced = has(i) + has(j);
      const bool adjacent = i - j == 1 || j - i == 1;
      if (swappedReduced == 0) return reject("it reduces neither swapped dim, whose order the result keeps");
      if (swappedReduced == 1 && (red.spec.keepdim || !adjacent))
        return reject("it reduces one of two swapped dims " +
                      std::string(red.spec.keepdim ? "with keepdim" : "that are not adjacent") +
                      ", so its result's dims would come out in another order");
      for (int64_t& d : *dims) d = d == i ? j : d == j ? i : d;
    }

    const std::optional<size_t> at = dimArgumentOf(n);
    if (dims && !at) return false;

    torch::jit::Graph& g = rw.graph();
    torch::jit::WithInsertPoint guard(n);
    Value* swapped = nullptr;  // the dims argument, an int or an int[] as it was
    if (dims)
      swapped = n->input(*at)->type()->kind() == c10::TypeKind::IntType ? g.insertConstant(dims->front())
                                                                        : g.insertConstant(*dims);
    Node* r = g.insertNode(g.createClone(n, [&](Value* v) { return v == red.input ? x : v; }));
    r->setSourceRange(n->sourceRange());
    if (swapped) r->replaceInput(*at, swapped);
    for (size_t k = 0; k < n->outputs().size(); ++k) r->output(k)->setType(n->output(k)->type());
    RewriteEvent e;
    e.add(nodes);
    e.reason = describeNode(n) + " over a transpose of an elementwise result -> over the result, its dims swapped";
    e.fusedOp = r->kind().toQualString();
    for (size_t k = 0; k < n->outputs().size(); ++k) rw.replaceAllUsesWith(n->output(k), r->output(k));
    rw.notifyRewrite(std::move(e), r);
    rw.erase(n);
    if (!t->output()->hasUses()) rw.erase(t);
    return true;
  }
};

}  // namespace

bool ReduceTransposed(std::shared_ptr<torch::jit::Graph>& graph) {
  ReduceTransposedPattern pattern;
  return runPattern(graph, pattern);
}

}  // namespace tsfuse
