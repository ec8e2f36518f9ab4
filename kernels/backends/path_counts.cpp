#include "kernels/backends/path_counts.h"

#include "tsfuse/ops.h"

#include <atomic>

namespace tsfuse {
namespace {

constexpr int kSlots = 64;
constexpr int kKinds = static_cast<int>(PathCount::kNum);
struct alignas(64) Slot {
  std::atomic<int64_t> n[kKinds] = {};
};
Slot slots[kSlots];
std::atomic<int> nextSlot{0};

}  // namespace

void countPath(PathCount c) {
  thread_local const int slot = nextSlot.fetch_add(1, std::memory_order_relaxed) % kSlots;
  std::atomic<int64_t>& n = slots[slot].n[static_cast<int>(c)];
  n.store(n.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

int64_t pathCount(PathCount c) {
  int64_t n = 0;
  for (const Slot& s : slots) n += s.n[static_cast<int>(c)].load(std::memory_order_relaxed);
  return n;
}

PathCounts pathCounts() {
  return {pathCount(PathCount::CompiledTiles),    pathCount(PathCount::CompiledPieces),
          pathCount(PathCount::InterpretedTiles), pathCount(PathCount::InterpretedSteps),
          pathCount(PathCount::AtenTileOps),      pathCount(PathCount::ChunkedCalls),
          pathCount(PathCount::SmallCalls)};
}

}  // namespace tsfuse
