#include "passes/op_table.h"

#include <torch/csrc/jit/ir/constants.h>

#include <unordered_map>

namespace tsfuse {
namespace {

using torch::jit::toIValue;

// How a node's inputs become the instruction's arguments.
enum class Form : uint8_t {
  Plain,      // inputs in order
  Alpha,      // (a, b, alpha): alpha == 1 drops it, else the *_alpha op
  RevAlpha,   // rsub: (self, other, alpha) -> other - alpha * self
  DivMode,    // (a, b, rounding_mode)
  ClampMin,   // (self, min) -> clamp(self, min, None)
  ClampMax,   // (self, max) -> clamp(self, None, max)
  ToDtype,    // (self, dtype, non_blocking, copy, memory_format)
};

struct Entry {
  Op op;
  Form form = Form::Plain;
};

// Keyed by "<schema name>.<overload name>".
const std::unordered_map<std::string, Entry>& table() {
  static const std::unordered_map<std::string, Entry> t = {
      {"aten::add.Tensor", {Op::Add, Form::Alpha}},      {"aten::add.Scalar", {Op::Add, Form::Alpha}},
      {"aten::sub.Tensor", {Op::Sub, Form::Alpha}},      {"aten::sub.Scalar", {Op::Sub, Form::Alpha}},
      {"aten::rsub.Tensor", {Op::Sub, Form::RevAlpha}},  {"aten::rsub.Scalar", {Op::Sub, Form::RevAlpha}},
      {"aten::mul.Tensor", {Op::Mul}},                   {"aten::mul.Scalar", {Op::Mul}},
      {"aten::div.Tensor", {Op::Div}},                   {"aten::div.Scalar", {Op::Div}},
      {"aten::div.Tensor_mode", {Op::Div, Form::DivMode}}, {"aten::div.Scalar_mode", {Op::Div, Form::DivMode}},
      {"aten::minimum.", {Op::Minimum}},                 {"aten::min.other", {Op::Minimum}},
      {"aten::maximum.", {Op::Maximum}},                 {"aten::max.other", {Op::Maximum}},
      {"aten::pow.Tensor_Scalar", {Op::Pow}},            {"aten::pow.Tensor_Tensor", {Op::Pow}},
      {"aten::pow.Scalar", {Op::Pow}},
      {"aten::eq.Tensor", {Op::Eq}}, {"aten::eq.Scalar", {Op::Eq}}, {"aten::ne.Tensor", {Op::Ne}},
      {"aten::ne.Scalar", {Op::Ne}}, {"aten::lt.Tensor", {Op::Lt}}, {"aten::lt.Scalar", {Op::Lt}},
      {"aten::le.Tensor", {Op::Le}}, {"aten::le.Scalar", {Op::Le}}, {"aten::gt.Tensor", {Op::Gt}},
      {"aten::gt.Scalar", {Op::Gt}}, {"aten::ge.Tensor", {Op::Ge}}, {"aten::ge.Scalar", {Op::Ge}},
      {"aten::logical_and.", {Op::LogicalAnd}},          {"aten::logical_or.", {Op::LogicalOr}},
      {"aten::logical_xor.", {Op::LogicalXor}},          {"aten::logical_not.", {Op::LogicalNot}},
      {"aten::neg.", {Op::Neg}},   {"aten::abs.", {Op::Abs}},   {"aten::relu.", {Op::Relu}},
      {"aten::sqrt.", {Op::Sqrt}}, {"aten::exp.", {Op::Exp}},   {"aten::log.", {Op::Log}},
      {"aten::sigmoid.", {Op::Sigmoid}},
      {"aten::clamp.", {Op::Clamp}},                     {"aten::clamp.Tensor", {Op::Clamp}},
      {"aten::clamp_min.", {Op::Clamp, Form::ClampMin}}, {"aten::clamp_min.Tensor", {Op::Clamp, Form::ClampMin}},
      {"aten::clamp_max.", {Op::Clamp, Form::ClampMax}}, {"aten::clamp_max.Tensor", {Op::Clamp, Form::ClampMax}},
      {"aten::where.self", {Op::Where}},                 {"aten::where.ScalarSelf", {Op::Where}},
      {"aten::where.ScalarOther", {Op::Where}},          {"aten::where.Scalar", {Op::Where}},
      {"aten::to.dtype", {Op::To, Form::ToDtype}},
  };
  return t;
}

// toIValue, also seeing through a prim::ListConstruct of int constants (how `dim=[0]` and
// `dim=(0, 1)` arrive in scripted graphs before constant propagation).
std::optional<c10::IValue> constantValue(Value* v) {
  if (auto iv = toIValue(v)) return iv;
  Node* n = v->node();
  if (n->kind() != c10::prim::ListConstruct) return std::nullopt;
  std::vector<int64_t> ints;
  for (Value* in : n->inputs()) {
    auto iv = toIValue(in);
    if (!iv || !iv->isInt()) return std::nullopt;
    ints.push_back(iv->toInt());
  }
  return c10::IValue(ints);
}

std::string schemaKey(Node* n) {
  const c10::FunctionSchema* s = n->maybeSchema();
  if (!s) return {};
  return s->name() + "." + s->overload_name();
}

// A constant input as an expression literal; false when it is not a compile-time constant.
bool constantArg(Value* v, Arg& out, std::string* why) {
  auto iv = toIValue(v);
  if (!iv) {
    if (why) *why = "scalar operand %" + v->debugName() + " is not a constant";
    return false;
  }
  if (iv->isNone()) out = Arg::none();
  else if (iv->isBool()) out = Arg::boolean(iv->toBool());
  else if (iv->isInt()) out = Arg::integer(iv->toInt());
  else if (iv->isDouble()) out = Arg::floating(iv->toDouble());
  else {
    if (why) *why = "constant %" + v->debugName() + " of unsupported type " + iv->tagKind();
    return false;
  }
  return true;
}

bool tensorOrConstant(Value* v, MatchedArg& out, std::string* why) {
  if (v->type()->isSubtypeOf(*c10::TensorType::get())) {
    out.tensor = v;
    return true;
  }
  return constantArg(v, out.constant, why);
}

bool isOne(const Arg& a) {
  return (a.kind == Arg::Kind::Int && a.i == 1) || (a.kind == Arg::Kind::Float && a.f == 1.0);
}

}  // namespace

bool matchElementwise(Node* n, ElementwiseMatch& out, std::string* why) {
  const std::string key = schemaKey(n);
  auto it = table().find(key);
  if (it == table().end()) {
    if (why) *why = std::string(n->kind().toQualString()) + " is not a fusible elementwise op";
    return false;
  }
  const Entry& entry = it->second;
  auto inputs = n->inputs();
  out.op = entry.op;
  out.args.clear();
  auto take = [&](size_t i) {
    MatchedArg a;
    if (!tensorOrConstant(inputs[i], a, why)) return false;
    out.args.push_back(a);
    return true;
  };
  auto constant = [&](size_t i, Arg& a) { return constantArg(inputs[i], a, why); };
  switch (entry.form) {
    case Form::Plain:
      for (size_t i = 0; i < inputs.size(); ++i)
        if (!take(i)) return false;
      return true;
    case Form::Alpha:
    case Form::RevAlpha: {
      Arg alpha;
      if (!constant(2, alpha)) return false;
      bool rev = entry.form == Form::RevAlpha;
      if (!take(rev ? 1 : 0) || !take(rev ? 0 : 1)) return false;
      if (!isOne(alpha)) {
        out.op = entry.op == Op::Add ? Op::AddAlpha : Op::SubAlpha;
        out.args.push_back(MatchedArg{nullptr, alpha});
      }
      return true;
    }
    case Form::DivMode: {
      auto mode = toIValue(inputs[2]);
      if (!mode || !(mode->isNone() || mode->isString())) {
        if (why) *why = "rounding_mode is not a constant";
        return false;
      }
      if (mode->isString()) {
        const std::string& m = mode->toStringRef();
        if (m != "floor" && m != "trunc") {
          if (why) *why = "unknown rounding_mode '" + m + "'";
          return false;
        }
        out.op = m == "floor" ? Op::DivFloor : Op::DivTrunc;
      }
      return take(0) && take(1);
    }
    case Form::ClampMin:
    case Form::ClampMax: {
      if (!take(0) || !take(1)) return false;
      out.args.insert(out.args.begin() + (entry.form == Form::ClampMin ? 2 : 1), MatchedArg{nullptr, Arg::none()});
      return true;
    }
    case Form::ToDtype: {
      auto dtype = toIValue(inputs[1]);
      auto nb = toIValue(inputs[2]);
      auto fmt = toIValue(inputs[4]);
      if (!dtype || !dtype->isInt() || !nb || !fmt ||
          !(fmt->isNone() || (fmt->isInt() && fmt->toInt() == static_cast<int64_t>(c10::MemoryFormat::Preserve)))) {
        if (why) *why = "to(): dtype or memory_format is not a constant (or not preserve)";
        return false;
      }
      if (!take(0)) return false;
      out.args.push_back(MatchedArg{nullptr, Arg::scalarType(static_cast<c10::ScalarType>(dtype->toInt()))});
      return true;
    }
  }
  return false;
}

bool matchReduction(Node* n, ReductionMatch& out, std::string* why) {
  const std::string key = schemaKey(n);
  struct R {
    Reduction kind;
    int dim = -1, keepdim = -1, dtype = -1;  // input positions, -1 when absent
    int p = -1;                               // norm's order (a Scalar; None means 2)
  };
  static const std::unordered_map<std::string, R> reductions = {
      {"aten::sum.dim_IntList", {Reduction::Sum, 1, 2, 3}},  {"aten::sum.", {Reduction::Sum, -1, -1, 1}},
      {"aten::mean.dim", {Reduction::Mean, 1, 2, 3}},        {"aten::mean.", {Reduction::Mean, -1, -1, 1}},
      {"aten::prod.dim_int", {Reduction::Prod, 1, 2, 3}}, {"aten::prod.", {Reduction::Prod, -1, -1, 1}},
      {"aten::amax.", {Reduction::Amax, 1, 2}},              {"aten::amin.", {Reduction::Amin, 1, 2}},
      {"aten::any.", {Reduction::Any}},                      {"aten::all.", {Reduction::All}},
      {"aten::any.dim", {Reduction::Any, 1, 2}},   {"aten::all.dim", {Reduction::All, 1, 2}},
      {"aten::any.dims", {Reduction::Any, 1, 2}},            {"aten::all.dims", {Reduction::All, 1, 2}},
      {"aten::argmax.", {Reduction::Argmax, 1, 2}}, {"aten::argmin.", {Reduction::Argmin, 1, 2}},
      // torch.max/min(x, dim) -> (values, indices). (torch.max(x) is not amax: its empty-input
      // error differs.)
      {"aten::max.dim", {Reduction::Max, 1, 2}},   {"aten::min.dim", {Reduction::Min, 1, 2}},
      {"aten::logsumexp.", {Reduction::Logsumexp, 1, 2}},
      {"aten::linalg_vector_norm.", {Reduction::Norm, 2, 3, 4, 1}},
      {"aten::norm.Scalar", {Reduction::Norm, -1, -1, -1, 1}},
      {"aten::norm.ScalarOpt_dim", {Reduction::Norm, 2, 3, -1, 1}},
      {"aten::norm.ScalarOpt_dim_dtype", {Reduction::Norm, 2, 3, 4, 1}},
      {"aten::norm.ScalarOpt_dtype", {Reduction::Norm, -1, -1, 2, 1}},
  };
  auto it = reductions.find(key);
  if (it == reductions.end()) {
    if (why) *why = std::string(n->kind().toQualString()) + " is not a supported reduction";
    return false;
  }
  const R& r = it->second;
  out.input = n->input(0);
  out.spec = ReduceSpec{};
  out.spec.kind = r.kind;
  auto fail = [&](const char* what) {
    if (why) *why = std::string(n->kind().toQualString()) + ": " + what + " is not a constant";
    return false;
  };
  if (r.dim >= 0) {
    auto d = constantValue(n->input(r.dim));
    if (!d) return fail("dim");
    if (d->isInt()) out.spec.dims = std::vector<int64_t>{d->toInt()};
    else if (d->isIntList()) out.spec.dims = d->toIntVector();
    else if (!d->isNone()) return fail("dim");
  }
  if (r.keepdim >= 0) {
    auto k = constantValue(n->input(r.keepdim));
    if (!k || !k->isBool()) return fail("keepdim");
    out.spec.keepdim = k->toBool();
  }
  if (r.dtype >= 0) {
    auto t = constantValue(n->input(r.dtype));
    if (!t) return fail("dtype");
    if (t->isInt()) out.spec.dtype = static_cast<c10::ScalarType>(t->toInt());
    else if (!t->isNone()) return fail("dtype");
  }
  if (r.p >= 0) {
    auto p = constantValue(n->input(r.p));
    if (!p) return fail("the norm's order");
    if (p->isInt()) out.spec.p = static_cast<double>(p->toInt());
    else if (p->isDouble()) out.spec.p = p->toDouble();
    else if (!p->isNone()) return fail("the norm's order");
  }
  return true;
}

bool isFreshReader(Node* n) {
  ElementwiseMatch m;
  ReductionMatch r;
  if (matchElementwise(n, m, nullptr)) return n->kind() != c10::aten::to;
  return matchReduction(n, r, nullptr);
}

}  // namespace tsfuse
