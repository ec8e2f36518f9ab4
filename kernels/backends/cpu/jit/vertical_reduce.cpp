// VerticalReduce: a reduction along the rows of a compiled kernel's lanes; its operands packed per
// panel, its tiles driven through the kernel (the kernels themselves: jit.cpp, jit/codegen.cpp).
#include "kernels/backends/cpu/jit/jit.h"

#include "kernels/backends/cpu/gather.h"
#include "kernels/backends/cpu/jit/gen.h"
#include "tsfuse/log.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace tsfuse::cpu::jit {

std::optional<VerticalReduce> VerticalReduce::make(const TileProgram& p, size_t prefix, int source, Sink sink,
                                                   const IterationPlan& plan, const InnerSumOrder* order) {
  const auto& views = plan.views;
  const SubSpace &kept = plan.kept, &reduced = plan.reduced;
  if (!enabled() || kept.size.empty()) return std::nullopt;
  VerticalReduce v;
  v.views_ = &views;
  v.inner_ = kept.size.back();
  v.packed_ = ScratchSet(views.size());
  v.packedOnce_.assign(views.size(), 0);
  if (isExtremum(sink) && reduced.numel() > std::numeric_limits<int32_t>::max()) {
    TSFUSE_LOG(kernel, debug, "vertical reduction interpreted, not compiled: more rows than int32 indices count");
    return std::nullopt;
  }
  if (reduced.numel() == 0) {  // (a sum over an empty dim: the interpreter writes each output's start)
    TSFUSE_LOG(kernel, debug, "vertical reduction interpreted, not compiled: an empty reduced space");
    return std::nullopt;
  }
  // Operands packed per line: strided along the lanes, the same for every row of a line (stride 0
  // along the rows' dim) but not for every line. Each line is then a pass of its own: packed, then
  // its tiles run on every thread where a line holds enough work to pay for that, else lines run
  // in parallel, each thread packing its own (a batch of small point clouds), or one after another
  // where the call runs on one thread anyway (a slab of a chain or sweep, inside a parallel region).
  constexpr int64_t kMinLineWork = int64_t(1) << 16;  // values a line's tiles fold
  const size_t kd = kept.size.size();
  v.packedPerLine_.assign(views.size(), 0);
  if (kd >= 3) {
    v.linesInParallel_ = !at::in_parallel_region() && kept.size[kd - 2] * v.inner_ * reduced.numel() < kMinLineWork;
    v.lines_ = kept.outer().outer();
    for (size_t i = 0; i < views.size(); ++i)
      v.packedPerLine_[i] = plan.keptAccess[i] == Access::Gathered && kept.stride[i][kd - 2] == 0;
  }
  // The panel: every lane, or the most lanes (whole tiles) of which each packed operand's copy fits
  // (none: the operands stay strided, and a kernel that reads one is declined).
  auto packable = [&](size_t i) { return plan.keptAccess[i] == Access::Packed || v.packedPerLine_[i]; };
  int64_t fit = v.inner_;
  for (size_t i = 0; i < views.size(); ++i)
    if (packable(i))
      fit = std::min(fit, kMaxPackBytes / ((reduced.constantFor(i) ? 1 : reduced.numel()) * views[i].elemSize));
  const bool pack = fit >= std::min(v.inner_, kTile);
  v.panel_ = !pack ? v.inner_ : fit < v.inner_ ? fit / kTile * kTile : v.inner_;
  for (size_t i = 0; i < views.size(); ++i) {
    const Access access = plan.keptAccess[i];
    Leaf kind = access == Access::Uniform   ? Leaf::Uniform
                : access == Access::InPlace ? Leaf::Contiguous
                                            : Leaf::Strided;
    // Reduced rows (in the reduced space's row-major order) by lanes, contiguous; one row where the
    // operand is the same for every reduced row (an anchor's coordinate against every box).
    const bool once = reduced.constantFor(i);
    if (packable(i) && pack) {
      const int64_t packedRows = once ? 1 : reduced.numel();
      // (bools: a masked tail loads a whole vector's bytes, kBoolSlack past the last row's lanes)
      v.packed_.allocate(
          i, packedRows * packedRowBytes(v.panel_ * views[i].elemSize) + (views[i].elemSize == 1 ? kBoolSlack : 0));
      kind = Leaf::Contiguous;
      v.packedOnce_[i] = once;
      v.perLine_ = v.perLine_ || v.packedPerLine_[i];
    }
    v.leaves_.push_back(kind);
  }
  v.reduced_ = reduced;
  for (size_t i = 0; i < views.size(); ++i) v.laneStride_.push_back(kept.stride[i].back());
  // Output rows along the kept dim next to the lanes' dim: operands that move along it change per
  // row; the others are read once for a tile's rows.
  std::vector<char> perRow(views.size(), 0);
  v.outerStride_.assign(views.size(), 0);
  if (kd >= 2) {
    v.line_ = kept.size[kd - 2];
    for (size_t i = 0; i < views.size(); ++i) {
      v.outerStride_[i] = kept.stride[i][kd - 2];
      perRow[i] = v.outerStride_[i] != 0;
    }
  }
  v.outer_ = reduced;
  v.rowStride_.assign(views.size(), 0);
  if (!reduced.size.empty()) {
    v.rows_ = reduced.size.back();
    v.outer_.size.pop_back();
    for (size_t i = 0; i < views.size(); ++i) {
      v.rowStride_[i] = v.packed_[i].empty() ? reduced.stride[i].back()
                        : v.packedOnce_[i]   ? 0
                                             : packedRowBytes(v.panel_ * views[i].elemSize);
      v.outer_.stride[i].pop_back();
    }
  }
  if (pack) v.pack(0, 0);  // (after rowStride_, which packedAt reads)
  std::string why;
  if (order) {
    // Eager's inner order: the kernels walk one reduced dim of `rows_` values (the values after
    // the vectors through a SumFloat kernel, one output row a call: no per-row operands).
    if (sink != Sink::SumInner || v.outer_.numel() != 1 || v.rows_ != order->vectors * order->lanes + order->rest) {
      TSFUSE_LOG(kernel, debug, "vertical reduction interpreted, not compiled: a sum in eager's inner order ",
                 sink == Sink::SumInner ? "over another reduced layout" : "into another sink");
      return std::nullopt;
    }
    v.order_ = *order;
    const Sink after = p.slotType[source] == c10::ScalarType::Double ? Sink::SumDouble : Sink::SumFloat;
    if (order->rest > 0 && !(v.after_ = Kernel::get(p, prefix, source, after, v.leaves_, {}, &why))) {
      TSFUSE_LOG(kernel, debug, "vertical reduction interpreted, not compiled: ", why);
      return std::nullopt;
    }
  }
  v.kernel_ = Kernel::get(p, prefix, source, sink, v.leaves_, perRow, &why, order ? order->vectors : 0);
  if (!v.kernel_) {
    TSFUSE_LOG(kernel, debug, "vertical reduction interpreted, not compiled: ", why);
    return std::nullopt;
  }
  v.fresh_ = sink != Sink::SumInt64 && p.slotType[source] != c10::ScalarType::Bool && v.outer_.numel() == 1 &&
             v.rows_ <= v.kernel_->maxRows();  // (always so in eager's inner order)
  v.sink_ = sink;
  v.f64_ = p.slotType[source] == c10::ScalarType::Double;
  return v;
}

