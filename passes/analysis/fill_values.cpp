// What x[mask] = c writes (passes/analysis/fill_values.h).
#include "passes/analysis/fill_values.h"

#include "passes/analysis/op_table.h"
#include "passes/analysis/shape_facts.h"

#include "kernels/ir/op_registry.h"

#include <torch/csrc/jit/ir/constants.h>

#include <cmath>

namespace tsfuse {

using torch::jit::Node;
using torch::jit::toIValue;
using torch::jit::Value;

namespace {

// What is known statically of a tensor's dtype, enough to tell how a number converts to it and
// whether where(mask, number, x) keeps it (a number never promotes a tensor of its own kind, nor
// an integer one a floating tensor; an integer promotes bool).
enum class KnownDtype { Unknown, NeverBool, Int64, Floating };

// Ops whose result has their arguments' promoted dtype (add, sub, mul, min/max, clamp, neg, abs,
// pow), not a compare's, a logical op's or a cast's.
bool promotesItsArguments(const OpDef& d) {
  const bool rule = d.rule == LowerRule::Map || d.rule == LowerRule::Clamp || d.rule == LowerRule::Relu ||
                    d.rule == LowerRule::Square;
  return rule && !d.has(kCompare) && !d.has(kLogical);
}

KnownDtype knownDtype(Value* x, int depth = 0) {
  Node* p = x->node();
  if ((isMinMaxDim(p) && x == p->output(1)) || p->kind() == c10::aten::argmax || p->kind() == c10::aten::argmin)
    return KnownDtype::Int64;
  if (isWhereScalarSelf(p) && depth < 64) {
    auto number = toIValue(p->input(1));
    KnownDtype other = knownDtype(p->input(2), depth + 1);
    if (number && number->isInt() && other != KnownDtype::Unknown) return other;
    if (number && number->isDouble() && other == KnownDtype::Floating) return other;
    return KnownDtype::Unknown;
  }
  ReductionMatch r;
  if (matchReduction(p, r, nullptr) && x == p->output(0)) {
    if (r.spec.dtype)
      return c10::isFloatingType(*r.spec.dtype) ? KnownDtype::Floating
             : *r.spec.dtype == c10::kLong      ? KnownDtype::Int64
                                                : KnownDtype::Unknown;
    switch (r.spec.kind) {
      case Reduction::Mean:
      case Reduction::Logsumexp:
      case Reduction::Norm:
      case Reduction::Var:
      case Reduction::Std:
        return KnownDtype::Floating;
      case Reduction::Sum:
      case Reduction::Prod:
        return KnownDtype::NeverBool;  // a bool or integer one is int64
      default:
        return KnownDtype::Unknown;  // max/min keep the input's dtype, bool too; any/all are bool
    }
  }
  ElementwiseMatch m;
  if (!matchElementwise(p, m, nullptr)) return KnownDtype::Unknown;
  const OpDef& d = opDef(m.op);
  if (d.has(kFloatValued)) return KnownDtype::Floating;
  if (d.has(kNeverBool) && !promotesItsArguments(d)) return KnownDtype::NeverBool;
  if (!promotesItsArguments(d) || depth >= 64) return KnownDtype::Unknown;
  // The result's dtype is the arguments' promoted one: floating where one is (a Python float, or
  // a floating tensor of any shape: a float's category is above an integer's and bool's), never
  // bool where one is not bool (2.0 * matmul(...) + n: floating, whatever the matmul's dtype).
  KnownDtype known = d.has(kNeverBool) ? KnownDtype::NeverBool : KnownDtype::Unknown;
  for (const MatchedArg& a : m.args) {
    const c10::TypeKind number = a.number ? a.number->type()->kind() : c10::TypeKind::AnyType;
    KnownDtype k = KnownDtype::Unknown;
    if (a.tensor)
      k = knownDtype(a.tensor, depth + 1);
    else if (a.constant.kind == Arg::Kind::Float || number == c10::TypeKind::FloatType)
      k = KnownDtype::Floating;
    else if (a.constant.kind == Arg::Kind::Int || number == c10::TypeKind::IntType)
      k = KnownDtype::NeverBool;
    if (k == KnownDtype::Floating) return k;
    if (k != KnownDtype::Unknown) known = KnownDtype::NeverBool;
  }
  return known;
}

}  // namespace

bool scriptedValue(Value* value, Value* x, const MadeFrom& madeFrom) {
  Node* v = value->node();
  if (v->kind() != c10::aten::tensor || v->inputs().size() != 4) return false;
  auto readsOf = [&](Value* meta, c10::Symbol kind) {
    if (meta->node()->kind() != kind) return false;
    for (Value* y = x;;) {
      if (meta->node()->input() == y) return true;
      if (auto it = madeFrom.find(y); it != madeFrom.end())
        y = it->second;
      else if (keepsDtype(y->node()))
        y = y->node()->input(0);
      else
        return false;
    }
  };
  auto requiresGrad = toIValue(v->input(3));
  return readsOf(v->input(1), c10::prim::dtype) && readsOf(v->input(2), c10::prim::device) && requiresGrad &&
         requiresGrad->isBool() && !requiresGrad->toBool();
}

std::optional<c10::Scalar> fillNumber(Value* value, Value* x, const MadeFrom& madeFrom, std::string& why) {
  Node* v = value->node();
  std::optional<c10::IValue> c;
  if (v->kind() == c10::aten::tensor && v->inputs().size() == 4) {
    if (!scriptedValue(value, x, madeFrom)) {
      why = "the value is not tensor(c, dtype=x.dtype, device=x.device)";
      return std::nullopt;
    }
    c = toIValue(v->input(0));
  } else if (auto t = toIValue(value);
             t && t->isTensor() && t->toTensor().dim() == 0 && !t->toTensor().requires_grad()) {
    c = t->toTensor().item();
  }
  if (!c || !c->isScalar()) {
    why = "the value is not a constant number";
    return std::nullopt;
  }
  c10::Scalar number = c->toScalar();
  if (number.isBoolean() || number.isComplex()) {
    why = "the value is a bool or complex number";
    return std::nullopt;
  }
  return number;
}

std::optional<c10::Scalar> convertsAlike(const c10::Scalar& number, Value* x, std::string& why) {
  double d = number.toDouble();
  bool integral = number.isIntegral(false);
  bool floatExact = std::isnan(d) || static_cast<double>(static_cast<float>(d)) == d;
  switch (knownDtype(x)) {
    case KnownDtype::Int64:
      if (integral) return number;
      break;
    case KnownDtype::Floating:
      if (integral || floatExact) return number;
      break;
    case KnownDtype::NeverBool:
      // as an int: a float number would promote an integer x (a traced `x[m] = 0` holds 0.0)
      if (d >= 0 && d <= 127 && d == std::floor(d)) return c10::Scalar(static_cast<int64_t>(d));
      break;
    case KnownDtype::Unknown:
      break;
  }
  why = "%" + x->debugName() + "'s dtype is not known well enough to convert " + std::to_string(d) +
        " to it the way index_put_ would";
  return std::nullopt;
}

}  // namespace tsfuse
