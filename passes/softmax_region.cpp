#include "passes/softmax_region.h"

#include "kernels/chain_text.h"
#include "passes/fused_values.h"
#include "passes/region.h"

#include <torch/csrc/jit/ir/constants.h>

namespace tsfuse {

bool isSoftmax(Node* n) {
  if (n->kind() != c10::aten::softmax && n->kind() != c10::aten::log_softmax) return false;
  const c10::FunctionSchema* s = n->maybeSchema();
  return s && s->overload_name() == "int";  // (self, int dim, ScalarType? dtype)
}

namespace {

// The softmax's constant dim, or a rejection's reason in *why (a dtype argument converts the value
// first: not a stage's form).
std::optional<int64_t> softmaxDim(Node* n, std::string* why) {
  auto dim = torch::jit::toIValue(n->input(1));
  if (!dim || !dim->isInt()) *why = "dim is not a constant";
  auto dtype = torch::jit::toIValue(n->input(2));
  if (why->empty() && (!dtype || !dtype->isNone())) *why = "a dtype argument (the value would be converted first)";
  if (!why->empty()) return std::nullopt;
  return dim->toInt();
}

}  // namespace

bool fuseSoftmax(Node* n, Rewriter& rw) {
  Value* v = n->input(0);
  Node* producer = v->node();
  ElementwiseMatch m;
  if (producer->owningBlock() != n->owningBlock() || !matchElementwise(producer, m, nullptr) ||
      producer->kind() == c10::aten::to)
    return false;  // the softmax of a value no elementwise op made here: not a candidate
  const std::string what = std::string(n->kind().toUnqualString()) + " of %" + v->debugName();
  std::string why;
  const std::optional<int64_t> dim = softmaxDim(n, &why);
  if (!dim) return rw.notifyMatchFailure({n, producer}, what + ": " + why);
  if (v->uses().size() != 1)
    return rw.notifyMatchFailure({n, producer}, what + ": the value is also used elsewhere, so it is materialised anyway");
  std::optional<Region> region = hazardFreeRegion(producer, n, rw);
  if (!region) return false;
  Region& r = *region;
  const bool log = n->kind() == c10::aten::log_softmax;
  RewriteEvent e;
  e.add(r.nodes).add(n);
  e.expr = r.expr.str() + " |> " + (log ? "log_softmax" : "softmax") + "(dim=" + std::to_string(*dim) + ")";
  e.fusedOp = "tsfuse::softmax";
  e.reason = "fused " + std::to_string(r.nodes.size()) + " elementwise ops and " + n->kind().toQualString() +
             " (the value is recomputed for its maximum, its sum and the result, never stored)";
  for (const auto& b : r.boundary) e.reason += "; " + b;
  Node* fused = rewriteRegion(rw, r, n, "tsfuse::softmax", {*dim, log});
  rw.notifyRewrite(std::move(e), fused);
  return true;
}


bool nestSoftmax(Node* n, Rewriter& rw) {
  Value* v = n->input(0);
  Node* inner = v->node();
  std::optional<Stages> stages = stagesOf(inner);
  if (!stages) return false;  // not a fused reduction's value
  const std::string what = std::string(n->kind().toUnqualString()) + " of the fused reduction's value %" + v->debugName();
  if (inner->owningBlock() != n->owningBlock())
    return rw.notifyMatchFailure({n, inner}, what + ": the fused reduction is in another block");
  std::string why;
  const std::optional<int64_t> dim = softmaxDim(n, &why);
  if (!dim) return rw.notifyMatchFailure({n, inner}, what + ": " + why);
  if (v->uses().size() != 1)
    return rw.notifyMatchFailure({n, inner}, what + ": the value is also used elsewhere, so it is stored anyway");
  std::vector<Value*> operands(stages->list->inputs().begin(), stages->list->inputs().end());
  if (why = readHazard(operands, inner, n, rw.aliasDb()); !why.empty()) return rw.notifyMatchFailure({n, inner}, why);

  stages->texts.push_back(stageText(SoftmaxStage{*dim, n->kind() == c10::aten::log_softmax}));
  RewriteEvent e;
  e.add(inner).add(n);
  e.fusedOp = kChainOp.toQualString();
  e.expr = stages->expr;
  for (const auto& t : stages->texts) e.expr += " |> " + t;
  e.reason = std::string("nested ") + n->kind().toQualString() + " into the fused reduction: its value %" +
             v->debugName() + " is computed slab by slab into ATen's softmax, never stored";
  Node* chain = insertStagedOp(rw.graph(), kChainOp, 1, operands, stages->expr, stages->texts, n);
  chain->output()->setType(n->output()->type());
  rw.replaceAllUsesWith(n->output(), chain->output());
  rw.erase(n);
  Node* oldList = stages->list;
  rw.erase(inner);
  if (!oldList->hasUses()) rw.erase(oldList);
  rw.notifyRewrite(std::move(e), chain);
  return true;
}

}  // namespace tsfuse