void VerticalReduce::clear(void* sums, int64_t n) const {
  char* p = static_cast<char*>(sums);
  if (!isExtremum(sink_)) {
    std::memset(p, 0, n * laneBytes());
    return;
  }
  std::fill_n(reinterpret_cast<float*>(p), n, extremumStart(sink_));
  std::memset(p + kExtremumIndexBytes, 0, n * sizeof(int32_t));
}

void VerticalReduce::pack(int64_t line, int64_t p0) {
  TORCH_INTERNAL_ASSERT(p0 % std::max<int64_t>(panel_, 1) == 0 && p0 < inner_ && (line == 0 || perLine_),
                        "tsfuse: a packed panel off its grid");
  panelStart_ = p0;
  const int64_t lanes = std::min(panel_, inner_ - p0);
  // Blocks of lanes, every row of a block before the next: a block's source lines (x[i, :] of 64
  // coordinates is four lines a lane) stay in L1 across its rows, where row after row over the
  // whole panel would read each line once per row from L2. Blocks are packed in parallel only where
  // there are many: at::parallel_for costs more than a small pack, even where it runs inline.
  constexpr int64_t kBlockLanes = 64;
  for (size_t i = 0; i < packed_.size(); ++i) {
    if (packed_[i].empty()) continue;
    const int64_t rows = packedOnce_[i] ? 1 : reduced_.numel(), esz = (*views_)[i].elemSize;
    std::vector<const char*> rowStart(rows);
    const char* data = (*views_)[i].data + (packedPerLine_[i] ? lines_.offset(i, line) : 0);
    bool contiguous = rows > 1 && laneStride_[i] != 0;  // the rows' values of a lane side by side
    for (int64_t r = 0; r < rows; ++r) {
      rowStart[r] = data + reduced_.offset(i, r);
      contiguous = contiguous && rowStart[r] == rowStart[0] + r * esz;
    }
    const int64_t grain = grainFor(rows * kBlockLanes);
    auto body = [&](int64_t b, int64_t e) {
      for (int64_t l0 = p0 + b * kBlockLanes; l0 < std::min(p0 + lanes, p0 + e * kBlockLanes); l0 += kBlockLanes) {
        const int64_t n = std::min(kBlockLanes, p0 + lanes - l0);
        if (contiguous) {
          transposeRows(rowStart[0] + l0 * laneStride_[i], laneStride_[i], n, rows, esz, packedAt(i, 0, l0),
                        rowStride_[i]);
          continue;
        }
        for (int64_t r = 0; r < rows; ++r)
          gather(rowStart[r], esz, &inner_, &laneStride_[i], 1, l0, n, packedAt(i, r, l0));
      }
    };
    const int64_t blocks = (lanes + kBlockLanes - 1) / kBlockLanes;
    if (blocks <= grain || at::in_parallel_region())
      body(0, blocks);
    else
      at::parallel_for(0, blocks, grain, body);
  }
}

