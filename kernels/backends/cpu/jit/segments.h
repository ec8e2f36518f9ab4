// A tile program whose only ATen ops are MKL routines (vml.h), run as compiled runs of its native
// instructions between the routine calls (a Gaussian kernel's epilogue `mul($0, -2.0); exp(%0);
// mul(%1, $1)`: a compiled map, MKL's vsExp, a compiled map), where the interpreter would store and
// reload every instruction's tile. Each run is its own renumbered TileProgram compiled as a
// jit::CompiledMap, writing its last value into its slot's scratch buffer. Same bits as the
// interpreter: the same instructions and routines on the same values (a value it keeps uniform is
// computed on every lane alike). Declined (nullopt) where an op runs through ATen otherwise, a
// routine would read a uniform leaf, the result is not the last instruction's, or a run does not
// compile.
#pragma once

#include "kernels/backends/cpu/jit/jit.h"
#include "kernels/backends/cpu/tile_program.h"

#include <optional>
#include <vector>

namespace tsfuse::cpu::jit {

class SegmentedProgram {
 public:
  // leaves: how every tile reads each of p's leaves (Uniform or Contiguous).
  static std::optional<SegmentedProgram> make(const TileProgram& p, const std::vector<jit::Leaf>& leaves);
  // n <= kTile values: p's leaves set in s (as TileProgram::run reads them), the result's n
  // values written to dst.
  void run(TileProgram::Scratch& s, int64_t n, char* dst) const;

 private:
  struct Step {
    std::optional<jit::CompiledMap> map;  // a native run, else p's routine at instruction `instr`
    size_t instr = 0;
    std::vector<int> reads;  // p's slots the run reads, in its leaves' order
    int out = -1;            // p's slot it writes
  };
  const TileProgram* p_ = nullptr;
  std::vector<Step> steps_;
};

// Programs made so far (SegmentedProgram::make succeeded): tests check that a call's epilogue ran
// compiled, or was declined.
int64_t segmentedProgramsMade();

}  // namespace tsfuse::cpu::jit
