#include "passes/regions/sweep_readers.h"

#include "kernels/reference/analysis.h"
#include "kernels/runtime/chain.h"
#include "kernels/runtime/sweep.h"
#include "passes/analysis/grad_scope.h"
#include "passes/analysis/op_table.h"
#include "passes/analysis/read_hazards.h"
#include "passes/framework/events.h"
#include "passes/regions/rewrite.h"

#include <algorithm>

namespace tsfuse {
namespace {

const c10::Symbol kSweep = c10::Symbol::fromQualString("tsfuse::reduce_sweep");

// A fused reduction reading `value` through the single-reader nodes that start at `first` (one of
// value's readers), its operand list holding the value's view at `operand`.
struct FusedReader {
  Node* consumer = nullptr;
  Node* list = nullptr;
  size_t operand = 0;
  Unsqueezed view;
  FusedReduction r;
};

std::optional<FusedReader> fusedReaderFrom(Value* value, Node* first) {
  Node* cur = first;
  for (int step = 0; step < 8; ++step) {  // an unsqueeze or sink_views' helper: three nodes each
    if (cur->outputs().size() != 1 || cur->output()->uses().size() != 1) return std::nullopt;
    Node* next = cur->output()->uses()[0].user;
    if (cur->kind() != c10::prim::ListConstruct || next->input(0) != cur->output()) {
      cur = next;
      continue;
    }
    std::optional<FusedReduction> r = fusedReductionOf(next);
    if (!r) {
      cur = next;
      continue;
    }
    const auto exprInputs = static_cast<size_t>(cachedExpr(r->expr)->numInputs);
    std::optional<FusedReader> found;
    for (size_t k = 0; k < cur->inputs().size(); ++k) {
      Unsqueezed u = unsqueezedValue(cur->input(k));
      if (u.base != value) continue;
      if (found || k >= exprInputs || (u.views.empty() ? cur : u.views.front()) != first) return std::nullopt;
      found = FusedReader{next, cur, k, std::move(u), std::move(*r)};
    }
    return found;
  }
  return std::nullopt;
}

bool definedBefore(Value* v, Node* n) {
  Node* def = v->node();
  return def->kind() == c10::prim::Param || def->isBefore(n);
}

}  // namespace

bool hasFusedReader(Value* value) {
  for (const auto& use : value->uses())
    if (fusedReaderFrom(value, use.user)) return true;
  return false;
}

std::optional<SweepPlan> planSweep(Value* value, Node* inner, const Stages& stages, Rewriter& rw, std::string* why) {
  auto fail = [&](std::string reason) -> std::optional<SweepPlan> {
    *why = std::move(reason);
    return std::nullopt;
  };
  const std::string name = "%" + value->debugName();
  SweepPlan plan{inner, stages, {}, nullptr, {}};
  std::vector<Node*> seen;
  for (const auto& use : value->uses()) {
    if (std::find(seen.begin(), seen.end(), use.user) != seen.end())
      return fail(describeNode(use.user) + " reads " + name + " twice");
    seen.push_back(use.user);
    if (isMetadataRead(use.user) && inner->kind() == kReduceOp) {
      plan.metadataReaders.push_back(use.user);
      continue;
    }
    if (use.user->owningBlock() != inner->owningBlock())
      return fail(describeNode(use.user) + " reads " + name + " in another block");
    if (std::string scope = gradScopeBoundary(inner, use.user); !scope.empty())
      return fail("the fused reduction and its reader " + describeNode(use.user) + ": " + scope);
    SweepBranch b;
    ReductionMatch m;
    if (matchReduction(use.user, m, nullptr)) {
      if (m.spec.withIndices() || use.user->outputs().size() != 1)
        return fail(describeNode(use.user) + " has indices; a sweep's branches have one output each");
      if (reducesEveryDim(m) && !foldsAcrossSlabs(m.spec))
        return fail(describeNode(use.user) + " reduces every dim of " + name + " and its partials do not fold");
      b.reader = use.user;
      b.text = describe(m.spec);
      plan.branches.push_back(std::move(b));
      continue;
    }
    std::optional<FusedReader> f = fusedReaderFrom(value, use.user);
    if (!f) return fail(name + " is also used by " + describeNode(use.user) + ", so it is stored anyway");
    if (f->consumer->owningBlock() != inner->owningBlock())
      return fail(describeNode(f->consumer) + " reads " + name + " in another block");
    if (std::string scope = gradScopeBoundary(inner, f->consumer); !scope.empty())
      return fail("the fused reduction and its reader " + describeNode(f->consumer) + ": " + scope);
    if (f->r.spec.withIndices()) return fail(describeNode(f->consumer) + " has indices");
    if (reducesEveryDim(f->r.spec, std::nullopt))
      return fail(describeNode(f->consumer) + " reduces every dim: no dim of " + name + " is left to cut slabs along");
    b.reader = f->consumer;
    b.views = f->view.views;
    b.fused = true;
    const auto exprInputs = static_cast<size_t>(cachedExpr(f->r.expr)->numInputs);
    for (size_t k = 0; k < f->list->inputs().size(); ++k)
      if (k != f->operand) (k < exprInputs ? b.operands : b.peeledExtras).push_back(f->list->input(k));
    StageInput input;
    input.text = f->r.expr;
    input.value = static_cast<int64_t>(f->operand);
    input.unsqueeze = f->view.dims;
    b.text = input.str() + " |> ";  // the reduction follows once the epilogue is placed
    b.spec = f->r.spec;
    plan.branches.push_back(std::move(b));
  }
  if (plan.branches.empty()) return fail("only readers of its metadata read " + name);
  std::sort(plan.branches.begin(), plan.branches.end(),
            [](const SweepBranch& a, const SweepBranch& b) { return a.reader->isBefore(b.reader); });

  // A fused reader's epilogue stays in its branch where its operands exist before the readers
  // begin; one that reads another reader's result runs after the sweep.
  Node* first = plan.branches.front().reader;
  auto isResult = [&](Value* v) {
    for (const auto& b : plan.branches)
      if (b.reader->outputs().size() == 1 && b.reader->output() == v) return true;
    return false;
  };
  for (auto& b : plan.branches) {
    if (!b.fused) continue;
    bool peel = false;
    for (Value* x : b.peeledExtras) peel |= isResult(x) || !definedBefore(x, first);
    ReduceSpec spec = b.spec;
    if (peel) {
      b.peeled = spec.epilogue->str();
      spec.epilogue.reset();
    } else {
      b.operands.insert(b.operands.end(), b.peeledExtras.begin(), b.peeledExtras.end());
      b.peeledExtras.clear();
    }
    b.text += describe(spec);
    for (Value* x : b.operands)
      if (isResult(x)) return fail(describeNode(b.reader) + " reads another reader's result of " + name);
  }
  // The sweep goes before the first reader after every operand it reads.
  for (const auto& b : plan.branches) {
    bool ready = true;
    for (const auto& other : plan.branches)
      for (Value* x : other.operands) ready &= definedBefore(x, b.reader);
    if (ready) {
      plan.at = b.reader;
      break;
    }
  }
  if (!plan.at) return fail("a reader's operand is computed after the last reader of " + name);
  for (const auto& b : plan.branches)
    for (const auto& use : b.reader->output()->uses()) {
      bool replaced = false;  // read by a peeled epilogue's reader, which moves after the sweep
      for (const auto& o : plan.branches)
        replaced |= !o.peeled.empty() && use.user->kind() == c10::prim::ListConstruct &&
                    o.reader->input(0) == use.user->output();
      if (!replaced && !plan.at->isBefore(use.user))
        return fail(describeNode(b.reader) + "'s result is read before " + describeNode(plan.at));
    }
  std::vector<Value*> ops0(stages.list->inputs().begin(), stages.list->inputs().end());
  if (std::string hazard = readHazard(ops0, inner, plan.at, rw.aliasDb()); !hazard.empty()) return fail(hazard);
  for (const auto& b : plan.branches) {
    Node* from = earlier(b.reader, plan.at);
    if (std::string hazard = readHazard(b.operands, from, from == b.reader ? plan.at : b.reader, rw.aliasDb());
        !hazard.empty())
      return fail(hazard);
  }
  std::vector<std::string> texts = stages.texts;
  for (const auto& b : plan.branches) texts.push_back(b.text);
  try {
    cachedSweep(stages.expr, texts);
  } catch (const c10::Error& e) {
    return fail(std::string("the sweep would be malformed: ") + e.what_without_backtrace());
  }
  return plan;
}

Node* rewriteSweep(Rewriter& rw, const SweepPlan& plan) {
  Graph& g = rw.graph();
  RewriteEvent e;
  e.add(plan.inner);
  size_t fused = 0, everyDim = 0;
  for (const auto& b : plan.branches) {
    e.add(b.views).add(b.reader);
    fused += b.fused;
    ReductionMatch m;
    everyDim += !b.fused && matchReduction(b.reader, m, nullptr) && reducesEveryDim(m);
  }
  e.fusedOp = "tsfuse::reduce_sweep";
  const size_t n = plan.branches.size();
  e.reason = (n == 1 ? std::string("nested the reduction") : "nested the " + std::to_string(n) + " reductions") +
             " of %" + plan.inner->output()->debugName() +
             " into one sweep of the fused reduction: the value is computed slab by slab, never stored";
  if (fused) e.reason += "; " + std::to_string(fused) + " of them fused over it";
  if (everyDim)
    e.reason +=
        "; a reduction over every dim folds the slab partials where the value is larger than every "
        "operand (else the value is stored and ATen reduces it)";
  std::vector<Value*> operands(plan.stages.list->inputs().begin(), plan.stages.list->inputs().end());
  std::vector<std::string> texts = plan.stages.texts;
  for (const auto& b : plan.branches) {
    operands.insert(operands.end(), b.operands.begin(), b.operands.end());
    texts.push_back(b.text);
  }
  Node* sweep = insertStagedOp(g, kSweep, 1, operands, plan.stages.expr, texts, plan.at);
  sweep->output()->setType(c10::ListType::ofTensors());
  Node* unpack = nullptr;
  {
    torch::jit::WithInsertPoint guard(plan.at);
    unpack = g.insertNode(g.createListUnpack(sweep->output(), plan.branches.size()));
  }
  e.expr = plan.stages.expr;
  for (const auto& t : texts) e.expr += " |> " + t;
  for (size_t j = 0; j < plan.branches.size(); ++j) {
    const SweepBranch& b = plan.branches[j];
    Value* result = unpack->output(j);
    if (b.peeled.empty()) {
      result->setType(b.reader->output()->type());
      rw.replaceAllUsesWith(b.reader->output(), result);
      continue;
    }
    // The epilogue over the branch's result, where the reader was (its operands are read there).
    result->setType(c10::TensorType::get());
    torch::jit::WithInsertPoint guard(b.reader);
    std::vector<Value*> epi{result};
    const size_t exprInputs = b.reader->input(0)->node()->inputs().size() - b.peeledExtras.size();
    for (size_t k = exprInputs; k < b.reader->input(0)->node()->inputs().size(); ++k)
      epi.push_back(b.reader->input(0)->node()->input(k));  // earlier readers' results: replaced above
    Node* map = g.create(kPairwiseOp, 1);
    map->addInput(insertTensorList(g, epi));
    map->addInput(g.insertConstant(b.peeled));
    map->addInput(g.insertConstant(std::vector<int64_t>{}));
    g.insertNode(map);
    map->setSourceRange(b.reader->sourceRange());
    map->output()->setType(b.reader->output()->type());
    rw.replaceAllUsesWith(b.reader->output(), map->output());
  }
  for (auto it = plan.branches.rbegin(); it != plan.branches.rend(); ++it) {
    if (it->fused) {
      eraseFusedOp(rw, it->reader);
      for (auto v = it->views.rbegin(); v != it->views.rend(); ++v) rw.erase(*v);
    } else {
      rw.erase(it->reader);
    }
  }
  if (size_t n = readReducedMetadataFromStandIn(g, plan.inner, plan.metadataReaders))
    e.reason += "; " + std::to_string(n) + " reader(s) of its metadata alone read tsfuse::shape_of";
  eraseFusedOp(rw, plan.inner);
  rw.notifyRewrite(std::move(e), sweep);
  return sweep;
}

}  // namespace tsfuse
