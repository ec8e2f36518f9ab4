// A tile program that no one compiled kernel runs, as steps: the longest runs of its native
// instructions that compile, each its own renumbered TileProgram run as a jit::CompiledMap that
// stores its last value into its slot's scratch buffer; between them, the vector routines eager
// calls (vml.h: a Gaussian kernel's `mul($0, -2.0); exp(%0); mul(%1, $1)` is a compiled map,
// MKL's vsExp, a compiled map) and, one at a time through the interpreter, the instructions no
// kernel has (an ATen op without a routine, a cast between float32 and float64, integer ops).
// Same bits as the interpreter: the same instructions and routines on the same values (a value
// it keeps uniform is computed on every lane alike). Declined (nullopt) where the result is not
// the last instruction's, or there is neither a routine nor a run that compiles.
#pragma once

#include "kernels/backends/cpu/jit/jit.h"
#include "kernels/backends/cpu/tile_program.h"

#include <optional>
#include <string>
#include <vector>

namespace tsfuse::cpu::jit {

class SegmentedProgram {
 public:
  // leaves: how every tile reads each of p's leaves (Uniform or Contiguous). nullopt, with the
  // reason in *why, where the scope above ends.
  static std::optional<SegmentedProgram> make(const TileProgram& p, const std::vector<jit::Leaf>& leaves,
                                              std::string* why = nullptr);
  // n <= kTile values: p's leaves set in s (as TileProgram::run reads them), the result's n
  // values written to dst.
  void run(TileProgram::Scratch& s, int64_t n, char* dst) const;

  // Whether the last step is a routine without a number argument over the step before's value,
  // a compiled run: then run() may be split into runBeforeRoutine() on each tile and one
  // routineInPlace() over many tiles' consecutive values (one library call, not one per tile).
  bool endsInRoutine() const { return endsInRoutine_; }
  // run() but for the last step: the value it reads written to dst.
  void runBeforeRoutine(TileProgram::Scratch& s, int64_t n, char* dst) const;
  // The last step over the n values at dst, in place.
  void routineInPlace(int64_t n, char* dst) const;

 private:
  struct Step {
    enum Kind { Map, Routine, Interpreted } kind = Map;
    std::optional<jit::CompiledMap> map;  // Map: instructions up to `instr`
    size_t instr = 0;                     // Map: the run's last; else the step's instruction
    std::vector<int> reads;               // Map: p's slots the run reads, in its leaves' order
    int out = -1;                         // p's slot it writes
  };
  void runSteps(TileProgram::Scratch& s, size_t count, int64_t n, char* dst) const;

  const TileProgram* p_ = nullptr;
  std::vector<Step> steps_;
  bool endsInRoutine_ = false;
};

// Programs made so far (SegmentedProgram::make succeeded): tests check that a call's epilogue ran
// compiled, or was declined.
int64_t segmentedProgramsMade();

}  // namespace tsfuse::cpu::jit
