// CUDA kernels of tsfuse::pairwise / tsfuse::reduce. Every kernel evaluates the call's bytecode
// Program (kernels/bytecode.h, the evaluator the CPU tests instantiate on the host) per element in
// registers; what differs is how operands reach the registers and how results leave:
//
//   mapKernel      generic map: grid-stride over the output in memory order, 32- or 64-bit index,
//                  any strides/broadcasts (<= kMaxKernelDims coalesced dims).
//   pair2Kernel    (a) 2-D pairwise map [N, M]: a block stages the row operands of its 16 rows and
//                  the column operands of its 128 columns in shared memory once, then writes 16
//                  coalesced output rows; each output element is written exactly once.
//   gemm3Kernel    (b) broadcast-then-reduce over a shared leading dim K into [N, M] (the seed
//                  similarity): GEMM-style 64x64 output tiles, 4x4 per thread, operand tiles of
//                  16 k-steps in shared memory reused by the whole output tile.
//   reduce2Kernel  (c) reduction along one pairwise dim: a warp per output streaming over the
//                  reduced dim (few outputs), or a thread per output walking it in order.
//   reduceKernel   generic reduction: a block per output (long reductions) or a thread per output.
//
// Build: -fmad=false (no contraction; eager rounds every op), no fast math, so float32 results of
// the elementwise ops are the ones ATen's CUDA kernels produce. No allocation, no host sync: the
// launchers only enqueue on the given stream.
#include "kernels/cuda/params.h"
#include "kernels/reduction_rules.h"

