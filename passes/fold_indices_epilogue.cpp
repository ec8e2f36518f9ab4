#include "passes/fold_indices_epilogue.h"

#include "kernels/ir/expr.h"
#include "passes/analysis/read_hazards.h"
#include "passes/framework/driver.h"
#include "passes/regions/fused_values.h"

#include <torch/csrc/jit/ir/constants.h>

#include <algorithm>
#include <optional>

namespace tsfuse {
namespace {

using torch::jit::Node;
using torch::jit::Value;

const c10::Symbol kFullLike = c10::Symbol::fromQualString("aten::full_like");
constexpr size_t kEpilogueInput = 5;  // tsfuse::reduce_with_indices(operands, expr, reduction, dim, keepdim, epilogue)

// The integer c of `aten::full_like(of, c)` with its dtype, layout, device and memory format None
// and pin_memory None or False (as tracing records it), else nullopt.
std::optional<int64_t> fullLikeOf(Value* v, Value* of) {
  Node* n = v->node();
  if (n->kind() != kFullLike || n->inputs().size() != 7 || n->input(0) != of) return std::nullopt;
  const std::optional<c10::IValue> c = torch::jit::toIValue(n->input(1));
  if (!c || !c->isInt()) return std::nullopt;
  constexpr size_t kPinMemory = 5;
  for (size_t i = 2; i < n->inputs().size(); ++i) {
    const std::optional<c10::IValue> a = torch::jit::toIValue(n->input(i));
    if (!a || !(a->isNone() || (i == kPinMemory && a->isBool() && !a->toBool()))) return std::nullopt;
  }
  return c->toInt();
}

// How each operand of the consumer reaches the epilogue.
struct Plan {
  std::vector<Arg> operand;    // per consumer operand: $0 values, $1 indices, or a fill's value
  std::vector<int64_t> fills;  // the fill constants, in the order of their instructions
  std::vector<Node*> fillNodes;
};

// A fused elementwise op over the values and indices of a max/min with indices  =>  its epilogue
//
//   %v, %i = tsfuse::reduce_with_indices(%l, "v1: ...", "max", 0, False, None)          [A]
//   %f = aten::full_like(%i, -1, None, None, None, None, None)
//   %m = tsfuse::pairwise([%v, %f, %i], "v1: lt($0, 0.4); where(%0, $1, $2)", [])
// =>
//   %v, %m = tsfuse::reduce_with_indices(%l, "v1: ...", "max", 0, False,
//              "v1: eq($1, $1); masked_fill($1, %0, -1); lt($0, 0.4); where(%2, %1, $1)")
//
// The epilogue's value takes the indices' place, so the indices must have no other reader. A
// full_like of the indices (int64 by construction) is their masked_fill by an all-true mask: the
// same dtype, layout and values. The values keep their other readers; nothing may write them
// between the two ops, since the epilogue now reads them earlier.
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
    if (reduction->owningBlock() != consumer->owningBlock())
      return rw.notifyMatchFailure(nodes, "the max/min with indices is in another block");
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
    event.add(plan->fillNodes);
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
    for (Node* f : plan->fillNodes) rw.erase(f);
    rw.notifyRewrite(std::move(event), reduction);
    return true;
  }

 private:
  // The max/min with indices one of the list's operands comes from (directly or through a fill).
  static Node* indexedProducer(Node* list) {
    for (Value* v : list->inputs()) {
      Node* p = v->node()->kind() == kFullLike ? v->node()->input(0)->node() : v->node();
      if (p->kind() == kReduceIndicesOp) return p;
    }
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
      } else if (std::optional<int64_t> c = fullLikeOf(v, indices); c && v->uses().size() == 1) {
        plan.operand.push_back(Arg::value(2 * static_cast<int64_t>(plan.fills.size()) + 1));
        plan.fills.push_back(*c);
        plan.fillNodes.push_back(v->node());
      } else {
        *why = "the fused op also reads %" + v->debugName() +
               ", which is not the values, the indices or an integer full_like of the indices";
        return std::nullopt;
      }
    }
    if (list->output()->uses().size() != 1) {
      *why = "the fused op's operand list is used elsewhere";
      return std::nullopt;
    }
    for (const torch::jit::Use& u : indices->uses()) {
      const bool ours =
          u.user == list || std::find(plan.fillNodes.begin(), plan.fillNodes.end(), u.user) != plan.fillNodes.end();
      if (!ours) {
        *why = "the indices %" + indices->debugName() + " are also read by " + u.user->kind().toQualString() +
               ": the epilogue's value takes their place";
        return std::nullopt;
      }
    }
    return plan;
  }

  // The fills' instructions (eq, masked_fill per fill), then the consumer's with its operands
  // mapped through the plan.
  static Expr epilogueFor(const Expr& e, const Plan& plan) {
    Expr out;
    out.numInputs = 2;
    for (int64_t c : plan.fills) {
      const int64_t mask = static_cast<int64_t>(out.instrs.size());
      out.instrs.push_back(Instr{Op::Eq, {Arg::input(1), Arg::input(1)}});
      out.instrs.push_back(Instr{Op::MaskedFill, {Arg::input(1), Arg::value(mask), Arg::integer(c)}});
    }
    const int64_t shift = static_cast<int64_t>(out.instrs.size());
    for (Instr ins : e.instrs) {
      for (Arg& a : ins.args) {
        if (a.kind == Arg::Kind::Input)
          a = plan.operand.at(a.i);
        else if (a.kind == Arg::Kind::Value)
          a = Arg::value(a.i + shift);
      }
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
