#include "kernels/backends/reused_output.h"

#include <utility>

namespace tsfuse {

namespace {
thread_local int tlsReuseDepth = 0;
thread_local at::Tensor tlsReused;                   // the thread's kept buffer (ReusedOutput)
thread_local at::Tensor tlsInto;                     // OutputInto's waiting target
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

OutputInto::OutputInto(at::Tensor target) : previous_(std::exchange(tlsInto, std::move(target))) {}
OutputInto::~OutputInto() { tlsInto = std::move(previous_); }

at::Tensor OutputInto::take(at::IntArrayRef sizes, at::IntArrayRef strides, c10::ScalarType dtype) {
  if (!tlsInto.defined() || tlsInto.sizes() != sizes || tlsInto.strides() != strides || tlsInto.scalar_type() != dtype)
    return at::Tensor();
  return std::exchange(tlsInto, at::Tensor());
}

}  // namespace tsfuse
