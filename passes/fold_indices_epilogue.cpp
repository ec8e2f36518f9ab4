#include "passes/fold_indices_epilogue.h"

#include "kernels/ir/expr.h"
#include "passes/analysis/grad_scope.h"
#include "passes/analysis/read_hazards.h"
#include "passes/framework/driver.h"
#include "passes/regions/fused_values.h"

#include <torch/csrc/jit/ir/constants.h>

#include <optional>

namespace tsfuse {
namespace {

using torch::jit::Node;
using torch::jit::Value;

constexpr size_t kEpilogueInput = 5;  // tsfuse::reduce_with_indices(operands, expr, reduction, dim, keepdim, epilogue)

// How each operand of the consumer reaches the epilogue: $0 values, $1 indices.
struct Plan {
  std::vector<Arg> operand;
};

// A fused elementwise op over the values and indices of a max/min with indices  =>  its epilogue
//
//   %v, %i = tsfuse::reduce_with_indices(%l, "v1: ...", "max", 0, False, None)          [A]
//   %m = tsfuse::pairwise([%v, %i], "v1: lt($0, 0.4); full_like($1, -1); where(%0, %1, $1)", [])
// =>
//   %v, %m = tsfuse::reduce_with_indices(%l, "v1: ...", "max", 0, False,
//              "v1: lt($0, 0.4); full_like($1, -1); where(%0, %1, $1)")
//
// The epilogue's value takes the indices' place, so the indices must have no other reader (a
// full_like of them is already one of the op's instructions: the registry's shape-only reader).
// The values keep their other readers; nothing may write them between the two ops, since the
// epilogue now reads them earlier.
class FoldIndicesEpiloguePattern : public Pattern {
 public:
  FoldIndicesEpiloguePattern() : Pattern("fold_indices_epilogue", WalkOrder::Forward, NestedBlocks::First) {}

  bool matchAndRewrite(Node* consumer, Rewriter& rw) override {
    if (consumer->kind() != kPairwiseOp) return false;
    Node* list = consumer->input(0)->node();
    if (list->kind() != c10::prim::ListConstruct) return false;
    Node* reduction = indexedProducer(list);
    if (!reduction) return false;
    const std::vector<Node*> nodes{reduction, consumer};
    if (std::string scope = gradScopeBoundary(reduction, consumer); !scope.empty())
      return rw.notifyMatchFailure(nodes, "the max/min with indices and its reader: " + scope);
    const std::optional<c10::IValue> epi = torch::jit::toIValue(reduction->input(kEpilogueInput));
    if (!epi || !epi->isNone()) return rw.notifyMatchFailure(nodes, "the max/min with indices has an epilogue already");
    std::string why;
    const std::optional<Plan> plan = planFor(reduction, list, &why);
    if (!plan) return rw.notifyMatchFailure(nodes, why);
    if (std::string hazard = readHazard({reduction->output(0)}, reduction, consumer, rw.aliasDb()); !hazard.empty())
      return rw.notifyMatchFailure(nodes, hazard);
    const std::optional<c10::IValue> exprText = torch::jit::toIValue(consumer->input(1));
    if (!exprText) return rw.notifyMatchFailure(nodes, "the fused op's expression is not a constant");
    const Expr epilogue = epilogueFor(Expr::parse(exprText->toStringRef()), *plan);

    // The graph changes from here on.
    RewriteEvent event;
    event.add(reduction);
    event.add(consumer);
    event.fusedOp = reduction->kind().toQualString();
    event.expr = epilogue.str();
    event.reason = "folded " + std::string(consumer->kind().toQualString()) + " over the values and indices of %" +
                   reduction->output(0)->debugName() +
                   " into the reduction's epilogue: its value replaces the "
                   "indices, so one op returns both";
    torch::jit::Graph& g = rw.graph();
    {
      torch::jit::WithInsertPoint at(reduction);
      reduction->replaceInput(kEpilogueInput, g.insertConstant(epilogue.str()));
    }
    reduction->output(1)->setType(consumer->output()->type());
    rw.replaceAllUsesWith(consumer->output(), reduction->output(1));
    rw.erase(consumer);
    rw.erase(list);
    rw.notifyRewrite(std::move(event), reduction);
    return true;
  }

 private:
  // The max/min with indices one of the list's operands comes from.
  static Node* indexedProducer(Node* list) {
    for (Value* v : list->inputs())
      if (v->node()->kind() == kReduceIndicesOp) return v->node();
    return nullptr;
  }

  static std::optional<Plan> planFor(Node* reduction, Node* list, std::string* why) {
    Value* values = reduction->output(0);
    Value* indices = reduction->output(1);
    Plan plan;
    for (Value* v : list->inputs()) {
      if (v == values) {
        plan.operand.push_back(Arg::input(0));
      } else if (v == indices) {
        plan.operand.push_back(Arg::input(1));
      } else {
        *why = "the fused op also reads %" + v->debugName() + ", which is not the values or the indices";
        return std::nullopt;
      }
    }
    if (list->output()->uses().size() != 1) {
      *why = "the fused op's operand list is used elsewhere";
      return std::nullopt;
    }
    for (const torch::jit::Use& u : indices->uses()) {
      if (u.user != list) {
        *why = "the indices %" + indices->debugName() + " are also read by " + u.user->kind().toQualString() +
               ": the epilogue's value takes their place";
        return std::nullopt;
      }
    }
    return plan;
  }

  // The consumer's instructions with its operands mapped through the plan.
  static Expr epilogueFor(const Expr& e, const Plan& plan) {
    Expr out;
    out.numInputs = 2;
    for (Instr ins : e.instrs) {
      for (Arg& a : ins.args)
        if (a.kind == Arg::Kind::Input) a = plan.operand.at(a.i);
      out.instrs.push_back(std::move(ins));
    }
    out.validate();
    return out;
  }
};

}  // namespace

bool FoldIndicesEpilogue(std::shared_ptr<torch::jit::Graph>& graph) {
  FoldIndicesEpiloguePattern pattern;
  return runPattern(graph, pattern);
}

}  // namespace tsfuse
