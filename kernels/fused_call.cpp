#include "kernels/fused_call.h"

#include "tsfuse/log.h"
#include "tsfuse/ops.h"

namespace tsfuse {
namespace {

thread_local const char* tlsLastPath = "none";

}  // namespace

std::optional<c10::Device> commonDevice(at::TensorList ops) {
  std::optional<c10::Device> dev;
  for (const auto& t : ops) {
    if (t.dim() == 0 && t.device().is_cpu()) continue;
    if (dev && *dev != t.device()) return std::nullopt;
    dev = t.device();
  }
  return dev ? dev : std::optional<c10::Device>(c10::Device(c10::kCPU));
}

c10::Device mainDevice(at::TensorList ops) {
  auto d = commonDevice(ops);
  return d ? *d : c10::Device(c10::kCPU);
}

void setLastPath(const char* path) { tlsLastPath = path; }
const char* lastPath() { return tlsLastPath; }

at::Tensor runEager(const Expr& e, at::TensorList operands, const ReduceSpec* reduce) {
  setLastPath("eager");
  at::Tensor v = evalAten(e, operands);
  return reduce ? applyReduction(*reduce, v) : v;
}

ReduceSpec makeReduceSpec(c10::string_view reduction, at::OptionalIntArrayRef dim, bool keepdim,
                          std::optional<c10::ScalarType> dtype) {
  ReduceSpec r;
  TORCH_CHECK(reductionFromName(std::string(reduction), r.kind), "tsfuse::reduce: unknown reduction '",
              reduction, "' (sum, mean, prod, amax, amin, any, all, argmax, argmin)");
  // An out-of-range ScalarType (e.g. an int from TorchScript) would index ATen's dtype tables.
  TORCH_CHECK(!dtype || (static_cast<int>(*dtype) >= 0 && *dtype < c10::ScalarType::NumOptions),
              "tsfuse::reduce: dtype ", static_cast<int>(dtype ? *dtype : c10::ScalarType::Undefined),
              " is not a ScalarType");
  if (dim) r.dims = dim->vec();
  r.keepdim = keepdim;
  r.dtype = dtype;
  return r;
}

at::Tensor runFused(at::TensorList operands, c10::string_view exprText, const ReduceSpec* reduce,
                    const NativePath& native) {
  std::shared_ptr<const Expr> e = cachedExpr(std::string(exprText));
  checkOperandCount(*e, operands.size());
  for (size_t i = 0; i < operands.size(); ++i)
    TORCH_CHECK(operands[i].defined(), "tsfuse: operand ", i, " is an undefined tensor");
  auto device = commonDevice(operands);
  if (!device) return runEager(*e, operands, reduce);  // raises eager's device error
  auto an = analyze(*e, operands, reduce);
  if (!an) return runEager(*e, operands, reduce);  // raises eager's error (or computes)
  if (an->outNumel() == 0) {
    // Nothing to compute, and every intermediate is empty too: eager gives the exact layout.
    at::Tensor out = runEager(*e, operands, reduce);
    setLastPath("empty");
    return out;
  }
  if (native) {
    std::string why;
    at::Tensor out = native(*e, operands, reduce, *an, &why);
    if (out.defined()) {
      setLastPath("native");
      return out;
    }
    TSFUSE_LOG(kernel, debug, "native path declined (", why, "); chunked ATen path for ", exprText);
  }
  setLastPath("chunked");
  return runChunked(*e, operands, reduce, *an);
}

}  // namespace tsfuse
