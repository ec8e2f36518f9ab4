// A TileProgram's value on tiles whose leaves are set (TileProgram::Scratch), computed by the
// fastest of three ways that applies to the program and the way tiles read its leaves: one
// compiled kernel for the whole program (jit::CompiledMap), compiled runs between its vector
// routine calls and casts (jit::SegmentedProgram), or the interpreter. All three give the
// interpreter's bits on the same tiles, so a driver picks its tiles without asking which runs.
#pragma once

#include "kernels/backends/cpu/jit/jit.h"
#include "kernels/backends/cpu/jit/segments.h"
#include "kernels/backends/cpu/tile_program.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace tsfuse::cpu {

class TileEvaluator {
 public:
  // What the values are for: a map's output, or the values a reduction folds (a compiled tile of
  // those counts as a piece, path_counts.h: the fold is not in the kernel).
  enum class Use { Output, Folded };
  // The value of p's slot `value` (-1: its result) after code[0, prefix) (all of it by default),
  // for tiles that read leaf i as leaves[i] (Uniform: one element; Contiguous: n).
  TileEvaluator(const TileProgram& p, const std::vector<jit::Leaf>& leaves, Use use, int value = -1,
                size_t prefix = SIZE_MAX);
  TileEvaluator(const TileEvaluator&) = delete;
  TileEvaluator& operator=(const TileEvaluator&) = delete;

  // The whole value in one compiled kernel.
  bool compiled() const { return compiled_.has_value(); }
  // Some compiled code computes it (one kernel, or runs between routine calls).
  bool compiledCode() const { return compiled_ || segmented_; }

  // The n values, of the value slot's dtype, written to dst.
  void write(TileProgram::Scratch& s, int64_t n, char* dst) const;
  // Whether write() may be split into writeBeforeRoutine() per tile and finishRoutine() over the
  // consecutive values of many tiles (jit::SegmentedProgram::endsInRoutine): TileWriter.
  bool defersRoutine() const { return whole_ && segmented_ && segmented_->endsInRoutine(); }
  void writeBeforeRoutine(TileProgram::Scratch& s, int64_t n, char* dst) const;
  void finishRoutine(int64_t n, char* dst) const { segmented_->routineInPlace(n, dst); }
  // Whether some tiles call a vector routine (then a loop over tiles holds a VmlSerialScope).
  bool callsRoutines() const {
    return !compiled_ && std::any_of(p_.vml.begin(), p_.vml.end(), [](const VmlRoutine& r) { return bool(r); });
  }
  // The n values: in the value slot's buffer, or (interpreted) wherever the interpreter left them.
  const char* value(TileProgram::Scratch& s, int64_t n) const;

 private:
  const TileProgram& p_;
  std::unique_ptr<TileProgram> prefixProgram_;  // code[0, prefix) with the value as its result
  std::optional<jit::CompiledMap> compiled_;
  std::optional<jit::SegmentedProgram> segmented_;
  bool whole_;
  int value_;
  size_t prefix_;
};

// A map's tiles written to its output by one thread, in order. Where the evaluator defers its
// trailing routine (a distance's sqrt, a kernel's exp), tiles are written up to it and the
// routine runs in place over runs of up to kRoutineRun consecutive elements, still in cache: one
// library call per run instead of one per tile, the same values. Call flush() after the last tile.
class TileWriter {
 public:
  static constexpr int64_t kRoutineRun = 16 * kTile;
  TileWriter(const TileEvaluator& eval, char* out, int64_t elementSize);
  TileWriter(const TileWriter&) = delete;
  TileWriter& operator=(const TileWriter&) = delete;

  // The tile of n values at element `offset` of the output.
  void write(TileProgram::Scratch& s, int64_t n, int64_t offset);
  void flush();

 private:
  const TileEvaluator& eval_;
  char* out_;
  int64_t esz_;
  bool defer_;
  int64_t begin_ = 0, end_ = 0;  // the pending run [begin_, end_)
  std::optional<VmlSerialScope> serial_;
};

// Routine calls TileWriter made over runs of tiles so far: tests check that a map's trailing
// routine was deferred.
int64_t deferredRoutineRuns();

}  // namespace tsfuse::cpu
