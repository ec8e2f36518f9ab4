#include "kernels/analysis.h"

#include "tsfuse/log.h"

#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace tsfuse {
namespace {

at::Tensor metaLike(const at::Tensor& t) {
  at::Tensor m = at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::kMeta));
  if (t.unsafeGetTensorImpl()->is_wrapped_number()) m.unsafeGetTensorImpl()->set_wrapped_number(true);
  return m;
}

// The dtype an instruction's tensor and scalar operands are converted to before it computes.
c10::ScalarType computeTypeOf(const Instr& ins, const at::Tensor& result,
                              const std::vector<at::Tensor>& values, at::TensorList inputs) {
  auto operand = [&](size_t k) -> at::Tensor {
    const Arg& a = ins.args[k];
    if (a.kind == Arg::Kind::Input) return inputs[a.i];
    if (a.kind == Arg::Kind::Value) return values[a.i];
    return wrappedLiteral(a, c10::kMeta);
  };
  switch (ins.op) {
    case Op::Eq: case Op::Ne: case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge:
      return at::result_type(operand(0), operand(1));
    case Op::LogicalAnd: case Op::LogicalOr: case Op::LogicalXor: case Op::LogicalNot:
      return c10::ScalarType::Bool;  // operands are tested for truth
    default:
      return result.scalar_type();
  }
}

}  // namespace

std::optional<Analysis> analyze(const Expr& e, at::TensorList operands, const ReduceSpec* reduce) {
  Analysis a;
  try {
    std::vector<at::Tensor> metas;
    metas.reserve(operands.size());
    for (const auto& t : operands) metas.push_back(metaLike(t));
    a.values = evalAtenAll(e, metas);
    a.computeType.reserve(e.instrs.size());
    for (size_t k = 0; k < e.instrs.size(); ++k)
      a.computeType.push_back(computeTypeOf(e.instrs[k], a.values[k], a.values, metas));
    a.out = reduce ? applyReduction(*reduce, a.values.back()) : a.values.back();
    at::DimVector shape;
    for (const auto& t : operands) shape = at::infer_size_dimvector(shape, t.sizes());
    a.shape.assign(shape.begin(), shape.end());
  } catch (const std::exception& err) {
    // NB: in a Python process the Meta kernels of many aten ops are Python reference
    // implementations, whose errors arrive as Python exceptions, not c10::Error.
    TSFUSE_LOG(kernel, debug, "analysis: eager would raise or meta failed: ", err.what());
    return std::nullopt;
  }
  return a;
}

std::shared_ptr<const Expr> cachedExpr(const std::string& text) {
  constexpr size_t kMaxEntries = 4096;  // models hold few; bound what a fuzzer can grow
  static std::mutex mu;
  static std::unordered_map<std::string, std::shared_ptr<const Expr>> cache;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(text);
    if (it != cache.end()) return it->second;
  }
  auto parsed = std::make_shared<const Expr>(Expr::parse(text));  // throws on malformed text
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() >= kMaxEntries) cache.clear();
  cache.emplace(text, parsed);
  return parsed;
}

std::vector<int64_t> reducedDims(const ReduceSpec& r, int64_t rank) {
  std::vector<int64_t> dims;
  if (!r.dims || r.dims->empty()) {
    for (int64_t d = 0; d < rank; ++d) dims.push_back(d);
    return dims;
  }
  for (int64_t d : *r.dims) dims.push_back(at::maybe_wrap_dim(d, rank));
  std::sort(dims.begin(), dims.end());
  dims.erase(std::unique(dims.begin(), dims.end()), dims.end());
  return dims;
}

}  // namespace tsfuse
