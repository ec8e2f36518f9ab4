// Kernel texts generated from the typed program (kernels/lower/program.h): one self-contained
// plain-C kernel per (program, dtypes, kernel kind, ranks, index width), values in local
// variables, spliced into a fixed skeleton. The same text compiles as CUDA under NVRTC
// (cuda_ops.cpp) and as OpenCL C (PoCL and oclgrind run it in CI: tests/gpu). Each primitive's
// text comes from one table keyed by kernels/ir/prims.def (prim_text.cpp), so a primitive without
// a device form fails to build.
#pragma once

#include "kernels/ir/expr.h"
#include "kernels/lower/program.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tsfuse::cuda {

// The dtypes a generated kernel holds. float16/bfloat16 are 16-bit patterns in memory and float
// in locals (every op computes in float and rounds its result to the dtype, as ATen's kernels).
enum class Ty : uint8_t { Bool, U8, I8, I16, I32, I64, F32, F64, F16, BF16 };
std::optional<Ty> tyOf(c10::ScalarType t);
c10::ScalarType scalarTypeOf(Ty t);
const char* tyName(Ty t);     // in memory: "tsf_f32", "tsf_f16"
const char* localName(Ty t);  // in a local: float16/bfloat16 are "tsf_f32"
int tySize(Ty t);
bool isFloatTy(Ty t);
bool isHalfTy(Ty t);  // float16 or bfloat16
Ty mathTy(Ty t);      // what an op of dtype t computes in: float for float16/bfloat16

// The skeletons. The output is dense in the iteration plan's kept order (kernels/plan/iteration.h),
// so output element o is at out[o].
enum class Kind : uint8_t {
  Map,           // grid-stride over the kept space, any strides (broadcasts are stride 0)
  ReduceThread,  // a thread per output walks the reduced space in order (many outputs: vertical)
  ReduceBlock,   // a block per output: threads stride the reduced space, merge in local memory
  Pair2,         // a pairwise map [N, M]: a block owns kPairRows x blockSize outputs, its row and
                 // column operands staged in local memory once per tile
  Gemm,          // [N, M] reduced over one dim K (GEMM-like): a block owns kGemmTile^2 outputs,
                 // 2 x 2 per thread, K in steps of kGemmK with the (k, n) and (k, m) operands
                 // staged in local memory; each output folds k in order, as ReduceThread does
};
const char* kindName(Kind k);

// How a tiled skeleton (Pair2, Gemm) reads an operand over the two kept dims [N, M]: one value
// (per k), a row operand (depends on n), a column operand (depends on m), or every element.
enum class Access2 : uint8_t { Scalar, Row, Col, Full };
constexpr int kPairRows = 16, kGemmTile = 32, kGemmK = 16;

struct KernelSpec {
  Kind kind = Kind::Map;
  int keptRank = 1;       // coalesced kept dims (a map's whole space), >= 1
  int reducedRank = 0;    // coalesced reduced dims (reductions), >= 1 there
  bool index64 = false;   // 64-bit offsets; else every offset, count and grid-stride fits int32
  bool cudaRules = true;  // ATen's CUDA kernels' rules; false: its CPU kernels' (run vs eager CPU)
  // Reductions only: the kind and its parameters (kernels/reference/aten_eval.h ReduceSpec), the dtype of
  // the reduced value (sum/mean/prod/logsumexp/norm: the program's result is already cast to it).
  Reduction reduction = Reduction::Sum;
  c10::ScalarType reducedDtype = c10::ScalarType::Undefined;
  double normOrder = 2.0, correction = 1.0;
  int epilogueRank = 0;         // coalesced dims of the epilogue operands' space (the output's), >= 1 with one
  int blockSize = 256;          // ReduceBlock, Pair2: the launch's block size (a power of two); Gemm: 256
  std::vector<Access2> access;  // Pair2, Gemm: per operand of the program
};

// The kernel's parameters, in order; launchers bind them so: the outputs (values, then the
// int64 indices of max/min), the data operands, the host values, the literals (8 bytes each:
// literalArg), then the index parameters, of
// the kernel's index type (int32 or int64): numOut, keptSize[keptRank], each data operand's
// element strides over the kept dims; reductions add count, reducedSize[reducedRank] and the
// strides over the reduced dims; an epilogue adds its space's sizes[epilogueRank] and its data
// operands' strides over them.
struct Param {
  enum Kind : uint8_t { Out, Data, HostValue, Literal, Index } kind;
  int leaf = -1;  // Out: the output (0 values, 1 indices); Data / HostValue: the fused op's operand;
                  // Literal: the program's literal, then the epilogue's (after the program's)
  Ty type = Ty::I64;
};

// Registers per thread a kernel may use: enough blocks per SM for half its warps; more for a
// kernel holding double values, each a register pair (at 64, ptxas spilled 28 B of a pairwise
// kernel's double atan, and 4-8 B of float64 backward programs over five operands, for sm_90). The
// text declares it to ptxas (TSF_BOUNDS), and the NVRTC corpus test holds every kernel to it.
constexpr int kRegisterBudget = 64, kDoubleRegisterBudget = 80;

struct KernelSource {
  std::string name;  // tsf_<kind>_r<kept>[x<reduced>]_i<32|64>_<hash>: what a profiler shows
  std::string text;  // prelude + kernel
  std::vector<Param> params;
  uint64_t hash = 0;  // of the text (the cache key's first part)
  int registerBudget = kRegisterBudget;
};

// The kernel text of program `p` under `spec`, e.g.:
//   v1: sub($0, $1); abs(%0); lt(%1, 1)   float32 [N, 1] x [1, M], map, rank 2, 32-bit
//   =>  TSF_KERNEL tsf_map_r2_i32_<hash>(TSF_GLOBAL tsf_bool* out, TSF_GLOBAL const tsf_f32* in0, ...,
//                                         const tsf_u64 lit0 /* 1.0f's bits */, ...)
//       { for (i = ...) { c1 = i % k1; c0 = i / k1;
//           const tsf_f32 a0 = in0[c0 * s0_0 + c1 * s0_1]; const tsf_f32 a1 = ...;
//           const tsf_f32 v2 = a0 - a1; const tsf_f32 v3 = TSF_FABS_F32(v2);
//           const tsf_f32 v4 = TSF_F32_BITS(lit0); const tsf_bool v5 = (tsf_bool)(v3 < v4);
//           out[i] = v5; } }
// nullopt (the reason in *why) when a dtype, primitive or reduction has no device form.
// Reductions: the program's result is the value reduced; `epilogue` (its leaf 0 the reduced
// value, its leaves 1.. the epilogue operands, which follow the program's own among the fused
// op's operands) runs on each output before it is stored.
std::optional<KernelSource> emitKernel(const lower::Program& p, const KernelSpec& spec, std::string* why,
                                       const lower::Program* epilogue = nullptr);

// The macros every text starts with (prelude.cpp).
const char* prelude();

uint64_t fnv1a(const std::string& s);

// A literal's Param::Literal value: the bits of a float (float16/bfloat16: of the float holding
// it), the value of an integer or bool sign-extended to 64 bits, as the text reads it back.
uint64_t literalArg(const lower::Program& p, const lower::Program::Literal& lit);

}  // namespace tsfuse::cuda
