// The typed program: an expression lowered for one call, for one target. The single lowering
// (kernels/lower/lower.cpp) makes ATen's implicit casts explicit, turns literals into constant
// slots, applies each op's registry rule (kernels/ir/ops.def), then legalizes for the target:
// what the target's emitter has no primitive for runs through ATen on the tile (CPU) or makes
// the lowering decline (device), and the device follows ATen's CUDA kernels where they differ.
// Every emitter reads this: the CPU tile interpreter (kernels/backends/cpu/tile_program.h), the CPU code
// generator (kernels/backends/cpu/jit/jit.h) and the generated GPU kernel texts (kernels/backends/cuda/codegen/emit.h).
#pragma once

#include "kernels/reference/analysis.h"
#include "kernels/ir/prim.h"

#include <optional>
#include <string>
#include <vector>

namespace tsfuse::lower {

// Who runs the program: which ATen kernels' rules it reproduces and which primitives it has.
struct Target {
  PrimFlag emitter = kInterp;  // the primitives it implements (prims.def flags)
  bool cudaRules = false;      // ATen's CUDA kernel rules: opmath scalars, reciprocal division, clamp
  bool halfTypes = false;      // float16/bfloat16 values (computed in float)
  bool atenFallback = false;   // an op without a native form runs through ATen on the tile

  static Target cpuTiles() { return {kInterp, false, false, true}; }
  // The generated kernels on the device, or with the CPU kernels' rules (run against eager CPU on
  // PoCL: tests/gpu).
  static Target device() { return {kDevice, true, true, false}; }
  static Target deviceWithCpuRules() { return {kDevice, false, false, false}; }
};

struct Instr {
  Prim op;
  c10::ScalarType ct;  // compute dtype (Cast: the target dtype)
  int out = -1;
  int a = -1, b = -1, c = -1;
  // Prim::Aten: the original instruction with its tensor arguments renumbered $0..$k-1, which
  // refer to the slots in atenSlots (already cast to the compute dtype).
  tsfuse::Instr aten{Op::Add, {}};
  std::vector<int> atenSlots;
};

struct Program {
  // Slots [0, numLeaves) are the operands (in their own dtypes); then literals and results.
  std::vector<c10::ScalarType> slotType;
  int numLeaves = 0;
  struct Literal {
    int slot;
    c10::Scalar value;
  };
  std::vector<Literal> literals;
  // Device rules: leaf i is a 0-dim CPU tensor, which ATen's CUDA kernels read on the host.
  std::vector<char> hostLeaf;
  std::vector<Instr> code;
  int result = -1;

  // The literal's one element, converted to its slot's dtype as ATen converts a Python number.
  void literalValue(const Literal& lit, void* dst) const;
  // Appends a cast of the result to `dtype` (no-op when it already has it).
  void castResultTo(c10::ScalarType dtype);
  // Appends result * result, in the result's dtype (a 2-norm's terms).
  void squareResult();
  // True when the last instruction produces the result: no other instruction reads or writes
  // that slot, so it may be written straight into the destination.
  bool resultWrittenLast() const { return !code.empty() && code.back().out == result; }
};

// nullopt (with the reason in *why) when some dtype or op has no form on the target.
std::optional<Program> lowerExpr(const Expr& e, const Analysis& a, at::TensorList operands, const Target& target,
                                 std::string* why);

// How a Square-rule instruction (pow, square; `args` its arguments, `ct` its compute dtype) lowers:
// the number exponents ATen computes without pow (a fill, a copy, products, quotients; the CPU
// kernel has more of them than the CUDA one), else through ATen.
enum class PowForm : uint8_t { One, Base, Square, Cube, Reciprocal, ReciprocalSquare, Aten };
PowForm powForm(const std::vector<Arg>& args, bool cudaRules, c10::ScalarType ct);

// The dtypes a target holds values in.
bool holdsDtype(const Target& target, c10::ScalarType t);

}  // namespace tsfuse::lower
