// The device a fused call runs on, from its operands, as eager decides it.
#pragma once

#include <ATen/ATen.h>

#include <optional>

namespace tsfuse {

// The device of the operands, ignoring 0-dim CPU tensors (which eager lets mix with any device);
// nullopt when the operands mix devices otherwise.
std::optional<c10::Device> commonDevice(at::TensorList operands);
c10::Device mainDevice(at::TensorList operands);

}  // namespace tsfuse
