#include "passes/hoist_into_epilogue.h"

#include "kernels/ir/expr.h"
#include "kernels/ir/op_registry.h"
#include "passes/analysis/grad_scope.h"
#include "passes/framework/driver.h"
#include "passes/regions/fused_values.h"

#include <torch/csrc/jit/ir/constants.h>

#include <optional>

namespace tsfuse {
namespace {

using torch::jit::Value;

constexpr size_t kEpilogueInput =
    6;  // tsfuse::reduce(operands, expr, reduction, dim, keepdim, dtype, epilogue, donated)

// A fused reduction's value seen through unsqueezes (passes/regions/fused_values.h), read by them alone.
std::optional<Unsqueezed> unsqueezedReduction(Value* view) {
  Unsqueezed u = unsqueezedValue(view);
  if (u.views.empty() || u.base->node()->kind() != kReduceOp || u.base->uses().size() != 1 || view->uses().size() != 1)
    return std::nullopt;
  return u;
}

// The instructions of a fused op's expression that read operand k and literals only, directly or
// through each other (hoisted), and the one value of theirs the other instructions read.
struct Split {
  std::vector<char> hoisted;
  int64_t frontier = -1;
  int count = 0;
};

// nullopt, with the reason in *why (empty: nothing reads operand k alone), unless operand k is
// read only by hoisted instructions and exactly one hoisted value is read by the rest.
std::optional<Split> splitOn(const Expr& e, int64_t k, std::string* why) {
  Split s;
  const int64_t n = static_cast<int64_t>(e.instrs.size());
  s.hoisted.assign(n, 0);
  for (int64_t j = 0; j < n; ++j) {
    bool onlyK = true, readsTensor = false;
    for (const Arg& a : e.instrs[j].args) {
      if (!a.isTensor()) continue;
      readsTensor = true;
      onlyK &= a.kind == Arg::Kind::Input ? a.i == k : s.hoisted[a.i] != 0;
    }
    // An op whose checks read its operands' sizes sees the reduced value's, not the unsqueezed ones.
    s.hoisted[j] = readsTensor && onlyK && !opDef(e.instrs[j].op).has(kChecksSizes);
    s.count += s.hoisted[j];
  }
  if (s.count == 0) return std::nullopt;
  if (s.hoisted[n - 1]) {
    *why = "the whole expression reads only this operand: nothing is left to broadcast it against";
    return std::nullopt;
  }
  for (int64_t j = 0; j < n; ++j) {
    if (s.hoisted[j]) continue;
    for (const Arg& a : e.instrs[j].args) {
      if (a.kind == Arg::Kind::Input && a.i == k) {
        *why =
            "$" + std::to_string(k) + " is also read by ops that read other operands, so its value is needed as it is";
        return std::nullopt;
      }
      if (a.kind != Arg::Kind::Value || !s.hoisted[a.i] || a.i == s.frontier) continue;
      if (s.frontier >= 0) {
        *why =
            "ops reading only $" + std::to_string(k) + " make several values the other ops read; an epilogue makes one";
        return std::nullopt;
      }
      s.frontier = a.i;
    }
  }
  if (s.frontier < 0) return std::nullopt;  // the hoisted values are read by nothing
  return s;
}

// The hoisted instructions appended to `epilogue` (over the reduced value $0 and its own operands;
// none yet: over $0 alone), operand k becoming the epilogue's value so far.
Expr extendEpilogue(const std::optional<Expr>& epilogue, const Expr& e, const Split& s, int64_t k) {
  Expr out = epilogue ? *epilogue : Expr{};
  if (!epilogue) out.numInputs = 1;
  const Arg before = epilogue ? Arg::value(static_cast<int64_t>(out.instrs.size()) - 1) : Arg::input(0);
  std::vector<int64_t> index(e.instrs.size(), -1);
  for (size_t j = 0; j < e.instrs.size(); ++j) {
    if (!s.hoisted[j]) continue;
    Instr ins = e.instrs[j];
    for (Arg& a : ins.args) {
      if (a.kind == Arg::Kind::Input)
        a = before;  // operand k: the only operand hoisted ops read
      else if (a.kind == Arg::Kind::Value)
        a = Arg::value(index[a.i]);
    }
    index[j] = static_cast<int64_t>(out.instrs.size());
    out.instrs.push_back(std::move(ins));
  }
  out.validate();
  return out;
}

// `e` without the hoisted instructions: their value the rest read is operand k itself now.
Expr remainder(const Expr& e, const Split& s, int64_t k) {
  Expr out;
  out.numInputs = e.numInputs;
  std::vector<int64_t> index(e.instrs.size(), -1);
  for (size_t j = 0; j < e.instrs.size(); ++j) {
    if (s.hoisted[j]) continue;
    Instr ins = e.instrs[j];
    for (Arg& a : ins.args)
      if (a.kind == Arg::Kind::Value) a = a.i == s.frontier ? Arg::input(k) : Arg::value(index[a.i]);
    index[j] = static_cast<int64_t>(out.instrs.size());
    out.instrs.push_back(std::move(ins));
  }
  out.validate();
  return out;
}

std::string opList(const Expr& e, const Split& s) {
  std::string names;
  for (size_t j = 0; j < e.instrs.size(); ++j)
    if (s.hoisted[j]) names += std::string(names.empty() ? "" : ", ") + opName(e.instrs[j].op);
  return names;
}

// Ops of a fused op over an unsqueezed fused reduction's value alone  =>  that reduction's epilogue
//
//   %d = tsfuse::reduce(%l, "v1: sub($0, $1); mul(%0, %0)", "sum", [-1], False, None, None, [])   [N, M]
//   %u = aten::unsqueeze(%d, 2)                                                                  [N, M, 1]
//   %o = tsfuse::reduce([%u, %b], "v1: mul($0, -2.0); exp(%0); mul(%1, $1)", "sum", [1], ...)
// =>
//   %d = tsfuse::reduce(%l, "v1: sub($0, $1); mul(%0, %0)", "sum", [-1], False, None,
//                       "v1: mul($0, -2.0); exp(%0)", [])
//   %u = aten::unsqueeze(%d, 2)
//   %o = tsfuse::reduce([%u, %b], "v1: mul($0, $1)", "sum", [1], ...)
//
// sink_views' tsfuse::broadcast_unsqueeze([%d], 2, layout) counts as the unsqueeze; its layout
// expression (the ops it pushed the view past) stays: over one operand, each of those ops lays its
// output out as its operand is laid out, so it decides the same layout whether or not they are
// computed before the view. The values are unchanged, so the alias database is kept.
class HoistIntoEpiloguePattern : public Pattern {
 public:
  HoistIntoEpiloguePattern() : Pattern("hoist_into_epilogue", WalkOrder::Forward, NestedBlocks::First) {}

