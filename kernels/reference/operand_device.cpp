#include "kernels/reference/operand_device.h"

namespace tsfuse {

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

}  // namespace tsfuse
