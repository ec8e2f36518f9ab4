// count_bool_sums (passes/count_bool_sums.h):
//
//   %m = aten::__and__(%a, %b)               (also read by a fused op's region: stored)
//   %n = aten::sum(%m, None)         =>      %n = aten::count_nonzero(%m)
//   %k = aten::sum(%m, [1], True)    =>      %k = tsfuse::reduce([%m], "v1: to($0, bool)", "sum", [1], True)
//                                            (%m made from tensors not provably of one shape: a broadcast)
#include "passes/count_bool_sums.h"

#include "passes/analysis/op_table.h"
#include "passes/analysis/shape_facts.h"
#include "passes/analysis/symbolic_shapes.h"
#include "passes/framework/driver.h"
#include "passes/regions/rewrite.h"

#include <torch/csrc/jit/ir/constants.h>

namespace tsfuse {
namespace {

using torch::jit::Node;

// Whether bool value v may be larger than every tensor it is computed from: an elementwise op
// (through the bool elementwise ops that make its operands) over two tensors not provably of one
// shape, a mask over pairs. A mask of one tensor's shape (ultralytics' keypoint mask [N, 17],
// summed over its 17) is not: ATen's copy of it is small, and the fused op's fixed cost is not.
bool mayBroadcast(Value* v, int depth = 0) {
  ElementwiseMatch m;
  if (depth > 4 || !matchElementwise(v->node(), m, nullptr)) return false;
  std::optional<std::vector<SymSize>> first;
  bool seen = false;
  for (const MatchedArg& a : m.args) {
    if (!a.tensor) continue;
    auto shape = symbolicShape(a.tensor);
    if (seen && (!first || !shape || *first != *shape)) return true;
    if (!seen) first = shape, seen = true;
    if (provablyBool(a.tensor) && mayBroadcast(a.tensor, depth + 1)) return true;
  }
  return false;
}

class CountBoolSumsPattern : public Pattern {
 public:
  CountBoolSumsPattern() : Pattern("count_bool_sums", WalkOrder::Forward, NestedBlocks::AtOwner) {}

  bool matchAndRewrite(Node* n, Rewriter& rw) override {
    const bool all = n->matches("aten::sum(Tensor self, *, ScalarType? dtype=None) -> Tensor");
    if (!all && !n->matches("aten::sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? "
                            "dtype=None) -> Tensor"))
      return false;
    const std::optional<c10::IValue> dtype = torch::jit::toIValue(n->namedInput("dtype"));
    if (!dtype || !dtype->isNone() || !provablyBool(n->input(0))) return false;
    if (!all && !mayBroadcast(n->input(0))) return false;  // (no broadcast stored: not a candidate)
    torch::jit::Graph& g = rw.graph();
    torch::jit::WithInsertPoint at(n);
    Value* count = nullptr;
    RewriteEvent e;
    e.add(n);
    if (all) {
      count = g.insert(c10::Symbol::fromQualString("aten::count_nonzero"), {n->input(0), c10::IValue()});
      e.reason = "sum of a stored bool value -> its count_nonzero (no int64 copy of it)";
    } else {
      // The fused op's count of its bool operand (the identity program: no instruction), folded in
      // int64 from the bools in place, with sum's dims, keepdim and errors (an empty dim list, too).
      Value* list = insertTensorList(g, {n->input(0)});
      count = g.insert(c10::Symbol::fromQualString("tsfuse::reduce"),
                       {list, std::string("v1: to($0, bool)"), std::string("sum"), n->input(1), n->input(2)});
      e.reason = "sum over dims of a stored bool value -> tsfuse::reduce's count of it (no int64 copy of it)";
    }
    count->setType(n->output()->type());
    count->node()->setSourceRange(n->sourceRange());
    e.fusedOp = count->node()->kind().toQualString();
    rw.notifyRewrite(std::move(e), count->node());
    rw.replaceAllUsesWith(n->output(), count);
    rw.erase(n);
    return true;
  }
};

}  // namespace

bool CountBoolSums(std::shared_ptr<torch::jit::Graph>& graph) {
  CountBoolSumsPattern p;
  return runPattern(graph, p);
}

}  // namespace tsfuse
