#include "passes/regions/fused_values.h"

#include "kernels/runtime/reduce_spec.h"
#include "passes/regions/rewrite.h"

#include <torch/csrc/jit/ir/constants.h>

#include <algorithm>

namespace tsfuse {

const c10::Symbol kPairwiseOp = c10::Symbol::fromQualString("tsfuse::pairwise");
const c10::Symbol kReduceOp = c10::Symbol::fromQualString("tsfuse::reduce");
const c10::Symbol kReduceIndicesOp = c10::Symbol::fromQualString("tsfuse::reduce_with_indices");
const c10::Symbol kChainOp = c10::Symbol::fromQualString("tsfuse::reduce_chain");
const c10::Symbol kChainIndicesOp = c10::Symbol::fromQualString("tsfuse::reduce_chain_with_indices");
const c10::Symbol kUnsqueezeHelperOp = c10::Symbol::fromQualString("tsfuse::broadcast_unsqueeze");
const c10::Symbol kShapeOfOp = c10::Symbol::fromQualString("tsfuse::shape_of");

namespace {

// The constant arguments of `n` after its operand list; nullopt when one is not constant.
std::optional<std::vector<c10::IValue>> constantArgs(torch::jit::Node* n) {
  std::vector<c10::IValue> args;
  for (size_t i = 1; i < n->inputs().size(); ++i) {
    auto v = torch::jit::toIValue(n->input(i));
    if (!v) return std::nullopt;
    args.push_back(std::move(*v));
  }
  return args;
}

}  // namespace

std::optional<FusedReduction> fusedReductionOf(torch::jit::Node* n) {
  if (n->kind() != kReduceOp && n->kind() != kReduceIndicesOp) return std::nullopt;
  auto args = constantArgs(n);
  if (!args) return std::nullopt;
  const auto& a = *args;
  FusedReduction r;
  r.expr = a[0].toStringRef();
  if (n->kind() == kReduceIndicesOp) {
    // With an epilogue its second output is no longer the indices: not a plain reduction to build on.
    if (a.size() > 4 && !a[4].isNone()) return std::nullopt;
    const std::vector<int64_t> dim{a[2].toInt()};
    r.spec = makeReduceSpec(a[1].toStringRef(), at::IntArrayRef(dim), a[3].toBool(), std::nullopt, std::nullopt);
    return r;
  }
  at::OptionalIntArrayRef dims;
  std::vector<int64_t> d;
  if (!a[2].isNone()) dims = d = a[2].toIntVector();
  std::optional<c10::ScalarType> dtype;
  if (!a[4].isNone()) dtype = static_cast<c10::ScalarType>(a[4].toInt());
  std::optional<std::string> epi;
  if (!a[5].isNone()) epi = a[5].toStringRef();
  std::optional<c10::string_view> epiView;
  if (epi) epiView = c10::string_view(*epi);
  r.spec = makeReduceSpec(a[1].toStringRef(), dims, a[3].toBool(), dtype, epiView);
  return r;
}

bool reducesEveryDim(const ReduceSpec& r, std::optional<int64_t> rank) {
  return !r.dims || (r.dims->empty() && (r.kind == Reduction::Amax || r.kind == Reduction::Amin)) ||
         (rank && static_cast<int64_t>(r.dims->size()) >= *rank);
}

bool reducesEveryDim(const ReductionMatch& rm) {
  const auto type = rm.input->type()->cast<c10::TensorType>();
  const std::optional<size_t> rank = type ? type->dim() : std::nullopt;
  return reducesEveryDim(rm.spec, rank ? std::optional<int64_t>(static_cast<int64_t>(*rank)) : std::nullopt);
}

std::optional<Stages> stagesOf(torch::jit::Node* n) {
  if (n->kind() != kReduceOp && n->kind() != kChainOp) return std::nullopt;
  Stages s;
  s.list = n->input(0)->node();
  if (s.list->kind() != c10::prim::ListConstruct) return std::nullopt;
  if (n->kind() == kReduceOp) {
    auto r = fusedReductionOf(n);
    if (!r) return std::nullopt;
    s.expr = std::move(r->expr);
    s.texts.push_back(describe(r->spec));
    return s;
  }
  auto args = constantArgs(n);
  if (!args) return std::nullopt;
  s.expr = (*args)[0].toStringRef();
  for (const auto& t : (*args)[1].toListRef()) s.texts.push_back(t.toStringRef());
  return s;
}

torch::jit::Node* insertStagedOp(torch::jit::Graph& g, c10::Symbol kind, size_t outputs,
                                 const std::vector<torch::jit::Value*>& operands, const std::string& expr,
                                 const std::vector<std::string>& texts, torch::jit::Node* at) {
  torch::jit::WithInsertPoint guard(at);
  torch::jit::Value* list = insertTensorList(g, operands);
  torch::jit::Node* n = g.create(kind, outputs);
  n->addInput(list);
  n->addInput(g.insertConstant(expr));
  n->addInput(g.insertConstant(c10::List<std::string>(texts)));
  g.insertNode(n);
  n->setSourceRange(at->sourceRange());
  return n;
}

Unsqueezed unsqueezedValue(torch::jit::Value* view) {
  auto onlyReader = [](torch::jit::Value* v) { return v->uses().size() == 1; };
  Unsqueezed u;
  torch::jit::Value* v = view;
  while (true) {
    torch::jit::Node* n = v->node();
    std::optional<c10::IValue> dim;
    torch::jit::Value* base = nullptr;
    std::vector<torch::jit::Node*> nodes;
    if (n->kind() == c10::aten::unsqueeze) {
      dim = torch::jit::toIValue(n->input(1));
      base = n->input(0);
      nodes = {n};
    } else if (n->kind() == c10::prim::ListUnpack && n->outputs().size() == 1) {
      torch::jit::Node* helper = n->input()->node();
      if (helper->kind() != kUnsqueezeHelperOp || !onlyReader(helper->output())) break;
      torch::jit::Node* list = helper->input(0)->node();
      if (list->kind() != c10::prim::ListConstruct || list->inputs().size() != 1 || !onlyReader(list->output())) break;
      dim = torch::jit::toIValue(helper->input(1));
      base = list->input(0);
      nodes = {list, helper, n};
    } else {
      break;
    }
    if (!dim || !dim->isInt() || (v != view && !onlyReader(v))) break;
    u.base = base;
    u.views.insert(u.views.begin(), nodes.begin(), nodes.end());
    u.dims.insert(u.dims.begin(), dim->toInt());
    v = base;
  }
  if (!u.base) u.base = view;
  return u;
}

}  // namespace tsfuse
