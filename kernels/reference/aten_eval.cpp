#include "kernels/reference/aten_eval.h"

#include "kernels/ir/op_registry.h"

#include <array>
#include <cmath>
#include <sstream>

namespace tsfuse {

c10::Scalar literalScalar(const Arg& arg) {
  switch (arg.kind) {
    case Arg::Kind::Int:
      return c10::Scalar(arg.i);
    case Arg::Kind::Float:
      return c10::Scalar(arg.f);
    case Arg::Kind::Bool:
      return c10::Scalar(arg.i != 0);
    default:
      TORCH_CHECK(false, "tsfuse: argument is not a literal");
  }
}

c10::ScalarType upcastDtype(c10::ScalarType d) {
  if (c10::isFloatingType(d)) return d == c10::kFloat || d == c10::kDouble ? d : c10::kFloat;
  return d == c10::kInt || d == c10::kLong ? d : c10::kInt;
}

at::Tensor inplaceResult(const at::Tensor& value, const at::Tensor& self) {
  // The checks in TensorIterator's order for an in-place op: shape, then dtype, then device.
  TORCH_CHECK(value.sizes() == self.sizes(), "output with shape ", self.sizes(), " doesn't match the broadcast shape ",
              value.sizes());
  TORCH_CHECK(c10::canCast(value.scalar_type(), self.scalar_type()), "result type ", value.scalar_type(),
              " can't be cast to the desired output type ", self.scalar_type());
  TORCH_CHECK(value.device() == self.device(),
              "Expected all tensors to be on the same device, but found at least two "
              "devices, ",
              self.device(), " and ", value.device(), "!");
  if (value.strides() == self.strides()) return value.to(self.scalar_type());
  return at::empty_like(self).copy_(value);
}

at::Tensor catPiece(const at::Tensor& x, const at::Tensor& first, int64_t entry, int64_t dim, bool stack) {
  TORCH_CHECK(entry >= 0, "tsfuse: cat_piece's entry must be >= 0, got ", entry);
  auto meta = [](const at::Tensor& t) { return at::empty(t.sizes(), t.options().device(c10::kMeta)); };
  // Entries 1 .. entry-1 passed their checks: they have entry 0's shape.
  std::vector<at::Tensor> list(static_cast<size_t>(entry) + 1, meta(first));
  list.back() = meta(x);
  (void)(stack ? at::stack(list, dim) : at::cat(list, dim));
  return x;
}

at::Tensor indexMask(const at::Tensor& mask, const at::Tensor& x) {
  TORCH_CHECK_INDEX(mask.dim() <= x.dim(), "too many indices for tensor of dimension ", x.dim());
  for (int64_t j = 0; j < mask.dim(); ++j)
    TORCH_CHECK_INDEX(mask.size(j) == x.size(j), "The shape of the mask ", mask.sizes(), " at index ", j,
                      " does not match the shape of the indexed tensor ", x.sizes(), " at index ", j);
  // (canonicalize proves the rank: a mask of fewer dims selects whole slices, which where() cannot)
  TORCH_CHECK(mask.dim() == x.dim(), "tsfuse: index_mask's mask has fewer dims than the tensor it indexes");
  return mask;
}

at::Tensor extremumJoin(const at::Tensor& piece, const at::Tensor& kept, bool max) {
  const at::Tensor wins = max ? at::ge(kept, piece) : at::le(kept, piece);
  return at::where(at::logical_or(wins, at::isnan(kept)), kept, piece);
}

at::Tensor wrappedNumber(const c10::Scalar& s, c10::Device device) {
  at::Tensor t = at::scalar_tensor(s, at::TensorOptions().dtype(s.type()).device(device));
  t.unsafeGetTensorImpl()->set_wrapped_number(true);
  return t;
}

at::Tensor reusedWrappedNumber(const c10::Scalar& s) {
  thread_local std::array<at::Tensor, 8> kept;
  const c10::ScalarType type = s.type();
  for (at::Tensor& t : kept) {
    if (!t.defined()) {
      t = wrappedNumber(s);
      return t;
    }
    if (t.use_count() != 1 || t.storage().use_count() != 1 || t.scalar_type() != type) continue;
    switch (type) {
      case at::kDouble:
        *t.mutable_data_ptr<double>() = s.toDouble();
        return t;
      case at::kLong:
        *t.mutable_data_ptr<int64_t>() = s.toLong();
        return t;
      case at::kBool:
        *t.mutable_data_ptr<bool>() = s.toBool();
        return t;
      default:
        return wrappedNumber(s);
    }
  }
  return wrappedNumber(s);
}

at::Tensor wrappedLiteral(const Arg& arg, c10::Device device) { return wrappedNumber(literalScalar(arg), device); }

bool isWrappedNumber(const at::Tensor& t) {
  return t.defined() && t.dim() == 0 && t.unsafeGetTensorImpl()->is_wrapped_number();
}

bool numberReadByValue(const Instr& ins, size_t position, const at::Tensor& operand) {
  return ins.args[position].kind == Arg::Kind::Input && readsNumberByValue(ins.op, position) &&
         isWrappedNumber(operand) && operand.is_cpu();
}

bool RefArgs::number(size_t k) const {
  const Arg& arg = ins_.args[k];
  return arg.kind == Arg::Kind::Input && numberReadByValue(ins_, k, inputs_[arg.i]);
}

c10::Scalar RefArgs::S(size_t k) const {
  return number(k) ? inputs_[ins_.args[k].i].item() : literalScalar(ins_.args[k]);
}

void checkOperandCount(const Expr& e, size_t n) {
  TORCH_CHECK(static_cast<int>(n) == e.numInputs, "tsfuse: expression '", e.str(), "' takes ", e.numInputs,
              " operands, got ", n);
}

at::Tensor RefArgs::T(size_t k) const {
  const Arg& arg = ins_.args[k];
  if (arg.kind == Arg::Kind::Input) return inputs_[arg.i];
  if (arg.kind == Arg::Kind::Value) return values_[arg.i];
  return wrappedLiteral(arg, c10::kCPU);
}

std::optional<at::Tensor> RefArgs::optT(size_t k) const {
  if (ins_.args[k].kind == Arg::Kind::None) return std::nullopt;
  return T(k);
}

std::optional<c10::Scalar> RefArgs::optS(size_t k) const {
  if (ins_.args[k].kind == Arg::Kind::None) return std::nullopt;
  return S(k);
}

namespace {

using Reference = at::Tensor (*)(const RefArgs&);
const Reference kReferences[] = {
#define TSFUSE_OP(Id, text, signature, traits, rule, prim, ...) [](const RefArgs&a) -> at::Tensor __VA_ARGS__,
#include "kernels/ir/ops.def"
};

}  // namespace

at::Tensor evalInstr(const Instr& ins, const std::vector<at::Tensor>& values, at::TensorList inputs) {
  return kReferences[static_cast<size_t>(ins.op)](RefArgs(ins, values, inputs));
}

std::vector<at::Tensor> evalAtenAll(const Expr& e, at::TensorList inputs) {
  checkOperandCount(e, inputs.size());
  std::vector<at::Tensor> values;
  values.reserve(e.instrs.size());
  for (const Instr& ins : e.instrs) values.push_back(evalInstr(ins, values, inputs));
  return values;
}

at::Tensor evalAten(const Expr& e, at::TensorList inputs) {
  checkOperandCount(e, inputs.size());
  const size_t n = e.instrs.size();
  std::vector<size_t> lastUse(n, 0);
  for (size_t k = 0; k < n; ++k)
    for (const Arg& arg : e.instrs[k].args)
      if (arg.kind == Arg::Kind::Value) lastUse[arg.i] = k;
  std::vector<at::Tensor> values(n);
  for (size_t k = 0; k < n; ++k) {
    values[k] = evalInstr(e.instrs[k], values, inputs);
    for (const Arg& arg : e.instrs[k].args)
      if (arg.kind == Arg::Kind::Value && lastUse[arg.i] == k) values[arg.i].reset();
  }
  return values[n - 1];
}

at::Tensor applyReduction(const ReduceSpec& r, const at::Tensor& v) {
  if (r.withIndices()) return applyReductionAll(r, v)[0];
  at::OptionalIntArrayRef dims;
  if (r.dims) dims = at::IntArrayRef(*r.dims);
  auto singleDim = [&](const char* what) -> std::optional<int64_t> {
    if (!r.dims) return std::nullopt;
    TORCH_CHECK(r.dims->size() == 1, "tsfuse: ", what, " reduces one dim or all, got ", r.dims->size());
    return (*r.dims)[0];
  };
  switch (r.kind) {
    case Reduction::Sum:
      return at::sum(v, dims, r.keepdim, r.dtype);
    case Reduction::Mean:
      return at::mean(v, dims, r.keepdim, r.dtype);
    case Reduction::Prod: {
      auto d = singleDim("prod");
      return d ? at::prod(v, *d, r.keepdim, r.dtype) : at::prod(v, r.dtype);
    }
    case Reduction::Amax:
    case Reduction::Amin:
      if (r.routesGradient) return extremumValues(v, *singleDim("max/min(dim)"), r.keepdim, r.kind == Reduction::Amax);
      return r.kind == Reduction::Amax ? at::amax(v, r.dims ? at::IntArrayRef(*r.dims) : at::IntArrayRef{}, r.keepdim)
                                       : at::amin(v, r.dims ? at::IntArrayRef(*r.dims) : at::IntArrayRef{}, r.keepdim);
    case Reduction::Any:
      return at::any(v, dims, r.keepdim);
    case Reduction::All:
      return at::all(v, dims, r.keepdim);
    case Reduction::Argmax:
      return at::argmax(v, singleDim("argmax"), r.keepdim);
    case Reduction::Argmin:
      return at::argmin(v, singleDim("argmin"), r.keepdim);
    case Reduction::Logsumexp: {
      std::vector<int64_t> all;  // dim=None: every dim
      if (!r.dims)
        for (int64_t d = 0; d < v.dim(); ++d) all.push_back(d);
      return at::logsumexp(v, r.dims ? at::IntArrayRef(*r.dims) : at::IntArrayRef(all), r.keepdim);
    }
    case Reduction::Norm:
      return at::linalg_vector_norm(v, r.p, dims, r.keepdim, r.dtype);
    case Reduction::Var:
      return at::var(v, dims, c10::Scalar(r.correction), r.keepdim);
    case Reduction::Std:
      return at::std(v, dims, c10::Scalar(r.correction), r.keepdim);
    case Reduction::Max:
    case Reduction::Min:
      break;  // applyReductionAll
  }
  TORCH_CHECK(false, "tsfuse: unhandled reduction");
}

std::vector<at::Tensor> applyReductionAll(const ReduceSpec& r, const at::Tensor& v) {
  if (!r.withIndices()) return {applyReduction(r, v)};
  TORCH_CHECK(r.dims && r.dims->size() == 1, "tsfuse: ", reductionName(r.kind),
              " with indices reduces exactly one dim");
  auto [values, indices] =
      r.kind == Reduction::Max ? at::max(v, (*r.dims)[0], r.keepdim) : at::min(v, (*r.dims)[0], r.keepdim);
  return {values, indices};
}

at::Tensor applyEpilogue(const ReduceSpec& r, const at::Tensor& reduced, at::TensorList epilogueOperands) {
  std::vector<at::Tensor> ops{reduced};
  ops.insert(ops.end(), epilogueOperands.begin(), epilogueOperands.end());
  return evalAten(*r.epilogue, ops);
}

std::vector<at::Tensor> indicesEpilogueOperands(const ReduceSpec& r, at::Tensor values, at::Tensor indices,
                                                at::TensorList epilogueOperands) {
  std::vector<at::Tensor> ops{std::move(values)};
  if (r.epilogue->numInputs >= 2) ops.push_back(std::move(indices));
  ops.insert(ops.end(), epilogueOperands.begin(), epilogueOperands.end());
  return ops;
}

at::Tensor applyIndicesEpilogue(const ReduceSpec& r, const at::Tensor& values, const at::Tensor& indices,
                                at::TensorList epilogueOperands) {
  return evalAten(*r.epilogue, indicesEpilogueOperands(r, values, indices, epilogueOperands));
}

bool ReduceSpec::roundsByOrder(c10::ScalarType valueType) const {
  auto inexact = [](c10::ScalarType t) { return c10::isFloatingType(t) || c10::isComplexType(t); };
  if (!inexact(valueType) && !(dtype && inexact(*dtype))) return false;
  switch (kind) {
    case Reduction::Sum:
    case Reduction::Mean:
    case Reduction::Prod:
    case Reduction::Logsumexp:
    case Reduction::Var:
    case Reduction::Std:
      return true;
    case Reduction::Norm:
      return p != 0.0 && !std::isinf(p);  // order 0 counts, +-inf is an extremum
    case Reduction::Amax:
    case Reduction::Amin:
    case Reduction::Any:
    case Reduction::All:
    case Reduction::Argmax:
    case Reduction::Argmin:
    case Reduction::Max:
    case Reduction::Min:
      return false;
  }
  return true;
}

at::Tensor extremumValues(const at::Tensor& x, int64_t dim, bool keepdim, bool max) {
  return std::get<0>(max ? at::max(x, dim, keepdim) : at::min(x, dim, keepdim));
}

std::string reductionText(const ReduceSpec& r) {
  std::string s = reductionName(r.kind);
  if (r.routesGradient) s += ":index";
  if (r.kind == Reduction::Norm) s += ":" + floatText(r.p);
  if (r.variance()) s += ":" + floatText(r.correction);
  return s;
}

std::string describe(const ReduceSpec& r) {
  std::ostringstream os;
  os << reductionText(r) << "(dim=";
  if (!r.dims) {
    os << "None";
  } else {
    os << "[";
    for (size_t i = 0; i < r.dims->size(); ++i) os << (i ? ", " : "") << (*r.dims)[i];
    os << "]";
  }
  os << ", keepdim=" << (r.keepdim ? "True" : "False");
  if (r.dtype) os << ", dtype=" << dtypeName(*r.dtype);
  os << ")";
  if (r.epilogue) os << " |> " << r.epilogue->str();
  return os.str();
}

}  // namespace tsfuse
