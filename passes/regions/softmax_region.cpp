#include "passes/regions/softmax_region.h"

#include "kernels/runtime/chain_text.h"
#include "passes/analysis/grad_scope.h"
#include "passes/analysis/op_table.h"
#include "passes/analysis/read_hazards.h"
#include "passes/regions/fused_values.h"
#include "passes/regions/region.h"
#include "passes/regions/region_hazards.h"
#include "passes/regions/rewrite.h"

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
  if (!sameGradScope(producer, n) || !matchElementwise(producer, m, nullptr) || producer->kind() == c10::aten::to)
    return false;  // the softmax of a value no elementwise op made here: not a candidate
  const std::string what = std::string(n->kind().toUnqualString()) + " of %" + v->debugName();
  std::string why;
  const std::optional<int64_t> dim = softmaxDim(n, &why);
  if (!dim) return rw.notifyMatchFailure({n, producer}, what + ": " + why);
  if (v->uses().size() != 1)
    return rw.notifyMatchFailure({n, producer},
                                 what + ": the value is also used elsewhere, so it is materialised anyway");
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

namespace {

// `nodes` (in block order, the last one's output the result) normalize the fused reduction
// `inner`'s value as `stage`: the chain of inner's stages and that one replaces them.
bool nestNormalization(Node* inner, Stages& stages, const std::vector<Node*>& nodes, const NormalizeStage& stage,
                       Rewriter& rw) {
  Node* last = nodes.back();
  std::vector<Value*> operands(stages.list->inputs().begin(), stages.list->inputs().end());
  if (std::string why = readHazard(operands, inner, last, rw.aliasDb()); !why.empty())
    return rw.notifyMatchFailure({last, inner}, why);
  stages.texts.push_back(stageText(stage));
  RewriteEvent e;
  e.add(inner).add(nodes);
  e.fusedOp = kChainOp.toQualString();
  e.expr = stages.expr;
  for (const auto& t : stages.texts) e.expr += " |> " + t;
  e.reason = "nested " + stageText(stage) + " into the fused reduction: its value %" + inner->output()->debugName() +
             " is computed slab by slab and normalized by ATen's ops, never stored";
  Node* chain = insertStagedOp(rw.graph(), kChainOp, 1, operands, stages.expr, stages.texts, last);
  chain->output()->setType(last->output()->type());
  rw.replaceAllUsesWith(last->output(), chain->output());
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) rw.erase(*it);
  eraseFusedOp(rw, inner);
  rw.notifyRewrite(std::move(e), chain);
  return true;
}

}  // namespace

bool nestSoftmax(Node* n, Rewriter& rw) {
  Value* v = n->input(0);
  Node* inner = v->node();
  std::optional<Stages> stages = stagesOf(inner);
  if (!stages) return false;  // not a fused reduction's value
  const std::string what =
      std::string(n->kind().toUnqualString()) + " of the fused reduction's value %" + v->debugName();
  if (std::string scope = gradScopeBoundary(inner, n); !scope.empty())
    return rw.notifyMatchFailure(
        {n, inner}, what + ": the fused reduction and the " + std::string(n->kind().toUnqualString()) + ": " + scope);
  std::string why;
  const std::optional<int64_t> dim = softmaxDim(n, &why);
  if (!dim) return rw.notifyMatchFailure({n, inner}, what + ": " + why);
  if (v->uses().size() != 1)
    return rw.notifyMatchFailure({n, inner}, what + ": the value is also used elsewhere, so it is stored anyway");
  using Kind = NormalizeStage::Kind;
  return nestNormalization(inner, *stages, {n},
                           NormalizeStage{n->kind() == c10::aten::log_softmax ? Kind::LogSoftmax : Kind::Softmax, *dim},
                           rw);
}

std::optional<bool> nestDivSum(Node* sum, Rewriter& rw) {
  const c10::FunctionSchema* s = sum->maybeSchema();
  if (sum->kind() != c10::aten::sum || !s || s->overload_name() != "dim_IntList") return std::nullopt;
  Value* v = sum->input(0);
  Node* inner = v->node();
  std::optional<Stages> stages = stagesOf(inner);
  if (!stages || v->uses().size() != 2 || sum->output()->uses().size() != 1) return std::nullopt;
  Node* div = sum->output()->uses()[0].user;
  const c10::FunctionSchema* ds = div->maybeSchema();
  if (div->kind() != c10::aten::div || !ds || ds->overload_name() != "Tensor" || div->input(0) != v ||
      div->input(1) != sum->output())
    return std::nullopt;
  auto dims = torch::jit::toIValue(sum->input(1));
  auto keepdim = torch::jit::toIValue(sum->input(2));
  auto dtype = torch::jit::toIValue(sum->input(3));
  if (!dims || !dims->isIntList() || dims->toIntList().size() != 1 || !keepdim || !keepdim->isBool() ||
      !keepdim->toBool() || !dtype || !dtype->isNone())
    return std::nullopt;  // another form: nest_reductions' own business
  std::string scope = gradScopeBoundary(inner, div);
  if (scope.empty()) scope = gradScopeBoundary(sum, div);
  if (!scope.empty())
    return rw.notifyMatchFailure(
        {div, sum, inner}, "the division by the sum of %" + v->debugName() + " and the fused reduction: " + scope);
  return nestNormalization(inner, *stages, {sum, div},
                           NormalizeStage{NormalizeStage::Kind::DivSum, dims->toIntList().get(0)}, rw);
}

}  // namespace tsfuse