void VerticalReduce::run(const std::vector<int64_t>& base, int64_t start, int64_t rows, int64_t n, void* sums) const {
  const Kernel& k = *kernel_;
  if (rows != k.rowsPerBlock()) {  // fewer rows than a block takes: one row at a time
    std::vector<int64_t> rowBase(base);
    for (int64_t r = 0; r < rows; ++r) {
      for (size_t i = 0; i < rowBase.size(); ++i) rowBase[i] = base[i] + r * outerStride_[i];
      runRows(rowBase, start, false, n, static_cast<char*>(sums) + r * kSumsRowBytes);
    }
  } else {
    runRows(base, start, rows > 1, n, sums);
  }
  countTile();
}

void VerticalReduce::runRows(const std::vector<int64_t>& base, int64_t start, bool allRows, int64_t n,
                             void* sums) const {
  if (order_) return runInner(base, start, allRows, n, sums);
  const Kernel& k = *kernel_;
  const auto& views = *views_;
  const int64_t outerCount = outer_.numel(), maxRows = k.maxRows();
  alignas(32) char mask[32];
  Args a;
  a.mask = mask;
  for (size_t i = 0; i < views.size(); ++i) {
    a.rowStride[i] = rowStride_[i];
    a.outerStride[i] = outerStride_[i];
  }
  // Operand i's first element for lanes from v0, outer reduced row ro, row r0.
  auto point = [&](int64_t v0, int64_t ro, int64_t r0) {
    for (size_t i = 0; i < views.size(); ++i) {
      const int64_t esz = views[i].elemSize, lane = leaves_[i] == Leaf::Contiguous ? v0 * esz : 0;
      if (packed_[i].empty())
        a.leaf[i] = views[i].data + base[i] + outer_.offset(i, ro) + r0 * rowStride_[i] + lane;
      else  // packed: [outer reduced][rows][lanes], or once: [lanes]
        a.leaf[i] = packedAt(i, ro * rows_ + r0, start) + lane;
    }
  };
  int64_t v0 = 0;
  if (startsFromZero()) {
    // One call walks every full block: each starts from 0 and reads all rows, then every operand
    // steps to the next block (contiguous ones by a block of lanes, uniform ones not at all).
    const int64_t blocks = n / k.lanesPerBlock();
    if (blocks > 0) {
      point(0, 0, 0);
      for (size_t i = 0; i < views.size(); ++i)
        a.blockStep[i] =
            (leaves_[i] == Leaf::Contiguous ? k.lanesPerBlock() * views[i].elemSize : 0) - rows_ * rowStride_[i];
      a.rows = rows_;
      a.blocks = blocks;
      a.fresh = 1;
      a.index = 0;
      a.out = sums;
      k.block(a, allRows);
      v0 = blocks * k.lanesPerBlock();
    }
  }
  // Bool operands read in place (one byte a lane): a masked vector loads all its lanes' bytes
  // (Gen::loadBools), so a tail reads them from a copy, a vector's bytes a row, its rows a chunk of
  // at most kTailRows at a time (the copy stays small however many rows are reduced).
  std::vector<size_t> boolsInPlace;
  for (size_t i = 0; i < views.size(); ++i)
    if (views[i].elemSize == 1 && packed_[i].empty() && leaves_[i] == Leaf::Contiguous) boolsInPlace.push_back(i);
  constexpr int64_t kTailRows = 1024;
  std::vector<char> tailBools;
  auto copyTailBools = [&](int64_t lanes, int64_t outRows) {
    const int64_t rowBytes = k.lanesPerVector(), bytes = rowBytes * a.rows * outRows;
    tailBools.assign(bytes * boolsInPlace.size(), 0);
    char* to = tailBools.data();
    for (size_t i : boolsInPlace) {
      for (int64_t q = 0; q < outRows; ++q)
        for (int64_t r = 0; r < a.rows; ++r)
          std::memcpy(to + (q * a.rows + r) * rowBytes, a.leaf[i] + q * outerStride_[i] + r * rowStride_[i], lanes);
      a.leaf[i] = to;
      a.rowStride[i] = rowBytes;
      a.outerStride[i] = rowBytes * a.rows;
      to += bytes;
    }
  };
  while (v0 < n) {
    const bool full = v0 + k.lanesPerBlock() <= n;
    const int64_t lanes = full ? k.lanesPerBlock() : std::min(k.lanesPerVector(), n - v0);
    if (!full) k.fillMask(lanes, mask);
    a.out = static_cast<char*>(sums) + v0 * laneBytes();
    const int64_t step = full || boolsInPlace.empty() ? maxRows : std::min(maxRows, kTailRows);
    for (int64_t ro = 0; ro < outerCount; ++ro) {
      for (int64_t r0 = 0; r0 < rows_; r0 += step) {
        point(v0, ro, r0);
        a.rows = std::min(step, rows_ - r0);
        a.blocks = 1;
        a.fresh = startsFromZero() && r0 == 0;  // (later chunks fold into the first's sums)
        a.index = ro * rows_ + r0;
        if (full) {
          k.block(a, allRows);
          continue;
        }
        if (!boolsInPlace.empty()) copyTailBools(lanes, allRows ? k.rowsPerBlock() : 1);
        k.vector(a, allRows);
        for (size_t i : boolsInPlace) a.rowStride[i] = rowStride_[i], a.outerStride[i] = outerStride_[i];
      }
    }
    v0 += lanes;
  }
}

