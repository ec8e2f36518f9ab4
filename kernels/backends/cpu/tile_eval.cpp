#include "kernels/backends/cpu/tile_eval.h"

#include "kernels/backends/path_counts.h"
#include "tsfuse/log.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>

namespace tsfuse::cpu {
namespace {

std::atomic<int64_t> gDeferredRuns{0};

}  // namespace

TileEvaluator::TileEvaluator(const TileProgram& p, const std::vector<jit::Leaf>& leaves, Use use, int value,
                             size_t prefix)
    : p_(p),
      whole_(use == Use::Output),
      value_(value < 0 ? p.result : value),
      prefix_(std::min(prefix, p.code.size())) {
  const TileProgram* prog = &p;
  if (prefix_ < p.code.size() || value_ != p.result) {
    prefixProgram_ = std::make_unique<TileProgram>(p);
    prefixProgram_->code.resize(prefix_);
    prefixProgram_->vml.resize(prefix_);
    prefixProgram_->result = value_;
    prog = prefixProgram_.get();
  }
  if (!prog->resultWrittenLast()) return;  // a leaf, or a value the prefix computes before its end
  const c10::ScalarType t = prog->slotType[value_];
  std::string whole, pieces;
  compiled_ = jit::CompiledMap::make(*prog, t, leaves, &whole);
  if (compiled_) return;
  segmented_ = jit::SegmentedProgram::make(*prog, leaves, &pieces);
  if (!segmented_)
    TSFUSE_LOG(kernel, debug, whole_ ? "map" : "reduction value", " interpreted: ", whole, "; in pieces: ", pieces);
}

void TileEvaluator::write(TileProgram::Scratch& s, int64_t n, char* dst) const {
  if (compiled_ || segmented_) countPath(compiled_ && whole_ ? PathCount::CompiledTiles : PathCount::CompiledPieces);
  if (compiled_) return compiled_->run(s.slot.data(), n, dst);
  if (segmented_) return segmented_->run(s, n, dst);
  if (value_ == p_.result && prefix_ == p_.code.size() && p_.resultWrittenLast()) {
    // The interpreter writes the result straight into dst.
    s.slot[value_] = dst;
    p_.run(s, n);
    s.slot[value_] = s.buffer[value_];
    return;
  }
  std::memcpy(dst, value(s, n), n * c10::elementSize(p_.slotType[value_]));
}

void TileEvaluator::writeBeforeRoutine(TileProgram::Scratch& s, int64_t n, char* dst) const {
  countPath(PathCount::CompiledPieces);
  segmented_->runBeforeRoutine(s, n, dst);
}

TileWriter::TileWriter(const TileEvaluator& eval, char* out, int64_t elementSize)
    : eval_(eval), out_(out), esz_(elementSize), defer_(eval.defersRoutine()) {
  if (eval.callsRoutines()) serial_.emplace();
}

void TileWriter::write(TileProgram::Scratch& s, int64_t n, int64_t offset) {
  if (!defer_) return eval_.write(s, n, out_ + offset * esz_);
  if (offset != end_ || end_ - begin_ + n > kRoutineRun) {
    flush();
    begin_ = end_ = offset;
  }
  eval_.writeBeforeRoutine(s, n, out_ + offset * esz_);
  end_ += n;
}

void TileWriter::flush() {
  if (end_ > begin_) {
    eval_.finishRoutine(end_ - begin_, out_ + begin_ * esz_);
    gDeferredRuns.fetch_add(1, std::memory_order_relaxed);
  }
  begin_ = end_;
}

int64_t deferredRoutineRuns() { return gDeferredRuns.load(); }

const char* TileEvaluator::value(TileProgram::Scratch& s, int64_t n) const {
  if (compiled_ || segmented_) {
    char* dst = s.buffer[value_];
    write(s, n, dst);
    return dst;
  }
  if (value_ == p_.result && prefix_ == p_.code.size()) return p_.run(s, n);
  p_.runPrefix(s, n, prefix_);
  return p_.vectorOf(s, value_, n);
}

}  // namespace tsfuse::cpu
