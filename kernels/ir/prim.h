// The typed primitives of a lowered program (kernels/ir/prims.def), as a plain enum: no ATen, so
// device code (nvcc) includes it too.
#pragma once

#include <cstdint>

namespace tsfuse {

enum class Prim : uint8_t {
#define TSFUSE_PRIM(Id, arity, flags) Id,
#include "kernels/ir/prims.def"
};

enum PrimFlag : uint8_t {
  kInterp = 1,       // the CPU tile interpreter (kernels/backends/cpu/tile_ops.inc)
  kJit = 2,          // the CPU code generator (kernels/backends/cpu/jit/codegen.cpp)
  kDevice = 4,       // the generated CUDA / OpenCL kernel texts (kernels/backends/cuda/codegen/prim_text.cpp)
  kFloatOnly = 8,    // defined for floating compute dtypes only
  kBoolResult = 16,  // returns bool whatever its compute dtype
};

constexpr uint8_t primFlags(Prim p) {
  constexpr uint8_t kFlags[] = {
#define TSFUSE_PRIM(Id, arity, flags) static_cast<uint8_t>(flags),
#include "kernels/ir/prims.def"
  };
  return kFlags[static_cast<int>(p)];
}

constexpr int primArity(Prim p) {
  constexpr int8_t kArity[] = {
#define TSFUSE_PRIM(Id, arity, flags) arity,
#include "kernels/ir/prims.def"
  };
  return kArity[static_cast<int>(p)];
}

constexpr bool primHas(Prim p, PrimFlag f) { return (primFlags(p) & f) != 0; }

const char* primName(Prim p);

}  // namespace tsfuse
