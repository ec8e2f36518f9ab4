// NVRTC, loaded lazily, and the cache of the generated kernels' compiled code. Needs no GPU and
// no CUDA headers: the compile test (tests/gpu) runs it in CI, the CUDA runtime path
// (kernels/backends/cuda/cuda_ops.cpp) at a call's first use. Modelled on ATen's jiterator
// (aten/src/ATen/native/cuda/jit_utils.cpp): dlopen at first use, compile for the device's arch,
// cache in memory and on disk under a key of everything that decides the bits.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace tsfuse::cuda {

struct NvrtcOutput {
  bool ok = false;
  std::string log;  // the program log: errors, and ptxas' report with --ptxas-options=-v
  std::string ptx;
  std::vector<char> cubin;  // empty when compiled for a virtual arch (compute_XX)
};

class Nvrtc {
 public:
  // The process-wide library: $TSFUSE_NVRTC, else libnvrtc.so.13 on the loader's path, else
  // /usr/local/cuda/lib64. nullptr (the reason in *why) when none loads.
  static const Nvrtc* get(std::string* why = nullptr);

  int major = 0, minor = 0;  // NVRTC's version
  // Architectures NVRTC compiles for (nvrtcGetSupportedArchs), e.g. 75 ... 120.
  std::vector<int> archs;

  NvrtcOutput compile(const std::string& text, const std::string& name, const std::vector<std::string>& options) const;

  struct Api;
  std::shared_ptr<const Api> api;
};

// The options every generated kernel is compiled with: sm_<arch> (compute_<arch>, PTX only, when
// `ptxOnly`), -fmad=false (eager rounds every op: no contraction), no fast math (precise division
// and square root, denormals kept: NVRTC's defaults), and ptxas' report when `verbose`.
std::vector<std::string> kernelOptions(int arch, bool ptxOnly, bool verbose);

// ptxas' report on one entry function (--ptxas-options=-v).
struct PtxasReport {
  bool found = false;
  int registers = -1, stackBytes = -1, spillStores = -1, spillLoads = -1, sharedBytes = 0;
};
PtxasReport parsePtxas(const std::string& log, const std::string& kernelName);

// Compiled kernels keyed by the text's hash, the options, NVRTC's version and the arch. In
// memory always; on disk under $TSFUSE_KERNEL_CACHE_PATH (default ~/.cache/tsfuse/kernels;
// TSFUSE_KERNEL_CACHE=0 keeps it in memory only), written to a temp file and renamed, so
// concurrent processes never read half a file. The entry stores the text too, and a hit whose
// text differs (a hash collision) is recompiled.
class KernelCache {
 public:
  explicit KernelCache(std::string dir);  // "" = memory only
  static KernelCache& global();

  struct Entry {
    std::vector<char> code;  // CUBIN, or PTX text for an arch newer than NVRTC knows
    bool isPtx = false;
    std::string log;
  };
  // The compiled kernel, from memory, disk or NVRTC; nullptr (the reason in *why) on failure.
  std::shared_ptr<const Entry> get(const Nvrtc& nvrtc, const std::string& text, const std::string& name, int arch,
                                   std::string* why);

  int memoryHits = 0, diskHits = 0, compiles = 0;  // for tests and logs

 private:
  std::string dir_;
  std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<const Entry>> mem_;
};

}  // namespace tsfuse::cuda
