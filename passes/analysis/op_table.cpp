#include "passes/analysis/op_table.h"

#include "kernels/ir/op_registry.h"
#include "passes/analysis/symbolic_shapes.h"

#include <torch/csrc/jit/ir/constants.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace tsfuse {
namespace {

using torch::jit::toIValue;

// The registry's ATen overloads (kernels/ir/ops.def), keyed by "<schema name>.<overload name>".
const std::unordered_map<std::string, AtenOverload>& table() {
  static const std::unordered_map<std::string, AtenOverload> t = [] {
    std::unordered_map<std::string, AtenOverload> m;
    for (const AtenOverload& o : atenOverloads()) m.emplace(o.schema, o);
    return m;
  }();
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

// The node kinds of a table keyed by "ns::op.overload". A symbol lookup rules out most nodes before
// their schema is resolved, which matters: a node without a schema (constants, lists, GetAttr)
// caches no answer, so each maybeSchema() on it searches the operator registry again.
template <typename Table>
std::unordered_set<c10::Symbol> kindsOf(const Table& t) {
  std::unordered_set<c10::Symbol> k;
  for (const auto& [schema, entry] : t)
    k.insert(c10::Symbol::fromQualString(schema.substr(0, schema.find('.', schema.find("::")))));
  return k;
}

const std::unordered_set<c10::Symbol>& tableKinds() {
  static const std::unordered_set<c10::Symbol> kinds = kindsOf(table());
  return kinds;
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
  if (iv->isNone())
    out = Arg::none();
  else if (iv->isBool())
    out = Arg::boolean(iv->toBool());
  else if (iv->isInt())
    out = Arg::integer(iv->toInt());
  else if (iv->isDouble())
    out = Arg::floating(iv->toDouble());
  else {
    if (why) *why = "constant %" + v->debugName() + " of unsupported type " + iv->tagKind();
    return false;
  }
  return true;
}

}  // namespace

bool isTensor(Value* v) { return v->type()->isSubtypeOf(*c10::TensorType::get()); }

namespace {

// A Python number (int, float, bool) that is not a compile-time constant.
bool runtimeNumber(Value* v) {
  const c10::TypeKind k = v->type()->kind();
  return (k == c10::TypeKind::FloatType || k == c10::TypeKind::IntType || k == c10::TypeKind::BoolType) && !toIValue(v);
}

// `v` as argument `position` of `op`: a tensor, a constant, or a number known only at run time, an
// operand once wrapped: read as a tensor where the op computes on a number as on the number wrapped
// (kRuntimeNumber), else by value (kernels/runtime/bind_numbers.h). add_alpha's / sub_alpha's alpha takes
// constants only.
bool tensorOrConstant(Value* v, Op op, size_t position, MatchedArg& out, std::string* why) {
  if (isTensor(v)) {
    out.tensor = v;
    return true;
  }
  if (runtimeNumber(v)) {
    const OpDef& def = opDef(op);
    const char kind = position < static_cast<size_t>(def.arity()) ? def.signature[position] : 's';
    if (kind == 'v' || kind == 'o' || readsNumberByValue(op, position)) {
      out.number = v;
      return true;
    }
    if (why)
      *why =
          "scalar operand %" + v->debugName() + " is not a constant, and " + def.name + " takes only a constant there";
    return false;
  }
  return constantArg(v, out.constant, why);
}

bool isOne(const Arg& a) {
  return (a.kind == Arg::Kind::Int && a.i == 1) || (a.kind == Arg::Kind::Float && a.f == 1.0);
}

}  // namespace

bool matchElementwise(Node* n, ElementwiseMatch& out, std::string* why) {
  auto it = tableKinds().count(n->kind()) ? table().find(schemaKey(n)) : table().end();
  if (it == table().end()) {
    if (why) *why = std::string(n->kind().toQualString()) + " is not a fusible elementwise op";
    return false;
  }
  const AtenOverload& entry = it->second;
  auto inputs = n->inputs();
  out.op = entry.op;
  out.args.clear();
  auto take = [&](size_t i) {
    MatchedArg a;
    if (!tensorOrConstant(inputs[i], out.op, out.args.size(), a, why)) return false;
    out.args.push_back(a);
    return true;
  };
  auto constant = [&](size_t i, Arg& a) { return constantArg(inputs[i], a, why); };
  // to(self, <target>, non_blocking, copy, memory_format) with non_blocking at `nb`: constants,
  // the format preserved (the fused op's result is fresh, whatever `copy` asks); a dtype target
  // at `dtypeAt` a constant too.
  auto castTo = [&](size_t nb, std::optional<size_t> dtypeAt) {
    auto fmt = toIValue(inputs[nb + 2]);
    const bool preserved =
        fmt && (fmt->isNone() || (fmt->isInt() && fmt->toInt() == static_cast<int64_t>(c10::MemoryFormat::Preserve)));
    if ((dtypeAt && !constantInt(inputs[*dtypeAt])) || !toIValue(inputs[nb]) || !preserved) {
      if (why) *why = "to(): dtype or memory_format is not a constant (or not preserve)";
      return false;
    }
    return true;
  };
  auto pushDtype = [&](size_t at) {
    out.args.push_back(
        MatchedArg{nullptr, Arg::scalarType(static_cast<c10::ScalarType>(toIValue(inputs[at])->toInt()))});
    return true;
  };
  switch (entry.form) {
    case AtenForm::Plain:
      for (size_t i = 0; i < inputs.size(); ++i)
        if (!take(i)) return false;
      return true;
    case AtenForm::Alpha:
    case AtenForm::RevAlpha: {
      Arg alpha;
      if (!constant(2, alpha)) return false;
      bool rev = entry.form == AtenForm::RevAlpha;
      if (!take(rev ? 1 : 0) || !take(rev ? 0 : 1)) return false;
      if (!isOne(alpha)) {
        out.op = entry.op == Op::Add ? Op::AddAlpha : Op::SubAlpha;
        out.args.push_back(MatchedArg{nullptr, alpha});
      }
      return true;
    }
    case AtenForm::DivMode: {
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
    case AtenForm::ToDtype:
      return castTo(2, 1) && take(0) && pushDtype(1);
    case AtenForm::ToDevice: {
      auto device = toIValue(inputs[1]);
      if (!device || !device->isDevice()) {
        if (why) *why = "to(): the device is not a constant";
        return false;
      }
      if (!castTo(3, 2) || !take(0)) return false;
      out.args.push_back(MatchedArg{nullptr, Arg::onDevice(device->toDevice())});
      return pushDtype(2);
    }
    case AtenForm::ToOther: {
      // (self, other, non_blocking, copy, memory_format): other a 0-dim prototype
      Node* p = inputs[1]->node();
      const auto sizes = p->kind() == c10::aten::empty ? symbolicSizes(p->input(0)) : std::nullopt;
      if (!sizes || !sizes->empty()) {
        if (why) *why = "to(other): other is not a 0-dim prototype (passes/prototype_casts.cpp makes one)";
        return false;
      }
      return castTo(2, std::nullopt) && take(0) && take(1);
    }
    case AtenForm::Like: {
      // (self, [fill_value,] dtype, layout, device, pin_memory, memory_format): the result is
      // self's dtype, layout and device only where those are None (pin_memory also False, as
      // tracing records it; memory_format also preserve).
      const bool full = n->kind() == c10::aten::full_like;
      for (size_t i = full ? 2 : 1; i < inputs.size(); ++i) {
        auto c = toIValue(inputs[i]);
        const bool preserve = i + 1 == inputs.size() && c && c->isInt() &&
                              c->toInt() == static_cast<int64_t>(c10::MemoryFormat::Preserve);
        const bool unpinned = i + 2 == inputs.size() && c && c->isBool() && !c->toBool();
        if (!c || !(c->isNone() || preserve || unpinned)) {
          if (why)
            *why = std::string(n->kind().toQualString()) + "(): a dtype, layout, device or memory format is given";
          return false;
        }
      }
      if (!take(0)) return false;
      if (full) return take(1);
      out.args.push_back(MatchedArg{nullptr, Arg::integer(n->kind() == c10::aten::ones_like ? 1 : 0)});
      return true;
    }
  }
  return false;
}

namespace {

// A constant int or float argument read as a double into `out`; None keeps `out`'s default
// (norm's order 2, var/std's correction 1). False when the value is not such a constant.
bool constantScalarOrNone(Value* v, double& out) {
  auto c = constantValue(v);
  if (!c) return false;
  if (c->isInt())
    out = static_cast<double>(c->toInt());
  else if (c->isDouble())
    out = c->toDouble();
  else if (!c->isNone())
    return false;
  return true;
}

}  // namespace

namespace {

struct ReductionOverload {
  Reduction kind;
  int dim = -1, keepdim = -1, dtype = -1;  // input positions, -1 when absent
  int p = -1;                              // norm's order (a Scalar; None means 2)
  int unbiased = -1, correction = -1;      // var/std: a bool, or a Scalar (None means 1)
  int max = -1;  // tsfuse::extremum_values: a bool, amax's values (true) or amin's, routing the gradient
};

const std::unordered_map<std::string, ReductionOverload>& reductionTable() {
  using R = ReductionOverload;
  static const std::unordered_map<std::string, R> reductions = {
      {"aten::sum.dim_IntList", {Reduction::Sum, 1, 2, 3}},
      {"aten::sum.", {Reduction::Sum, -1, -1, 1}},
      {"aten::mean.dim", {Reduction::Mean, 1, 2, 3}},
      {"aten::mean.", {Reduction::Mean, -1, -1, 1}},
      {"aten::prod.dim_int", {Reduction::Prod, 1, 2, 3}},
      {"aten::prod.", {Reduction::Prod, -1, -1, 1}},
      {"aten::amax.", {Reduction::Amax, 1, 2}},
      {"aten::amin.", {Reduction::Amin, 1, 2}},
      {"aten::any.", {Reduction::Any}},
      {"aten::all.", {Reduction::All}},
      {"aten::any.dim", {Reduction::Any, 1, 2}},
      {"aten::all.dim", {Reduction::All, 1, 2}},
      {"aten::any.dims", {Reduction::Any, 1, 2}},
      {"aten::all.dims", {Reduction::All, 1, 2}},
      {"aten::argmax.", {Reduction::Argmax, 1, 2}},
      {"aten::argmin.", {Reduction::Argmin, 1, 2}},
      // torch.max/min(x, dim) -> (values, indices). (torch.max(x) is not amax: its empty-input
      // error differs.)
      {"aten::max.dim", {Reduction::Max, 1, 2}},
      {"aten::min.dim", {Reduction::Min, 1, 2}},
      {"aten::logsumexp.", {Reduction::Logsumexp, 1, 2}},
      // max/min(x, dim)'s values with the indices unused (passes/canonicalize.cpp).
      {"tsfuse::extremum_values.", {Reduction::Amax, 1, 2, -1, -1, -1, -1, 3}},
      {"aten::linalg_vector_norm.", {Reduction::Norm, 2, 3, 4, 1}},
      {"aten::norm.Scalar", {Reduction::Norm, -1, -1, -1, 1}},
      {"aten::norm.ScalarOpt_dim", {Reduction::Norm, 2, 3, -1, 1}},
      {"aten::norm.ScalarOpt_dim_dtype", {Reduction::Norm, 2, 3, 4, 1}},
      {"aten::norm.ScalarOpt_dtype", {Reduction::Norm, -1, -1, 2, 1}},
      {"aten::var.", {Reduction::Var, -1, -1, -1, -1, 1}},
      {"aten::var.dim", {Reduction::Var, 1, 3, -1, -1, 2}},
      {"aten::var.correction", {Reduction::Var, 1, 3, -1, -1, -1, 2}},
      {"aten::std.", {Reduction::Std, -1, -1, -1, -1, 1}},
      {"aten::std.dim", {Reduction::Std, 1, 3, -1, -1, 2}},
      {"aten::std.correction", {Reduction::Std, 1, 3, -1, -1, -1, 2}},
  };
  return reductions;
}

}  // namespace

bool viewsCommute(const ElementwiseMatch& m) { return !opDef(m.op).has(kChecksSizes); }

bool matchReduction(Node* n, ReductionMatch& out, std::string* why) {
  static const std::unordered_set<c10::Symbol> kinds = kindsOf(reductionTable());
  const auto& reductions = reductionTable();
  auto it = kinds.count(n->kind()) ? reductions.find(schemaKey(n)) : reductions.end();
  if (it == reductions.end()) {
    if (why) *why = std::string(n->kind().toQualString()) + " is not a supported reduction";
    return false;
  }
  const ReductionOverload& r = it->second;
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
    if (d->isInt())
      out.spec.dims = std::vector<int64_t>{d->toInt()};
    else if (d->isIntList())
      out.spec.dims = d->toIntVector();
    else if (!d->isNone())
      return fail("dim");
  }
  if (r.keepdim >= 0) {
    auto k = constantValue(n->input(r.keepdim));
    if (!k || !k->isBool()) return fail("keepdim");
    out.spec.keepdim = k->toBool();
  }
  if (r.dtype >= 0) {
    auto t = constantValue(n->input(r.dtype));
    if (!t) return fail("dtype");
    if (t->isInt())
      out.spec.dtype = static_cast<c10::ScalarType>(t->toInt());
    else if (!t->isNone())
      return fail("dtype");
  }
  if (r.p >= 0) {
    if (!constantScalarOrNone(n->input(r.p), out.spec.p)) return fail("the norm's order");
  }
  if (r.unbiased >= 0) {
    auto u = constantValue(n->input(r.unbiased));
    if (!u || !u->isBool()) return fail("unbiased");
    out.spec.correction = u->toBool() ? 1.0 : 0.0;
  }
  if (r.correction >= 0) {
    if (!constantScalarOrNone(n->input(r.correction), out.spec.correction)) return fail("the correction");
  }
  if (r.max >= 0) {
    auto m = constantValue(n->input(r.max));
    if (!m || !m->isBool()) return fail("max");
    out.spec.kind = m->toBool() ? Reduction::Amax : Reduction::Amin;
    out.spec.routesGradient = true;
  }
  return true;
}

bool isMetadataRead(Node* n) {
  static const std::unordered_set<c10::Symbol> kinds = {c10::prim::dtype,  c10::prim::device,
                                                        c10::prim::layout, c10::aten::size,
                                                        c10::aten::dim,    c10::Symbol::aten("numel")};
  return kinds.count(n->kind()) && n->inputs().size() <= 2;
}

size_t valueReaders(Value* v) {
  const auto& uses = v->uses();
  return std::count_if(uses.begin(), uses.end(), [](const torch::jit::Use& u) { return !isMetadataRead(u.user); });
}

bool isTsfuseOp(const Node* n) {
  static const c10::Symbol tsfuse = c10::Symbol::fromQualString("namespaces::tsfuse");
  return n->kind().ns() == tsfuse;
}

bool isFreshReader(Node* n) {
  if (isMetadataRead(n)) return true;
  ElementwiseMatch m;
  ReductionMatch r;
  if (matchElementwise(n, m, nullptr)) return !opDef(m.op).has(kMayAlias);
  return matchReduction(n, r, nullptr);
}

std::string outOfPlaceName(const std::string& name) {
  const size_t n = name.size();
  if (n >= 2 && name[n - 1] == '_' && name[n - 2] != '_') return name.substr(0, n - 1);  // add_ -> add
  // Python's augmented assignments: __iand__ -> __and__ (not __init__, __is__: a dunder of its own)
  static const std::unordered_set<std::string> augmented = {
      "__iadd__", "__isub__", "__imul__", "__idiv__", "__iand__", "__ior__", "__ixor__", "__ilshift__", "__irshift__"};
  if (augmented.count(name)) return "__" + name.substr(3);
  return "";
}

bool isInPlaceAtenOp(const Node* n) {
  return n->kind().is_aten() && !outOfPlaceName(n->kind().toUnqualString()).empty() && !n->inputs().empty() &&
         n->input(0)->type()->isSubtypeOf(*c10::TensorType::get());
}

std::optional<size_t> dimArgumentOf(Node* n) {
  const c10::FunctionSchema* schema = n->maybeSchema();
  if (!schema) return std::nullopt;
  for (size_t i = 0; i < schema->arguments().size() && i < n->inputs().size(); ++i)
    if (schema->arguments()[i].name() == "dim") return i;
  return std::nullopt;
}

}  // namespace tsfuse
