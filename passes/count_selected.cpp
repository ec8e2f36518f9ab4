// count_selected (passes/count_selected.h):
//
//   %l : Tensor?[] = prim::ListConstruct(%m)       %m = aten::gt(%loss, 1e-16)
//   %s : Tensor = aten::index(%loss, %l)
//   %n : int = aten::size(%s, 0)                    (aten::numel(%s), aten::len(%s))
// =>
//   %c : Tensor = aten::sum(%m, None)
//   %n : int = aten::Int(%c)
//
// Both new nodes go where the index was, so they read %m as it was then.
#include "passes/count_selected.h"

#include "passes/analysis/shape_facts.h"
#include "passes/analysis/symbolic_shapes.h"
#include "passes/framework/driver.h"

namespace tsfuse {
namespace {

using torch::jit::Node;
using torch::jit::Value;

// Whether `use` reads only the selection's length: size(s, 0), size(s, -1) of the 1-d selection,
// numel(s), len(s).
bool readsLength(Node* use) {
  if (use->matches("aten::numel(Tensor self) -> int") || use->matches("aten::len.Tensor(Tensor t) -> int")) return true;
  if (!use->matches("aten::size.int(Tensor self, int dim) -> int")) return false;
  const std::optional<int64_t> d = constantInt(use->input(1));
  return d && (*d == 0 || *d == -1);
}

class CountSelectedPattern : public Pattern {
 public:
  CountSelectedPattern() : Pattern("count_selected", WalkOrder::Forward, NestedBlocks::AtOwner) {}

  bool matchAndRewrite(Node* n, Rewriter& rw) override {
    if (!n->matches("aten::index.Tensor(Tensor self, Tensor?[] indices) -> Tensor")) return false;
    Value* selection = n->output();
    if (selection->uses().empty()) return false;
    for (const torch::jit::Use& u : selection->uses())
      if (!readsLength(u.user)) return false;  // the values are read: no candidate
    Node* list = n->input(1)->node();
    if (list->kind() != c10::prim::ListConstruct || list->inputs().size() != 1)
      return rw.notifyMatchFailure({n}, "x[...] read only for its length: not one mask");
    Value* mask = list->input(0);
    if (RankBounds().atLeast(n->input(0)) < 1)
      return rw.notifyMatchFailure({n}, "x[m] read only for its length: x may be 0-dim (index raises then)");
    if (!provablyBool(mask))
      return rw.notifyMatchFailure({n}, "x[m] read only for its length: m is not provably a bool tensor");
    if (!provablySameLayout(mask, n->input(0)))
      return rw.notifyMatchFailure({n},
                                   "x[m] read only for its length: m is not provably of x's shape "
                                   "(index raises for another)");
    torch::jit::Graph& g = rw.graph();
    torch::jit::WithInsertPoint at(n);
    Node* count = g.insertNode(g.create(c10::aten::sum, {mask, g.insertConstant(c10::IValue())}));
    count->output()->setType(c10::TensorType::get());
    Node* length = g.insertNode(g.create(c10::aten::Int, {count->output()}));
    length->output()->setType(c10::IntType::get());
    for (Node* node : {count, length}) node->setSourceRange(n->sourceRange());
    std::vector<Node*> readers;
    for (const torch::jit::Use& u : selection->uses()) readers.push_back(u.user);
    RewriteEvent e;
    e.add(n).add(readers);
    e.reason = "x[m] read only for its length -> the count of m (no selection made)";
    e.fusedOp = "aten::sum";
    rw.notifyRewrite(std::move(e), count);
    for (Node* r : readers) {
      rw.replaceAllUsesWith(r->output(), length->output());
      rw.erase(r);
    }
    rw.erase(n);
    return true;
  }
};

}  // namespace

bool CountSelected(std::shared_ptr<torch::jit::Graph>& graph) {
  CountSelectedPattern p;
  return runPattern(graph, p);
}

}  // namespace tsfuse
