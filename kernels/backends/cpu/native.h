#pragma once

#include "kernels/backends/native_path.h"

#include <string>

namespace tsfuse::cpu {

// The native CPU path (a NativePath). Returns no outputs (and the reason in *why) when it does not
// apply; the caller then takes the chunked ATen path, which is exact for everything.
Outputs runNative(const Expr& e, at::TensorList operands, const ReduceSpec* reduce, const Analysis& an,
                  const IterationPlan& plan, std::string* why);

// A reduction whose value's last dim a reduce_chain's next stage then sums: that sum of every row
// into `sums` (its sizes: the value's without the last dim, any keepdim 1 included; contiguous
// float32), in eager's order, the value never stored (drivers.h, runReduceRowSums). False, with
// the reason in *why, where the compiled vertical path does not apply: the caller runs the chain
// as before.
bool runNativeRowSums(const Expr& e, at::TensorList operands, const ReduceSpec& reduce, const Analysis& an,
                      const IterationPlan& plan, at::Tensor& sums, std::string* why);

// Whether the native CPU path folds this call's reduction in eager's own order, bit for bit: a
// float sum over one dim of size > 1, innermost in eager's value, in the inner order inner_sum.h
// models or as whole rows (row_sum.h); a logsumexp of such rows in the steps of eager's kernel.
// The do-no-harm rule (fused_call.cpp) need not send it to ATen.
bool reducesInEagerOrder(const ReduceSpec& reduce, const Analysis& an);

// A fresh row-major output of `sizes`, allocated as the native path allocates its own (output.cpp:
// huge pages where the allocator would hand it fresh 4 KiB pages): a chain's normalized output,
// which ATen's ops write slab by slab.
at::Tensor allocDenseOutput(c10::IntArrayRef sizes, c10::ScalarType dtype);

}  // namespace tsfuse::cpu
