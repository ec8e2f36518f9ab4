// Launch parameters of the CUDA kernels (kernels/cuda/kernels.cu), shared with the host glue
// (kernels/cuda/cuda_ops.cpp). Plain structs: the .cu file includes no ATen headers, which keeps
// nvcc's compile time small. Every struct is passed by value as a __grid_constant__ kernel
// parameter (< 4 KiB), so the launch allocates nothing.
#pragma once

#include "kernels/bytecode.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tsfuse::cuda {

// The dims a kernel parameter's Space holds: the plan's coalesced spaces (of rank up to kMaxDims,
// kernels/plan/iteration.h) fit when they have at most this many; more declines to the chunked
// path. Bounded by the 4 KiB a kernel parameter may take (ReduceParams holds two Spaces).
constexpr int kMaxKernelDims = 6;

// One iteration space: dims outermost first; per operand and for the output, element strides
// (0 where broadcast). Operands that are host scalars (Program::constLeaves) have no data.
struct Space {
  int nd = 0;
  int64_t size[kMaxKernelDims] = {};
  int64_t stride[bc::kMaxLeaves + 1][kMaxKernelDims] = {};  // [operand][dim]; the output is kMaxLeaves
};

struct MapParams {
  bc::Program prog;
  const char* data[bc::kMaxLeaves] = {};
  char* out = nullptr;
  bc::DT outType = bc::DT::F32;
  int64_t numel = 0;
  Space space;
};

// 2-D pairwise map [N, M] (output dense row-major in that order): each operand is a scalar, a row
// operand (depends on n only), a column operand (m only) or a full one.
enum class Kind2 : uint8_t { Scalar, Row, Col, Full };
struct Pair2Params {
  bc::Program prog;
  const char* data[bc::kMaxLeaves] = {};
  int64_t sn[bc::kMaxLeaves] = {}, sm[bc::kMaxLeaves] = {};  // element strides along n and m
  Kind2 kind[bc::kMaxLeaves] = {};
  char* out = nullptr;
  bc::DT outType = bc::DT::F32;
  int64_t N = 0, M = 0;
};

// Reductions: the accumulator runs in a wide domain (int64 for integers and bool, double for
// floating values), with index order kept for argmax/argmin (first extremum; NaN is extremal).
enum class RKind : uint8_t { Sum, Mean, Prod, Max, Min, Any, All, ArgMax, ArgMin };
struct RedSpec {
  RKind kind = RKind::Sum;
  bool floating = false;   // the value's dtype is floating (wide domain double, else int64)
  bc::DT outType = bc::DT::F32;
  int64_t count = 0;       // reduced elements per output
};

// Generic reduction: kept dims (`kept`, output strides in slot kMaxLeaves) x reduced dims
// (`red`, in the original dim order so argmax indices are row-major over them).
struct ReduceParams {
  bc::Program prog;
  RedSpec red;
  const char* data[bc::kMaxLeaves] = {};
  char* out = nullptr;
  int64_t numOut = 0;
  Space kept, reduced;
};

// Broadcast-then-reduce over one shared dim K of a [K, N, M] space into an [N, M] output
// (output dense row-major): operands depend on (k, n), (k, m), (k) or nothing.
struct Gemm3Params {
  bc::Program prog;
  RedSpec red;
  const char* data[bc::kMaxLeaves] = {};
  int64_t sk[bc::kMaxLeaves] = {}, sn[bc::kMaxLeaves] = {}, sm[bc::kMaxLeaves] = {};
  Kind2 kind[bc::kMaxLeaves] = {};  // Row: (k, n) / Col: (k, m) / Scalar: (k) or nothing
  char* out = nullptr;
  int64_t K = 0, N = 0, M = 0;
};

// Reduction of a 2-D space [numOut, count] along its second dim: out[o] = reduce_r value(o, r).
// `warpPerOutput`: one warp streams over r for each output (few outputs, long rows); else one
// thread per output walks r in order (many outputs; neighbouring threads read neighbouring o).
struct Reduce2Params {
  bc::Program prog;
  RedSpec red;
  const char* data[bc::kMaxLeaves] = {};
  int64_t so[bc::kMaxLeaves] = {}, sr[bc::kMaxLeaves] = {};  // element strides along o and r
  char* out = nullptr;
  int64_t outStride = 1;
  int64_t numOut = 0;
  bool warpPerOutput = true;
};

static_assert(sizeof(MapParams) < 4096 && sizeof(Pair2Params) < 4096 && sizeof(ReduceParams) < 4096 &&
                  sizeof(Gemm3Params) < 4096 && sizeof(Reduce2Params) < 4096,
              "kernel parameters are limited to 4 KiB");

// Launchers (kernels.cu). Each enqueues on `stream` and returns the launch error code (no sync).
cudaError_t launchMap(const MapParams& p, cudaStream_t stream, int smCount);
cudaError_t launchPair2(const Pair2Params& p, cudaStream_t stream);
cudaError_t launchReduce(const ReduceParams& p, cudaStream_t stream, int smCount);
cudaError_t launchGemm3(const Gemm3Params& p, cudaStream_t stream);
cudaError_t launchReduce2(const Reduce2Params& p, cudaStream_t stream);

}  // namespace tsfuse::cuda