namespace tsfuse::cuda {
namespace {

using bc::DT;
using bc::Reg;

// ---------------------------------------------------------------- accumulators (wide domain)
// One struct for every kind (the kernels pick the kind at run time); the rules of each step are
// kernels/reduction_rules.h, shared with the CPU accumulators.

namespace rules = reduce_rules;

struct Acc {
  int64_t i;
  double d;
  int64_t idx;
};

__device__ __forceinline__ void accInit(const RedSpec& s, Acc& a) {
  a.idx = -1;
  a.i = 0;
  a.d = 0.0;
  switch (s.kind) {
    case RKind::Prod: a.i = 1; a.d = 1.0; break;
    case RKind::Max: a.i = rules::lowestOf<int64_t>(); a.d = rules::lowestOf<double>(); break;
    case RKind::Min: a.i = rules::highestOf<int64_t>(); a.d = rules::highestOf<double>(); break;
    case RKind::All: a.i = 1; break;
    default: break;
  }
}

// Folds one value (its wide form: xi for integers, xd for floating values) at `index`; arg
// partials may come in any index order (their indices break ties).
__device__ __forceinline__ void accAddWide(const RedSpec& s, Acc& a, int64_t xi, double xd, int64_t index) {
  const bool f = s.floating;
  switch (s.kind) {
    case RKind::Sum: case RKind::Mean:
      if (f) a.d = rules::sumStep(a.d, xd);
      else a.i = rules::sumStep(a.i, xi);
      break;
    case RKind::Prod:
      if (f) a.d = rules::prodStep(a.d, xd);
      else a.i = rules::prodStep(a.i, xi);
      break;
    case RKind::Max: case RKind::Min: {
      const bool mx = s.kind == RKind::Max;
      if (f) { if (rules::extremumTakes(xd, a.d, mx)) a.d = xd; }
      else if (rules::extremumTakes(xi, a.i, mx)) a.i = xi;
      break;
    }
    case RKind::Any: a.i = a.i || (f ? rules::truthOf(xd) : rules::truthOf(xi)); break;
    case RKind::All: a.i = a.i && (f ? rules::truthOf(xd) : rules::truthOf(xi)); break;
    case RKind::ArgMax: case RKind::ArgMin: {
      const bool mx = s.kind == RKind::ArgMax;
      if (f ? rules::beats(xd, index, a.d, a.idx, mx) : rules::beats(xi, index, a.i, a.idx, mx)) {
        a.d = xd;
        a.i = xi;
        a.idx = index;
      }
      break;
    }
  }
}

__device__ __forceinline__ void accAdd(const RedSpec& s, Acc& a, const Reg& v, DT t, int64_t index) {
  if (s.floating) accAddWide(s, a, 0, bc::loadAs<double>(v, t), index);
  else accAddWide(s, a, bc::loadAs<int64_t>(v, t), 0.0, index);
}

// Merges a partial accumulator (any index order: arg ties compare indices).
__device__ __forceinline__ void accMerge(const RedSpec& s, Acc& a, const Acc& o) {
  switch (s.kind) {
    case RKind::Sum: case RKind::Mean: case RKind::Prod: case RKind::Max: case RKind::Min:
      accAddWide(s, a, o.i, o.d, 0);
      break;
    case RKind::Any: a.i = a.i || o.i; break;
    case RKind::All: a.i = a.i && o.i; break;
    case RKind::ArgMax: case RKind::ArgMin:
      if (o.idx >= 0) accAddWide(s, a, o.i, o.d, o.idx);
      break;
  }
}

__device__ __forceinline__ void accStore(const RedSpec& s, const Acc& a, char* out) {
  Reg r;
  r.i64 = 0;
  switch (s.kind) {
    case RKind::Any: case RKind::All: r.b = a.i != 0; bc::storeElem(out, DT::Bool, r); return;
    case RKind::ArgMax: case RKind::ArgMin: r.i64 = a.idx; bc::storeElem(out, DT::I64, r); return;
    default: break;
  }
  const double d = s.kind == RKind::Mean ? rules::meanOf(a.d, s.count) : a.d;
  bc::withType(s.outType, [&](auto tag) {
    using T = decltype(tag);
    bc::set<T>(r, s.floating ? ew::cast<T>(d) : ew::cast<T>(a.i));
  });
  bc::storeElem(out, s.outType, r);
}

__device__ __forceinline__ Acc shflDown(const Acc& a, int delta) {
  Acc o;
  o.i = __shfl_down_sync(0xffffffffu, a.i, delta);
  o.d = __shfl_down_sync(0xffffffffu, a.d, delta);
  o.idx = __shfl_down_sync(0xffffffffu, a.idx, delta);
  return o;
}

// ---------------------------------------------------------------- helpers

__device__ __forceinline__ Reg loadAt(const char* base, DT t, int64_t elemOffset) {
  return bc::loadElem(base + elemOffset * bc::elemSize(t), t);
}

__device__ __forceinline__ bool isConst(const bc::Program& p, int l) { return (p.constLeaves >> l) & 1u; }

// ---------------------------------------------------------------- generic map

template <typename Index>
__global__ void mapKernel(const __grid_constant__ MapParams P) {
  const bc::Program& p = P.prog;
  const Space& S = P.space;
  Reg r[bc::kMaxRegs];
  for (Index i = Index(blockIdx.x) * blockDim.x + threadIdx.x; i < Index(P.numel);
       i += Index(gridDim.x) * blockDim.x) {
    Index off[bc::kMaxLeaves + 1] = {};
    Index rem = i;
    for (int d = S.nd - 1; d >= 0; --d) {
      const Index c = rem % Index(S.size[d]);
      rem /= Index(S.size[d]);
      for (int l = 0; l < p.nLeaves; ++l) off[l] += c * Index(S.stride[l][d]);
      off[bc::kMaxLeaves] += c * Index(S.stride[bc::kMaxLeaves][d]);
    }
    bc::preload(p, r);
    for (int l = 0; l < p.nLeaves; ++l)
      if (!isConst(p, l)) r[l] = loadAt(P.data[l], p.type[l], off[l]);
    bc::run(p, r);
    bc::storeElem(P.out + int64_t(off[bc::kMaxLeaves]) * bc::elemSize(P.outType), P.outType, r[p.result]);
  }
}

// ---------------------------------------------------------------- (a) 2-D pairwise map

constexpr int kP2Cols = 128, kP2Rows = 16;

__global__ void __launch_bounds__(kP2Cols) pair2Kernel(const __grid_constant__ Pair2Params P) {
  const bc::Program& p = P.prog;
  __shared__ Reg colv[bc::kMaxLeaves][kP2Cols];
  __shared__ Reg rowv[bc::kMaxLeaves][kP2Rows];
  const int t = threadIdx.x;
  const int64_t m = int64_t(blockIdx.x) * kP2Cols + t;
  Reg r[bc::kMaxRegs];
  for (int64_t n0 = int64_t(blockIdx.y) * kP2Rows; n0 < P.N; n0 += int64_t(gridDim.y) * kP2Rows) {
    __syncthreads();  // the previous row tile is done with the shared operands
    for (int l = 0; l < p.nLeaves; ++l) {
      if (isConst(p, l)) continue;
      if (P.kind[l] == Kind2::Col && m < P.M) colv[l][t] = loadAt(P.data[l], p.type[l], m * P.sm[l]);
      if (P.kind[l] == Kind2::Row && t < kP2Rows && n0 + t < P.N)
        rowv[l][t] = loadAt(P.data[l], p.type[l], (n0 + t) * P.sn[l]);
    }
    __syncthreads();
    if (m >= P.M) continue;
    const int rows = int(P.N - n0 < kP2Rows ? P.N - n0 : kP2Rows);
    for (int k = 0; k < rows; ++k) {
      const int64_t n = n0 + k;
      bc::preload(p, r);
      for (int l = 0; l < p.nLeaves; ++l) {
        if (isConst(p, l)) continue;
        switch (P.kind[l]) {
          case Kind2::Row: r[l] = rowv[l][k]; break;
          case Kind2::Col: r[l] = colv[l][t]; break;
          case Kind2::Full: r[l] = loadAt(P.data[l], p.type[l], n * P.sn[l] + m * P.sm[l]); break;
          case Kind2::Scalar: r[l] = loadAt(P.data[l], p.type[l], 0); break;
        }
      }
      bc::run(p, r);
      bc::storeElem(P.out + (n * P.M + m) * bc::elemSize(P.outType), P.outType, r[p.result]);
    }
  }
}

// ---------------------------------------------------------------- (b) GEMM-tiled reduce over K

constexpr int kGT = 16;    // threads per side
constexpr int kGW = 4;     // outputs per thread per side
constexpr int kGTile = kGT * kGW;  // 64
constexpr int kGK = 16;    // k-steps staged per round
constexpr int kGMaxSide = 2;  // row / column operands staged in shared memory

__global__ void __launch_bounds__(kGT * kGT) gemm3Kernel(const __grid_constant__ Gemm3Params P) {
  const bc::Program& p = P.prog;
  __shared__ Reg rowT[kGMaxSide][kGK][kGTile];
  __shared__ Reg colT[kGMaxSide][kGK][kGTile];
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * kGT + tx;
  const int64_t n0 = int64_t(blockIdx.y) * kGTile, m0 = int64_t(blockIdx.x) * kGTile;
  int slot[bc::kMaxLeaves];
  int nr = 0, nc = 0;
  for (int l = 0; l < p.nLeaves; ++l) slot[l] = P.kind[l] == Kind2::Row ? nr++ : P.kind[l] == Kind2::Col ? nc++ : 0;

  Acc acc[kGW][kGW];
  for (int i = 0; i < kGW; ++i)
    for (int j = 0; j < kGW; ++j) accInit(P.red, acc[i][j]);
  Reg r[bc::kMaxRegs];

  for (int64_t k0 = 0; k0 < P.K; k0 += kGK) {
    const int kn = int(P.K - k0 < kGK ? P.K - k0 : kGK);
    __syncthreads();
    for (int e = tid; e < kGK * kGTile; e += kGT * kGT) {
      const int kk = e / kGTile, x = e % kGTile;
      if (kk >= kn) continue;
      for (int l = 0; l < p.nLeaves; ++l) {
        if (isConst(p, l)) continue;
        if (P.kind[l] == Kind2::Row && n0 + x < P.N)
          rowT[slot[l]][kk][x] = loadAt(P.data[l], p.type[l], (k0 + kk) * P.sk[l] + (n0 + x) * P.sn[l]);
        if (P.kind[l] == Kind2::Col && m0 + x < P.M)
          colT[slot[l]][kk][x] = loadAt(P.data[l], p.type[l], (k0 + kk) * P.sk[l] + (m0 + x) * P.sm[l]);
      }
    }
    __syncthreads();
    for (int kk = 0; kk < kn; ++kk) {
      for (int i = 0; i < kGW; ++i) {
        const int x = ty + kGT * i;
        if (n0 + x >= P.N) break;
        for (int j = 0; j < kGW; ++j) {
          const int y = tx + kGT * j;
          if (m0 + y >= P.M) break;
          bc::preload(p, r);
          for (int l = 0; l < p.nLeaves; ++l) {
            if (isConst(p, l)) continue;
            if (P.kind[l] == Kind2::Row) r[l] = rowT[slot[l]][kk][x];
            else if (P.kind[l] == Kind2::Col) r[l] = colT[slot[l]][kk][y];
            else r[l] = loadAt(P.data[l], p.type[l], (k0 + kk) * P.sk[l]);
          }
          bc::run(p, r);
          accAdd(P.red, acc[i][j], r[p.result], p.type[p.result], k0 + kk);
        }
      }
    }
  }
  for (int i = 0; i < kGW; ++i) {
    const int64_t n = n0 + ty + kGT * i;
    if (n >= P.N) break;
    for (int j = 0; j < kGW; ++j) {
      const int64_t m = m0 + tx + kGT * j;
      if (m >= P.M) break;
      accStore(P.red, acc[i][j], P.out + (n * P.M + m) * bc::elemSize(P.red.outType));
    }
  }
}

// ---------------------------------------------------------------- (c) reduce along one dim

__device__ __forceinline__ void loadOR(const Reduce2Params& P, Reg* r, int64_t o, int64_t i) {
  const bc::Program& p = P.prog;
  bc::preload(p, r);
  for (int l = 0; l < p.nLeaves; ++l)
    if (!isConst(p, l)) r[l] = loadAt(P.data[l], p.type[l], o * P.so[l] + i * P.sr[l]);
}

__global__ void __launch_bounds__(256) reduce2WarpKernel(const __grid_constant__ Reduce2Params P) {
  const bc::Program& p = P.prog;
  const int lane = threadIdx.x & 31;
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  Reg r[bc::kMaxRegs];
  for (int64_t o = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32; o < P.numOut; o += warps) {
    Acc a;
    accInit(P.red, a);
    for (int64_t i = lane; i < P.red.count; i += 32) {
      loadOR(P, r, o, i);
      bc::run(p, r);
      accAdd(P.red, a, r[p.result], p.type[p.result], i);
    }
    for (int delta = 16; delta > 0; delta >>= 1) {
      Acc other = shflDown(a, delta);
      accMerge(P.red, a, other);
    }
    if (lane == 0) accStore(P.red, a, P.out + o * P.outStride * bc::elemSize(P.red.outType));
  }
}

__global__ void __launch_bounds__(256) reduce2ThreadKernel(const __grid_constant__ Reduce2Params P) {
  const bc::Program& p = P.prog;
  Reg r[bc::kMaxRegs];
  for (int64_t o = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; o < P.numOut;
       o += int64_t(gridDim.x) * blockDim.x) {
    Acc a;
    accInit(P.red, a);
    for (int64_t i = 0; i < P.red.count; ++i) {
      loadOR(P, r, o, i);
      bc::run(p, r);
      accAdd(P.red, a, r[p.result], p.type[p.result], i);
    }
    accStore(P.red, a, P.out + o * P.outStride * bc::elemSize(P.red.outType));
  }
}

// ---------------------------------------------------------------- generic reduce

__device__ __forceinline__ void offsetsOf(const Space& S, int nLeaves, int64_t lin, int64_t* off) {
  for (int d = S.nd - 1; d >= 0; --d) {
    const int64_t c = lin % S.size[d];
    lin /= S.size[d];
    for (int l = 0; l < nLeaves; ++l) off[l] += c * S.stride[l][d];
    off[bc::kMaxLeaves] += c * S.stride[bc::kMaxLeaves][d];
  }
}

__device__ __forceinline__ void reduceRange(const ReduceParams& P, const int64_t* base, int64_t first,
                                            int64_t step, Acc& a, Reg* r) {
  const bc::Program& p = P.prog;
  for (int64_t i = first; i < P.red.count; i += step) {
    int64_t off[bc::kMaxLeaves + 1];
    for (int l = 0; l <= bc::kMaxLeaves; ++l) off[l] = base[l];
    offsetsOf(P.reduced, p.nLeaves, i, off);
    bc::preload(p, r);
    for (int l = 0; l < p.nLeaves; ++l)
      if (!isConst(p, l)) r[l] = loadAt(P.data[l], p.type[l], off[l]);
    bc::run(p, r);
    accAdd(P.red, a, r[p.result], p.type[p.result], i);
  }
}

constexpr int kRBlock = 256;

__global__ void __launch_bounds__(kRBlock) reduceBlockKernel(const __grid_constant__ ReduceParams P) {
  __shared__ Acc part[kRBlock];
  Reg r[bc::kMaxRegs];
  for (int64_t o = blockIdx.x; o < P.numOut; o += gridDim.x) {
    int64_t base[bc::kMaxLeaves + 1] = {};
    offsetsOf(P.kept, P.prog.nLeaves, o, base);
    Acc a;
    accInit(P.red, a);
    reduceRange(P, base, threadIdx.x, kRBlock, a, r);
    part[threadIdx.x] = a;
    __syncthreads();
    for (int s = kRBlock / 2; s > 0; s >>= 1) {
      if (threadIdx.x < s) accMerge(P.red, part[threadIdx.x], part[threadIdx.x + s]);
      __syncthreads();
    }
    if (threadIdx.x == 0) accStore(P.red, part[0], P.out + base[bc::kMaxLeaves] * bc::elemSize(P.red.outType));
    __syncthreads();
  }
}

__global__ void __launch_bounds__(kRBlock) reduceThreadKernel(const __grid_constant__ ReduceParams P) {
  Reg r[bc::kMaxRegs];
  for (int64_t o = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; o < P.numOut;
       o += int64_t(gridDim.x) * blockDim.x) {
    int64_t base[bc::kMaxLeaves + 1] = {};
    offsetsOf(P.kept, P.prog.nLeaves, o, base);
    Acc a;
    accInit(P.red, a);
    reduceRange(P, base, 0, 1, a, r);
    accStore(P.red, a, P.out + base[bc::kMaxLeaves] * bc::elemSize(P.red.outType));
  }
}

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
unsigned gridFor(int64_t work, int threads, int smCount) {
  const int64_t blocks = ceilDiv(work, threads), cap = int64_t(smCount) * 16;
  return unsigned(blocks < cap ? (blocks > 0 ? blocks : 1) : cap);
}

}  // namespace

cudaError_t launchMap(const MapParams& p, cudaStream_t stream, int smCount) {
  // 32-bit indexing when every offset and the element count fit.
  bool small = p.numel < (int64_t(1) << 31);
  for (int l = 0; l <= bc::kMaxLeaves && small; ++l) {
    int64_t span = 0;
    for (int d = 0; d < p.space.nd; ++d) span += (p.space.size[d] - 1) * p.space.stride[l][d];
    small = span < (int64_t(1) << 31);
  }
  const unsigned grid = gridFor(p.numel, 256, smCount);
  if (small) mapKernel<int32_t><<<grid, 256, 0, stream>>>(p);
  else mapKernel<int64_t><<<grid, 256, 0, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t launchPair2(const Pair2Params& p, cudaStream_t stream) {
  const int64_t gy = ceilDiv(p.N, kP2Rows);
  dim3 grid(unsigned(ceilDiv(p.M, kP2Cols)), unsigned(gy < 65535 ? gy : 65535));
  pair2Kernel<<<grid, kP2Cols, 0, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t launchGemm3(const Gemm3Params& p, cudaStream_t stream) {
  dim3 grid(unsigned(ceilDiv(p.M, kGTile)), unsigned(ceilDiv(p.N, kGTile)));
  gemm3Kernel<<<grid, dim3(kGT, kGT), 0, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t launchReduce2(const Reduce2Params& p, cudaStream_t stream) {
  if (p.warpPerOutput) {
    reduce2WarpKernel<<<unsigned(ceilDiv(p.numOut, 8)), 256, 0, stream>>>(p);
  } else {
    reduce2ThreadKernel<<<unsigned(ceilDiv(p.numOut, 256)), 256, 0, stream>>>(p);
  }
  return cudaGetLastError();
}

cudaError_t launchReduce(const ReduceParams& p, cudaStream_t stream, int smCount) {
  if (p.red.count >= kRBlock) {
    const int64_t cap = int64_t(smCount) * 8;
    reduceBlockKernel<<<unsigned(p.numOut < cap ? p.numOut : cap), kRBlock, 0, stream>>>(p);
  } else {
    reduceThreadKernel<<<gridFor(p.numOut, kRBlock, smCount), kRBlock, 0, stream>>>(p);
  }
  return cudaGetLastError();
}

}  // namespace tsfuse::cuda
