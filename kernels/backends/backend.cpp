#include "kernels/backends/backend.h"

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

void checkFusedOperandCount(const Expr& e, const ReduceSpec* reduce, size_t n) {
  if (!reduce || !reduce->epilogue) return checkOperandCount(e, n);
  const int64_t ownInputs = reduce->withIndices() ? 2 : 1;  // ($0 value[, $1 indices]) come from the reduction
  const size_t want = e.numInputs + std::max<int64_t>(reduce->epilogue->numInputs - ownInputs, 0);
  TORCH_CHECK(n == want, "tsfuse: expression '", e.str(), "' with epilogue '", reduce->epilogue->str(),
              "' takes ", want, " operands, got ", n);
}

Outputs evalFused(const Expr& e, at::TensorList operands, const ReduceSpec* reduce) {
  checkFusedOperandCount(e, reduce, operands.size());
  at::Tensor v = evalAten(e, mainOperands(e, operands));
  if (!reduce) return {v};
  return reduceWithAten(e, operands, *reduce, std::move(v));
}

Outputs reduceWithAten(const Expr& e, at::TensorList operands, const ReduceSpec& reduce, at::Tensor value) {
  Outputs outs = applyReductionAll(reduce, value);
  value.reset();  // not held while the epilogue runs
  if (reduce.epilogue && reduce.withIndices()) {
    outs[1] = applyIndicesEpilogue(reduce, outs[0], outs[1], epilogueOperands(e, operands));
  } else if (reduce.epilogue) {
    outs[0] = applyEpilogue(reduce, outs[0], epilogueOperands(e, operands));
  }
  return outs;
}

std::vector<at::Tensor> narrowOperands(at::TensorList ts, int64_t rank, int64_t dim, int64_t start, int64_t len) {
  std::vector<at::Tensor> out(ts.begin(), ts.end());
  for (auto& t : out) {
    const int64_t d = dim - (rank - t.dim());
    if (d >= 0 && t.size(d) != 1) t = t.narrow(d, start, len);
  }
  return out;
}

namespace {
thread_local int tlsReuseDepth = 0;
thread_local at::Tensor tlsReused;  // the thread's kept buffer (ReusedOutput)
constexpr size_t kMaxReusedBytes = size_t(8) << 20;  // never keep more than this per thread
}  // namespace

ReusedOutput::ReusedOutput() { ++tlsReuseDepth; }
ReusedOutput::~ReusedOutput() { --tlsReuseDepth; }
bool ReusedOutput::active() { return tlsReuseDepth > 0; }

at::Tensor ReusedOutput::allocate(at::IntArrayRef sizes, at::IntArrayRef strides, const at::TensorOptions& options) {
  if (tlsReuseDepth == 0) return at::empty_strided(sizes, strides, options);
  const size_t bytes = at::detail::computeStorageNbytes(sizes, strides, options.dtype().itemsize());
  at::Tensor& kept = tlsReused;
  // Free: no tensor but this one holds its TensorImpl, and no TensorImpl but its own (a view, or
  // the previous piece's output) holds its storage.
  const bool free = kept.defined() && kept.use_count() == 1 && kept.storage().use_count() == 1;
  if (free && kept.device() == options.device() && kept.storage().nbytes() >= bytes)
    return at::empty({0}, options).set_(kept.storage(), 0, sizes, strides);
  at::Tensor out = at::empty_strided(sizes, strides, options);
  // A kept buffer still in use and no smaller stays: it is the piece's earlier value (a chain's
  // stage 0, which a later fused stage of the same piece reads), free again for the next piece.
  const bool keepOld = kept.defined() && !free && kept.storage().nbytes() >= bytes;
  if (bytes <= kMaxReusedBytes && !keepOld) kept = out;
  return out;
}

}  // namespace tsfuse