  bool matchAndRewrite(Node* consumer, Rewriter& rw) override {
    if (consumer->kind() != kReduceOp && consumer->kind() != kPairwiseOp && consumer->kind() != kReduceIndicesOp)
      return false;
    Node* list = consumer->input(0)->node();
    if (list->kind() != c10::prim::ListConstruct) return false;
    bool changed = false;
    for (size_t k = 0; k < list->inputs().size(); ++k) changed |= hoist(consumer, list, static_cast<int64_t>(k), rw);
    return changed;
  }

 private:
  bool hoist(Node* consumer, Node* list, int64_t k, Rewriter& rw) {
    std::optional<Unsqueezed> u = unsqueezedReduction(list->input(k));
    if (!u || !sameGradScope(u->base->node(), consumer)) return false;
    Node* reduction = u->base->node();
    const std::optional<c10::IValue> exprText = torch::jit::toIValue(consumer->input(1));
    if (!exprText) return false;
    const Expr e = Expr::parse(exprText->toStringRef());
    std::string why;
    const std::optional<Split> s = splitOn(e, k, &why);
    if (!s) return why.empty() ? false : rw.notifyMatchFailure({reduction, consumer}, why);
    const std::optional<c10::IValue> epiText = torch::jit::toIValue(reduction->input(kEpilogueInput));
    if (!epiText) return rw.notifyMatchFailure({reduction, consumer}, "the reduction's epilogue is not a constant");
    std::optional<Expr> epilogue;
    if (!epiText->isNone()) epilogue = Expr::parse(epiText->toStringRef());

    // The graph changes from here on.
    const Expr newEpilogue = extendEpilogue(epilogue, e, *s, k), rest = remainder(e, *s, k);
    RewriteEvent event;
    event.add(reduction).add(consumer);
    event.fusedOp = reduction->kind().toQualString();
    event.expr = newEpilogue.str();
    event.reason = "moved " + std::to_string(s->count) + " elementwise ops (" + opList(e, *s) +
                   ") that read only the unsqueezed value of %" + reduction->output()->debugName() + " from " +
                   consumer->kind().toQualString() +
                   " into the reduction's epilogue: computed once per reduced "
                   "value instead of once per element of the broadcast";
    torch::jit::Graph& g = rw.graph();
    {
      torch::jit::WithInsertPoint at(reduction);
      reduction->replaceInput(kEpilogueInput, g.insertConstant(newEpilogue.str()));
    }
    {
      torch::jit::WithInsertPoint at(consumer);
      consumer->replaceInput(1, g.insertConstant(rest.str()));
    }
    // The value may change dtype (a compare makes bools): no profiled type stays on it or its views.
    reduction->output()->setType(c10::TensorType::get());
    for (Node* v : u->views)
      for (Value* out : v->outputs())
        if (out->type()->cast<c10::TensorType>()) out->setType(c10::TensorType::get());
    rw.keepAliasDb();
    rw.notifyRewrite(std::move(event), reduction);
    return true;
  }
};

}  // namespace

bool HoistIntoEpilogue(std::shared_ptr<torch::jit::Graph>& graph) {
  HoistIntoEpiloguePattern pattern;
  return runPattern(graph, pattern);
}

}  // namespace tsfuse
