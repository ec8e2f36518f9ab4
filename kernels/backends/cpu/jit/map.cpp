// Compiled maps (jit.h, CompiledMap): a tile's whole blocks in one kernel call, its tail as one
// more block over padded copies.
#include "kernels/backends/cpu/jit/jit.h"

#include "kernels/backends/cpu/jit/gen.h"

#include <cstring>
#include <memory>
#include <vector>

namespace tsfuse::cpu::jit {
namespace {

bool fail(std::string* why, const char* reason) {
  if (why) *why = reason;
  return false;
}

}  // namespace

std::optional<CompiledMap> CompiledMap::make(const TileProgram& p, c10::ScalarType out, const std::vector<Leaf>& leaves,
                                             std::string* why) {
  if (!enabled()) return fail(why, "compiled kernels are off"), std::nullopt;
  if (p.slotType[p.result] != out) return fail(why, "the result is not of the output's dtype"), std::nullopt;
  CompiledMap m;
  m.kernel_ = Kernel::get(p, p.code.size(), p.result, Sink::Store, leaves, {}, why);
  if (!m.kernel_) return std::nullopt;
  m.leaves_ = leaves;
  for (int i = 0; i < p.numLeaves; ++i) m.elemSize_.push_back(c10::elementSize(p.slotType[i]));
  return m;
}

namespace {

// A thread's scratch for CompiledMap::run: one Args, zeroed once (zeroing a fresh one per call
// costs as much as a short tile's kernel; every call sets the fields a Store kernel reads for its
// leaves, the rest stay zero), and a block's worth of each operand and of the output for the lanes
// after the whole blocks. On the heap: the library's own thread-local storage stays a few bytes.
struct MapScratch {
  Args args;
  std::vector<int64_t> tail;  // 8-byte aligned: per operand, then the output, one block each
};

}  // namespace

void CompiledMap::run(char* const* leaf, int64_t n, char* dst) const {
  const Kernel& k = *kernel_;
  const size_t L = leaves_.size();
  const int64_t outBytes = k.outBytesPerLane(), B = k.lanesPerBlock();
  thread_local const std::unique_ptr<MapScratch> scratch = std::make_unique<MapScratch>();
  Args& a = scratch->args;
  // Whole blocks in one call: each contiguous operand steps one block per row.
  const int64_t blocks = n / B;
  for (size_t i = 0; i < L; ++i) {
    a.leaf[i] = leaf[i];
    a.rowStride[i] = leaves_[i] == Leaf::Contiguous ? B * elemSize_[i] : 0;
  }
  a.rows = blocks;
  a.out = dst;
  if (blocks > 0) k.block(a);
  const int64_t rest = n - blocks * B;
  if (rest > 0) {
    // The lanes after the whole blocks as one more block, its operands copied into a zeroed block
    // of their own (a vector call per 8 or 16 lanes would cost many calls a short row): the same
    // instructions on each lane, so the same values; the padding lanes' are not kept.
    const int64_t slot = B * 8 / static_cast<int64_t>(sizeof(int64_t));
    std::vector<int64_t>& tail = scratch->tail;
    if (tail.size() < (L + 1) * slot) tail.assign((L + 1) * slot, 0);
    char* base = reinterpret_cast<char*>(tail.data());
    for (size_t i = 0; i < L; ++i)
      if (leaves_[i] == Leaf::Contiguous) {
        char* copy = base + i * slot * 8;
        std::memcpy(copy, leaf[i] + blocks * B * elemSize_[i], rest * elemSize_[i]);
        a.leaf[i] = copy;
      }
    a.rows = 1;
    a.out = base + L * slot * 8;
    k.block(a);
    std::memcpy(dst + blocks * B * outBytes, a.out, rest * outBytes);
  }
}

}  // namespace tsfuse::cpu::jit
