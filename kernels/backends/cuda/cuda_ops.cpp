// CUDA kernels of the fused ops: the host side. A call's kernel is generated as text from the
// typed lowering (codegen/call.h picks the skeleton from the iteration plan), compiled by NVRTC at
// first use and cached in memory and on disk (codegen/nvrtc.h), loaded once per process as a
// context-independent library and launched on the current stream. Nothing is allocated but the
// output and nothing synchronises the host. Anything without a generated kernel, or a machine
// without NVRTC, declines to the exact chunked ATen path; so does TSFUSE_CUDA_KERNELS=0.
#include "kernels/backends/cuda/cuda_ops.h"

#include "kernels/backends/cuda/codegen/call.h"
#include "kernels/backends/cuda/codegen/nvrtc.h"
#include "kernels/reference/operand_device.h"
#include "tsfuse/log.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

namespace tsfuse::cuda {
namespace {

bool enabled() {
  const char* v = std::getenv("TSFUSE_CUDA_KERNELS");
  return !v || std::strcmp(v, "0") != 0;
}

std::string cudaError(const char* what, cudaError_t err) { return std::string(what) + ": " + cudaGetErrorString(err); }

// The loaded kernel of a cache entry. Entries live as long as the process-wide cache, and a
// library is loaded once per entry (the map keeps the entry alive with its handle).
cudaKernel_t loadedKernel(const std::shared_ptr<const KernelCache::Entry>& entry, const std::string& name,
                          std::string* why) {
  static std::mutex mu;
  static std::map<const KernelCache::Entry*, std::pair<std::shared_ptr<const KernelCache::Entry>, cudaKernel_t>> loaded;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = loaded.find(entry.get()); it != loaded.end()) return it->second.second;
  cudaLibrary_t lib = nullptr;
  cudaKernel_t kernel = nullptr;
  cudaError_t err = cudaLibraryLoadData(&lib, entry->code.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
  if (err == cudaSuccess) err = cudaLibraryGetKernel(&kernel, lib, name.c_str());
  if (err != cudaSuccess) {
    if (why) *why = cudaError(entry->isPtx ? "loading PTX" : "loading CUBIN", err);
    return nullptr;
  }
  loaded.emplace(entry.get(), std::make_pair(entry, kernel));
  return kernel;
}

// Binds k's parameters in its order (emit.h) and enqueues it. False (the reason in *why) when
// NVRTC, the compile or the load fails; the caller then takes the chunked path.
bool launch(const CallKernel& k, at::TensorList operands, const Outputs& outs, c10::Device device, std::string* why) {
  if (k.numOut == 0) return true;
  const Nvrtc* nvrtc = Nvrtc::get(why);
  if (!nvrtc) return false;
  const cudaDeviceProp* prop = at::cuda::getDeviceProperties(device.index());
  const int arch = prop->major * 10 + prop->minor;
  auto entry = KernelCache::global().get(*nvrtc, k.source.text, k.source.name, arch, why);
  if (!entry) return false;
  cudaKernel_t kernel = loadedKernel(entry, k.source.name, why);
  if (!kernel) return false;

  // One 8-byte slot per parameter, the device pointers added to the value arguments;
  // cudaLaunchKernel reads each parameter's size from the kernel.
  std::vector<HostArg> slots = valueArgs(k, operands);
  std::vector<void*> args(slots.size());
  for (size_t i = 0; i < slots.size(); ++i) {
    const Param& p = k.source.params[i];
    const void* ptr = p.kind == Param::Out    ? outs.at(p.leaf).data_ptr()
                      : p.kind == Param::Data ? operands[p.leaf].const_data_ptr()
                                              : nullptr;
    if (ptr) std::memcpy(slots[i].bytes, &ptr, sizeof ptr);
    args[i] = slots[i].bytes;
  }
  // Enough blocks to fill every SM several times over; the grid-stride loops do the rest.
  const LaunchShape shape = launchShape(k, int64_t(prop->multiProcessorCount) * 16);
  const auto stream = at::cuda::getCurrentCUDAStream(device.index()).stream();
  const cudaError_t err =
      cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(static_cast<unsigned>(shape.blocks)),
                       dim3(static_cast<unsigned>(shape.threads)), args.data(), 0, stream);
  TORCH_CHECK(err == cudaSuccess, "tsfuse CUDA launch of ", k.source.name, ": ", cudaGetErrorString(err));
  TSFUSE_LOG(kernel, debug, "cuda: ", k.source.name, " on ", shape.blocks, " blocks x ", shape.threads, " threads");
  return true;
}

}  // namespace

Outputs runCuda(const Expr& e, at::TensorList operands, const ReduceSpec* reduce, const Analysis& an,
                const IterationPlan& plan, std::string* why) {
  auto no = [&](const std::string& reason) -> Outputs {
    if (why) *why = reason;
    return {};
  };
  if (!enabled()) return no("TSFUSE_CUDA_KERNELS=0");
  // Every operand (the epilogue's too) on the device, or a 0-dim CPU tensor read on the host.
  const std::optional<c10::Device> common = commonDevice(operands);
  if (!common) return no("operands on different devices");
  const c10::Device device = *common;
  if (!device.is_cuda()) return no("main device is not CUDA");
  auto k = kernelForCall(e, operands, reduce, an, plan, CallOptions{}, why);
  if (!k) return {};
  c10::cuda::CUDAGuard guard(device);
  Outputs outs{an.allocOut(device)};
  if (reduce && reduce->withIndices()) outs.push_back(an.allocIndices(device));
  if (!launch(*k, operands, outs, device, why)) return {};
  return outs;
}

}  // namespace tsfuse::cuda
