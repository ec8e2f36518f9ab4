#include "kernels/aten_eval.h"

#include <sstream>

namespace tsfuse {

c10::Scalar literalScalar(const Arg& arg) {
  switch (arg.kind) {
    case Arg::Kind::Int: return c10::Scalar(arg.i);
    case Arg::Kind::Float: return c10::Scalar(arg.f);
    case Arg::Kind::Bool: return c10::Scalar(arg.i != 0);
    default: TORCH_CHECK(false, "tsfuse: argument is not a literal");
  }
}

at::Tensor wrappedLiteral(const Arg& arg, c10::Device device) {
  c10::Scalar s = literalScalar(arg);
  at::Tensor t = at::scalar_tensor(s, at::TensorOptions().dtype(s.type()).device(device));
  t.unsafeGetTensorImpl()->set_wrapped_number(true);
  return t;
}

void checkOperandCount(const Expr& e, size_t n) {
  TORCH_CHECK(static_cast<int>(n) == e.numInputs, "tsfuse: expression '", e.str(), "' takes ",
              e.numInputs, " operands, got ", n);
}

at::Tensor evalInstr(const Instr& ins, const std::vector<at::Tensor>& values, at::TensorList inputs) {
  const auto& a = ins.args;
  auto T = [&](size_t k) -> at::Tensor {
    const Arg& arg = a[k];
    if (arg.kind == Arg::Kind::Input) return inputs[arg.i];
    if (arg.kind == Arg::Kind::Value) return values[arg.i];
    // A Python number is a CPU wrapped scalar in eager, whatever the tensors' device: ATen's
    // CUDA kernels read it on the host (in float for float16/bfloat16 ops), so it stays on the CPU.
    return wrappedLiteral(arg, c10::kCPU);
  };
  auto S = [&](size_t k) { return literalScalar(a[k]); };
  auto optS = [&](size_t k) -> std::optional<c10::Scalar> {
    if (a[k].kind == Arg::Kind::None) return std::nullopt;
    return S(k);
  };
  auto optT = [&](size_t k) -> std::optional<at::Tensor> {
    if (a[k].kind == Arg::Kind::None) return std::nullopt;
    return T(k);
  };
  switch (ins.op) {
    case Op::Add: return at::add(T(0), T(1));
    case Op::AddAlpha: return at::add(T(0), T(1), S(2));
    case Op::Sub: return at::sub(T(0), T(1));
    case Op::SubAlpha: return at::sub(T(0), T(1), S(2));
    case Op::Mul: return at::mul(T(0), T(1));
    case Op::Div: return at::div(T(0), T(1));
    case Op::DivFloor: return at::div(T(0), T(1), "floor");
    case Op::DivTrunc: return at::div(T(0), T(1), "trunc");
    case Op::Minimum: return at::minimum(T(0), T(1));
    case Op::Maximum: return at::maximum(T(0), T(1));
    case Op::Pow:
      // pow's Scalar overloads run other kernels than pow(Tensor, Tensor): keep them apart.
      if (a[1].isLiteral()) return at::pow(T(0), S(1));
      if (a[0].isLiteral()) return at::pow(S(0), T(1));
      return at::pow(T(0), T(1));
    case Op::Eq: return a[1].isLiteral() ? at::eq(T(0), S(1)) : at::eq(T(0), T(1));
    case Op::Ne: return a[1].isLiteral() ? at::ne(T(0), S(1)) : at::ne(T(0), T(1));
    case Op::Lt: return a[1].isLiteral() ? at::lt(T(0), S(1)) : at::lt(T(0), T(1));
    case Op::Le: return a[1].isLiteral() ? at::le(T(0), S(1)) : at::le(T(0), T(1));
    case Op::Gt: return a[1].isLiteral() ? at::gt(T(0), S(1)) : at::gt(T(0), T(1));
    case Op::Ge: return a[1].isLiteral() ? at::ge(T(0), S(1)) : at::ge(T(0), T(1));
    case Op::LogicalAnd: return at::logical_and(T(0), T(1));
    case Op::LogicalOr: return at::logical_or(T(0), T(1));
    case Op::LogicalXor: return at::logical_xor(T(0), T(1));
    case Op::LogicalNot: return at::logical_not(T(0));
    case Op::Neg: return at::neg(T(0));
    case Op::Abs: return at::abs(T(0));
    case Op::Relu: return at::relu(T(0));
    case Op::Sqrt: return at::sqrt(T(0));
    case Op::Exp: return at::exp(T(0));
    case Op::Log: return at::log(T(0));
    case Op::Sigmoid: return at::sigmoid(T(0));
    case Op::Clamp:
      if (a[1].isTensor() || a[2].isTensor()) return at::clamp(T(0), optT(1), optT(2));
      return at::clamp(T(0), optS(1), optS(2));
    case Op::Where:
      if (a[1].isLiteral() && a[2].isLiteral()) return at::where(T(0), S(1), S(2));
      if (a[1].isLiteral()) return at::where(T(0), S(1), T(2));
      if (a[2].isLiteral()) return at::where(T(0), T(1), S(2));
      return at::where(T(0), T(1), T(2));
    case Op::To: return T(0).to(a[1].dtype);
  }
  TORCH_CHECK(false, "tsfuse: unhandled op ", opInfo(ins.op).name);
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
    TORCH_CHECK(r.dims->size() == 1, "tsfuse: ", what, " reduces one dim or all, got ",
                r.dims->size());
    return (*r.dims)[0];
  };
  switch (r.kind) {
    case Reduction::Sum: return at::sum(v, dims, r.keepdim, r.dtype);
    case Reduction::Mean: return at::mean(v, dims, r.keepdim, r.dtype);
    case Reduction::Prod: {
      auto d = singleDim("prod");
      return d ? at::prod(v, *d, r.keepdim, r.dtype) : at::prod(v, r.dtype);
    }
    case Reduction::Amax: return at::amax(v, r.dims ? at::IntArrayRef(*r.dims) : at::IntArrayRef{}, r.keepdim);
    case Reduction::Amin: return at::amin(v, r.dims ? at::IntArrayRef(*r.dims) : at::IntArrayRef{}, r.keepdim);
    case Reduction::Any: return at::any(v, dims, r.keepdim);
    case Reduction::All: return at::all(v, dims, r.keepdim);
    case Reduction::Argmax: return at::argmax(v, singleDim("argmax"), r.keepdim);
    case Reduction::Argmin: return at::argmin(v, singleDim("argmin"), r.keepdim);
    case Reduction::Logsumexp: {
      std::vector<int64_t> all;  // dim=None: every dim
      if (!r.dims)
        for (int64_t d = 0; d < v.dim(); ++d) all.push_back(d);
      return at::logsumexp(v, r.dims ? at::IntArrayRef(*r.dims) : at::IntArrayRef(all), r.keepdim);
    }
    case Reduction::Norm: return at::linalg_vector_norm(v, r.p, dims, r.keepdim, r.dtype);
    case Reduction::Max: case Reduction::Min: break;  // applyReductionAll
  }
  TORCH_CHECK(false, "tsfuse: unhandled reduction");
}

std::vector<at::Tensor> applyReductionAll(const ReduceSpec& r, const at::Tensor& v) {
  if (!r.withIndices()) return {applyReduction(r, v)};
  TORCH_CHECK(r.dims && r.dims->size() == 1, "tsfuse: ", reductionName(r.kind), " with indices reduces exactly one dim");
  auto [values, indices] = r.kind == Reduction::Max ? at::max(v, (*r.dims)[0], r.keepdim)
                                                    : at::min(v, (*r.dims)[0], r.keepdim);
  return {values, indices};
}

at::Tensor applyEpilogue(const ReduceSpec& r, const at::Tensor& reduced, at::TensorList epilogueOperands) {
  std::vector<at::Tensor> ops{reduced};
  ops.insert(ops.end(), epilogueOperands.begin(), epilogueOperands.end());
  return evalAten(*r.epilogue, ops);
}

std::string reductionText(const ReduceSpec& r) {
  std::string s = reductionName(r.kind);
  if (r.kind == Reduction::Norm) s += ":" + floatText(r.p);
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
  if (r.dtype) os << ", dtype=" << *r.dtype;
  os << ")";
  if (r.epilogue) os << " |> " << r.epilogue->str();
  return os.str();
}

}  // namespace tsfuse
