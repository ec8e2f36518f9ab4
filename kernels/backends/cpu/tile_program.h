// The CPU tile interpreter: runs a typed program (kernels/lower/program.h, Target::cpuTiles) over
// fixed-size tiles. Every value lives in a slot of kTile elements of one dtype: the gathered
// operands, then the literals (converted once), then each instruction's result. Ops without a
// bit-exact native form (the registry's Aten rules, primitives the interpreter lacks) run through
// ATen on the tile, the kernel eager uses. Scratch is slots x kTile elements per thread: O(tile).
#pragma once

#include "kernels/backends/cpu/vml.h"
#include "kernels/lower/program.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tsfuse::cpu {

constexpr int64_t kTile = 512;

// Elements of work below which a parallel loop stays on the calling thread (ATen's
// at::internal::GRAIN_SIZE, the rule eager's kernels follow): waking a worker costs more than such
// work, and a whole scheduler tick on a busy machine.
constexpr int64_t kTaskElements = 32768;
// at::parallel_for's grain over items of `perItem` elements each.
inline int64_t grainFor(int64_t perItem) { return std::max<int64_t>(1, kTaskElements / std::max<int64_t>(1, perItem)); }

// The typed program (kernels/lower/program.h) lowered for CPU tiles, and its interpreter.
struct TileProgram : lower::Program {
  // nullopt (with the reason in *why) when some dtype has no native form.
  static std::optional<TileProgram> lower(const Expr& e, const Analysis& a, at::TensorList operands, std::string* why);

  // Per instruction: the vector routine eager's ATen kernel calls for it (MKL's or SLEEF's:
  // kernels/backends/cpu/vml.h), which the interpreter calls on the tile instead of the ATen op;
  // empty for every other instruction. A routine of two operands (pow by a tensor exponent) takes
  // the second as its number argument, and applies only where that is one value on the tile.
  std::vector<VmlRoutine> vml;
  // Instruction k's routine, or null (none, or an instruction appended after lowering).
  const VmlRoutine* routineOf(size_t k) const;
  // The slot a routine of instruction k reads its number argument from, or -1.
  int routineArgOf(size_t k) const;

  // What a slot holds for the current tile.
  enum class Fill : uint8_t {
    Vector,   // n elements
    Uniform,  // one element, the same for all n lanes (slot[i][0])
    Both,     // one value, also expanded to kTile elements (literals)
  };
  // Scratch for one thread: one kTile-sized buffer per slot, literals filled in.
  struct Scratch {
    // 8-byte aligned, and left uninitialized: a tile reads only what it wrote there (a tiny call
    // would otherwise zero every slot's kTile elements, more than its whole work).
    std::unique_ptr<int64_t[]> storage;
    std::vector<char*> slot;
    // Each slot's own buffer. A caller may point slot[i] elsewhere for one tile (a leaf read in
    // place from the operand, the result written in place into the output); it gathers into
    // buffer[i], never into slot[i].
    std::vector<char*> buffer;
    std::vector<Fill> fill;
    // Leaf i for the next tile: n elements at p (gathered into buffer[i], or read in place).
    void vectorLeaf(int i, const char* p) {
      slot[i] = const_cast<char*>(p);
      fill[i] = Fill::Vector;
    }
    // Leaf i for the next tile: the one element at p, broadcast along the tile (read in place,
    // never expanded unless an instruction needs n copies).
    void uniformLeaf(int i, const char* p) {
      slot[i] = const_cast<char*>(p);
      fill[i] = Fill::Uniform;
    }
  };
  Scratch makeScratch() const;
  // Evaluates n <= kTile elements; leaf slots must already be set for the tile (vectorLeaf /
  // uniformLeaf). Native ops whose operands are all uniform run once and stay uniform; the
  // result slot always ends up holding n elements. Returns the result slot's data.
  const char* run(Scratch& s, int64_t n) const;
  // Evaluates the first `count` instructions only; every slot keeps the fill it ends with (a
  // uniform value is not expanded). For consumers that read a value before the program's end (a
  // sum folding the final widening cast into its accumulation).
  void runPrefix(Scratch& s, int64_t n, size_t count) const;
  // Evaluates instruction k alone, its operands' slots set and filled as runPrefix leaves them.
  void runInstr(Scratch& s, int64_t n, size_t k) const;
  // The one value of a float32/float64 slot that holds one (Uniform or Both), as a double.
  double uniformValue(const Scratch& s, int slot) const;
  // Slot i's n elements after runPrefix (a uniform value is expanded into the slot's buffer).
  const char* vectorOf(Scratch& s, int i, int64_t n) const;
};

// Whether the op loops run their AVX2 copy (the CPU has it and TSFUSE_CPU_ISA is not "baseline").
bool usingAvx2();

// dst[i] += W(src[i]) for i < n, src of dtype srcType (native): the per-lane accumulation of
// sum/mean in their wide type (int64 or double), with the op loops' instruction set.
void accumulateSum(c10::ScalarType srcType, const char* src, int64_t* dst, int64_t n);
void accumulateSum(c10::ScalarType srcType, const char* src, double* dst, int64_t n);
// counts[i] += flags[i] for n bools: 32 lanes an instruction with AVX2. Exact while no count
// passes 255: callers flush into int64 (accumulateSum from Byte) at least every 255 adds.
void countFlags(const char* flags, uint8_t* counts, int64_t n);
// One row of n var/std lanes whose count reaches nf with it: WelfordAcc::add (accumulators.h) on
// each lane, with the op loops' instruction set (IEEE divisions and products: the same bits).
void welfordAdd(const float* v, double* mean, double* m2, double nf, int64_t n);
void welfordAdd(const double* v, double* mean, double* m2, double nf, int64_t n);

}  // namespace tsfuse::cpu
