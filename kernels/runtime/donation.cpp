#include "kernels/runtime/donation.h"

#include "tsfuse/log.h"

#include <c10/core/CPUAllocator.h>

#include <string>

namespace tsfuse {

thread_local const HandedOnOperands* HandedOnOperands::tls_ = nullptr;

namespace {

// The tensors that own t's storage when nothing but t can reach it: t, and the base of a view
// (e.g. torch.cdist's result) that only t's view record still holds.
long storageOwners(const at::Tensor& t) { return t.is_view() && t._base().use_count() == 1 ? 2 : 1; }

// Memory that ATen's allocator for the tensor's device (the CPU's, CUDA's caching allocator) gave,
// and frees when its storage dies: no one outside the reference counts can hold it (unlike
// from_blob's, e.g. an application's image buffer).
bool allocatedByAten(const at::Tensor& t) {
  const c10::Allocator* allocator = c10::GetAllocator(t.device().type());
  const c10::DeleterFnPtr atens = allocator ? allocator->raw_deleter() : nullptr;
  return atens != nullptr && t.storage().data_ptr().get_deleter() == atens;
}

}  // namespace

at::Tensor takeDonated(at::TensorList operands, at::IntArrayRef donated, const Analysis& an) {
  for (int64_t i : donated) {
    const at::Tensor& t = operands.at(i);
    // Every path reads an operand element before it writes the output element at the same place:
    // CPU tiles load before they store, a CUDA kernel's thread loads what it stores from (an
    // operand laid out as the output is read where it is written, by the same thread), and the
    // chunked path computes a slab before copying it. Other devices' paths are not known.
    std::string why;
    if (!(t.is_cpu() || t.is_cuda()) || t.layout() != at::kStrided || t.is_conj() || t.is_neg() || t.requires_grad() ||
        t.unsafeGetTensorImpl()->is_wrapped_number()) {
      why = "not a plain CPU or CUDA tensor";  // a wrapped number would make the output one too
    } else if (t.scalar_type() != an.outDtype || t.sizes() != at::IntArrayRef(an.outSizes) ||
               t.strides() != at::IntArrayRef(an.outStrides) || !t.is_non_overlapping_and_dense()) {
      why = "not laid out as the output";
    } else if (t.use_count() > kCallReferences + HandedOnOperands::handles(t) || !t.has_storage() ||
               static_cast<long>(t.storage().use_count()) != storageOwners(t)) {
      why = c10::str("held elsewhere (", t.use_count(), " handles, its storage by ",
                     t.has_storage() ? t.storage().use_count() : 0, " tensors)");
    } else if (!allocatedByAten(t)) {
      why = "its memory is not ATen's own (from_blob)";
    } else {
      return t;
    }
    TSFUSE_LOG(kernel, debug, "donated operand ", i, " not taken: ", why);
  }
  return at::Tensor();
}

}  // namespace tsfuse
