// Internal to the compiled tile programs (kernels/backends/cpu/jit/jit.h): the analysed program and the generator.
#pragma once

#include "kernels/backends/cpu/jit/jit.h"

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace Xbyak {
class CodeGenerator;
}

namespace tsfuse::cpu::jit {

// Operand slots of an instruction (-1 where absent).
inline std::array<int, 3> operandsOf(const lower::Instr& li) { return {li.a, li.b, li.c}; }

// A program prefix that a compiled kernel can run, with what code generation needs to know.
struct Plan {
  bool f64 = false;  // the program's floating dtype: float64 (else float32)
  Sink sink = Sink::Store;
  bool boolValue = false;  // the sunk value is a bool (sums: a count; Store: bytes)
  int64_t innerRows = 0;   // SumInner: the rows of each lane (InnerSumOrder::vectors)
  size_t prefix = 0;
  int source = -1;
  std::vector<lower::Instr> code;     // code[0, prefix)
  std::vector<c10::ScalarType> type;  // per slot
  std::vector<Leaf> leaves;           // per operand (Unused where no instruction reads it)
  // Per operand: the dtype a uniform leaf is stored in where the kernel converts it to the
  // program's floating dtype as it broadcasts it (its cast folded: foldUniformCasts), else
  // Undefined.
  std::vector<c10::ScalarType> convertedFrom;
  std::vector<std::optional<uint64_t>> literal;  // per slot: a used literal's bits (bools: 0 or ~0)
  std::vector<char> uniform;                     // per slot: one value for every lane of a row
  std::vector<char> perRow;                      // per slot: changes from one output row to the next
  std::vector<int> lastUse;                      // per slot: the last instruction reading it (-1: none)
  bool needAbs = false, needSign = false, needNaN = false, needOnes = false, needOne = false, needZero = false;
  std::string key;  // identifies the generated code

  bool sums() const { return sink != Sink::Store; }
  // Whether operand i is one a map may hold in a register for the whole call (Shape::holdUniforms):
  // uniform, and converted as it is broadcast.
  bool holdable(size_t i) const {
    return !sums() && leaves[i] == Leaf::Uniform && convertedFrom[i] != c10::ScalarType::Undefined;
  }
  static std::optional<Plan> make(const TileProgram& p, size_t prefix, int source, Sink sink,
                                  const std::vector<Leaf>& layout, const std::vector<char>& perRowLeaves,
                                  std::string* why, int64_t innerRows = 0);
};

// How a kernel is laid out: `vectors` vectors of lanes per row (masked: one vector, loads under
// Args::mask); literals in registers for the whole call, or broadcast from memory where used.
struct Shape {
  int vectors = 1;
  bool masked = false;
  bool literalsInMemory = false;
  int rows = 1;               // output rows (sums)
  bool wide = false;          // 64-byte vectors (AVX-512: zmm0-31, k1 for masked loads): see widens()
  bool holdUniforms = false;  // maps: converted uniform operands in registers for the whole call
};

// Whether a plan's kernels may use 64-byte vectors on this CPU: eager's inner sums and the first
// extrema with their index, of programs of arithmetic, min/max and clamps (no bools), where the
// AVX-512 F and DQ instructions give the same bits as the AVX2 ones (compares and masked moves in
// place of blends: the same lanes taken) (TSFUSE_CPU_AVX512=0 turns it off).
bool widens(const Plan& plan);

// The kernel, executable; nullptr when the program needs more registers than there are.
std::unique_ptr<Xbyak::CodeGenerator> generate(const Plan& plan, const Shape& shape);

}  // namespace tsfuse::cpu::jit
