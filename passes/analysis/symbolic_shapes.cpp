#include "passes/analysis/symbolic_shapes.h"

#include "passes/analysis/op_table.h"

#include "kernels/runtime/check_reshape.h"

#include <torch/csrc/jit/ir/constants.h>

namespace tsfuse {
namespace {

using torch::jit::Node;
using torch::jit::toIValue;
using torch::jit::Value;

constexpr int kMaxDepth = 64;  // expression trees of real code are far shallower

const c10::Symbol kCheckReshape = c10::Symbol::fromQualString(kCheckReshapeOp);

std::optional<SymSize> sizeAt(Value* v, int depth) {
  if (depth > kMaxDepth) return std::nullopt;
  if (auto c = constantInt(v))
    return *c >= 0 ? std::optional<SymSize>(SymSize{SymSize::Kind::Constant, *c}) : std::nullopt;
  Node* p = v->node();
  // int(tensor(x)) -> x: a trace records each Python int as such a round trip.
  if (p->kind() == c10::aten::Int && p->input()->node()->kind() == c10::prim::NumToTensor)
    return sizeAt(p->input()->node()->input(), depth + 1);
  auto dimOf = [](Value* t, std::optional<int64_t> d) -> std::optional<SymSize> {
    if (!d || *d < 0) return std::nullopt;  // a negative dim names the same size by another number
    return SymSize{SymSize::Kind::DimOf, *d, t};
  };
  // x.size(d)
  if (p->kind() == c10::aten::size && p->inputs().size() == 2) return dimOf(p->input(0), constantInt(p->input(1)));
  // n, d = x.shape  /  x.shape[d]
  Node* shape =
      p->kind() == c10::prim::ListUnpack || p->kind() == c10::aten::__getitem__ ? p->input(0)->node() : nullptr;
  if (shape && shape->kind() == c10::aten::size && shape->inputs().size() == 1) {
    if (p->kind() == c10::aten::__getitem__) return dimOf(shape->input(0), constantInt(p->input(1)));
    for (size_t i = 0; i < p->outputs().size(); ++i)
      if (p->output(i) == v) return dimOf(shape->input(0), static_cast<int64_t>(i));
  }
  // Sums and products of sizes, lengths and element counts are sizes too (but not the same one).
  const bool sizeArith = (p->kind() == c10::aten::mul || p->kind() == c10::aten::add) && p->inputs().size() == 2 &&
                         sizeAt(p->input(0), depth + 1) && sizeAt(p->input(1), depth + 1);
  if (sizeArith || p->kind() == c10::aten::len || p->kind() == c10::Symbol::aten("numel"))
    return SymSize{SymSize::Kind::Value, 0, v};
  return std::nullopt;
}

std::optional<std::vector<SymSize>> shapeAt(Value* t, int depth);

// The one shape every tensor argument of a matched elementwise op has.
std::optional<std::vector<SymSize>> commonShape(const ElementwiseMatch& m, int depth) {
  std::optional<std::vector<SymSize>> shape;
  for (const MatchedArg& a : m.args) {
    if (!a.tensor) continue;
    auto s = shapeAt(a.tensor, depth + 1);
    if (!s || (shape && *s != *shape)) return std::nullopt;
    shape = std::move(s);
  }
  return shape;
}

std::optional<std::vector<SymSize>> shapeAt(Value* t, int depth) {
  if (depth > kMaxDepth) return std::nullopt;
  Node* p = t->node();
  if (p->kind() == c10::aten::expand || p->kind() == c10::aten::reshape) {
    // expand(x, sizes): exactly sizes when none is -1 (or it raises); reshape likewise.
    if (p->inputs().size() < 2) return std::nullopt;
    return symbolicSizes(p->input(1));
  }
  if (p->kind() == kCheckReshape) return shapeAt(p->input(0), depth + 1);
  ElementwiseMatch m;
  if (matchElementwise(p, m, nullptr)) return commonShape(m, depth);
  ReductionMatch r;
  if (p->outputs().size() == 1 && matchReduction(p, r, nullptr) && r.spec.dims && r.spec.dims->size() == 1 &&
      (*r.spec.dims)[0] == -1) {
    auto s = shapeAt(r.input, depth + 1);
    if (!s || s->empty()) return std::nullopt;
    if (r.spec.keepdim)
      s->back() = SymSize{SymSize::Kind::Constant, 1};
    else
      s->pop_back();
    return s;
  }
  return std::nullopt;
}

}  // namespace

std::optional<int64_t> constantInt(Value* v) {
  auto iv = toIValue(v);
  if (iv && iv->isInt()) return iv->toInt();
  return std::nullopt;
}

std::optional<SymSize> symbolicSize(Value* v) { return sizeAt(v, 0); }

std::optional<std::vector<SymSize>> symbolicSizes(Value* list) {
  std::vector<SymSize> out;
  if (auto c = toIValue(list)) {
    if (!c->isIntList()) return std::nullopt;
    for (int64_t s : c->toIntVector()) {
      if (s < 0) return std::nullopt;
      out.push_back(SymSize{SymSize::Kind::Constant, s});
    }
    return out;
  }
  if (list->node()->kind() != c10::prim::ListConstruct) return std::nullopt;
  for (Value* e : list->node()->inputs()) {
    auto s = symbolicSize(e);
    if (!s) return std::nullopt;
    out.push_back(*s);
  }
  return out;
}

std::optional<std::vector<SymSize>> symbolicShape(Value* t) { return shapeAt(t, 0); }

}  // namespace tsfuse