// Eager's inner order (InnerSumOrder): the values after the vectors start each lane sum (0 + each,
// in order: a SumFloat kernel per output row), then the SumInner kernel adds each lane of eager's
// vectors: its rows a whole vector apart, lane after lane.
void VerticalReduce::runInner(const std::vector<int64_t>& base, int64_t start, bool allRows, int64_t n,
                              void* sums) const {
  const auto& views = *views_;
  const InnerSumOrder& o = *order_;
  alignas(32) char mask[32];
  Args a;
  a.mask = mask;
  // Operand i's element for lanes from v0 at reduced row `row`, the output rows from base + r.
  auto point = [&](int64_t v0, int64_t row, int64_t r) {
    for (size_t i = 0; i < views.size(); ++i) {
      const int64_t esz = views[i].elemSize, lane = leaves_[i] == Leaf::Contiguous ? v0 * esz : 0;
      if (packed_[i].empty())
        a.leaf[i] = views[i].data + base[i] + r * outerStride_[i] + row * rowStride_[i] + lane;
      else
        a.leaf[i] = packedAt(i, row, start) + lane;
    }
  };
  // Every lane from v0 = 0: whole blocks in one call, then a masked vector at a time.
  auto sweep = [&](const Kernel& k, int64_t row, int64_t stepsPerBlock, bool rowsTogether, int64_t r, char* out) {
    const int64_t blocks = n / k.lanesPerBlock();
    for (size_t i = 0; i < views.size(); ++i)
      a.blockStep[i] =
          (leaves_[i] == Leaf::Contiguous ? k.lanesPerBlock() * views[i].elemSize : 0) - stepsPerBlock * rowStride_[i];
    for (int64_t v0 = 0; v0 < n;) {
      const bool full = v0 == 0 && blocks > 0;
      point(v0, row, r);
      a.out = out + v0 * laneBytes();
      a.blocks = full ? blocks : 1;  // (the kernel counts it down)
      if (full) {
        k.block(a, rowsTogether);
        v0 = blocks * k.lanesPerBlock();
        continue;
      }
      k.fillMask(std::min(k.lanesPerVector(), n - v0), mask);
      k.vector(a, rowsTogether);
      v0 += k.lanesPerVector();
    }
  };
  const int64_t outRows = allRows ? kernel_->rowsPerBlock() : 1;
  a.fresh = 1;
  if (after_) {
    a.rows = o.rest;
    for (size_t i = 0; i < views.size(); ++i) a.rowStride[i] = rowStride_[i], a.outerStride[i] = outerStride_[i];
    for (int64_t r = 0; r < outRows; ++r)
      sweep(*after_, o.vectors * o.lanes, o.rest, false, r, static_cast<char*>(sums) + r * kSumsRowBytes);
    a.fresh = 0;
  }
  a.rows = o.vectors;
  a.lanes = o.lanes;
  for (size_t i = 0; i < views.size(); ++i) {
    a.rowStride[i] = o.lanes * rowStride_[i];
    a.laneStep[i] = rowStride_[i] - o.vectors * a.rowStride[i];
    a.outerStride[i] = outerStride_[i];
  }
  sweep(*kernel_, 0, o.lanes, allRows, 0, static_cast<char*>(sums));
}

}  // namespace tsfuse::cpu::jit
