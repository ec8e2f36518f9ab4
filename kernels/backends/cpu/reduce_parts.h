// The parts of the native reduction shared by its tilings (kernels/backends/cpu/reduce.cpp): the finisher
// that writes outputs (through the epilogue), and the vertical sum's lanes, its folded final cast,
// and its compiled path (jit::VerticalReduce). Internal to reduce.cpp.
#pragma once

#include "kernels/backends/cpu/accumulators.h"
#include "kernels/backends/cpu/gather.h"
#include "kernels/backends/cpu/jit/jit.h"
#include "kernels/backends/cpu/row_sum.h"
#include "kernels/backends/cpu/jit/segments.h"
#include "kernels/backends/cpu/tile_program.h"
#include "tsfuse/log.h"

#include <ATen/Parallel.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <optional>
#include <type_traits>

namespace tsfuse::cpu::reduce_parts {

// Writes finished reduction values to the output: as they are, or through the epilogue, which
// runs on the same tile of outputs. Its leaves are read in place where they can be (the values;
// an operand contiguous or constant along the tile's run of the output's innermost dim), else
// gathered in the output's memory order; its result is written straight to the destination where
// its last instruction writes it in the output's dtype.
struct Finisher {
  const TileProgram* epilogue = nullptr;
  const std::vector<BroadcastView>* views = nullptr;  // epilogue operands $1.. over the output shape
  const SubSpace* space = nullptr;                    // output dims in memory order, for those views
  bool resultInPlace = false;
  // The epilogue as compiled runs between its routine calls, for tiles within one run of the
  // output's innermost dim (their operands read the same way on every such tile: withSegments);
  // null: interpreted.
  const jit::SegmentedProgram* segments = nullptr;
  char* out = nullptr;
  int64_t outSize = 0;      // output element size
  int64_t reducedSize = 0;  // element size of the reduction's values
  int64_t* indices = nullptr;

  // vals: n reduced values of outputs [o0, o0 + n) (linear in the output's memory order).
  void operator()(TileProgram::Scratch* es, const void* vals, int64_t o0, int64_t n) const {
    to(out + o0 * outSize, es, vals, o0, n);
  }
  // The same, written to dst instead of the output's own place. runBase (or null): each operand's
  // byte offset where o0's run along the innermost output dim starts, for callers that finish
  // many tiles of one row (it costs a division per dim otherwise).
  void to(char* dst, TileProgram::Scratch* es, const void* vals, int64_t o0, int64_t n,
          const int64_t* runBase = nullptr) const {
    if (!epilogue) {
      std::memcpy(dst, vals, n * outSize);
      return;
    }
    es->vectorLeaf(0, static_cast<const char*>(vals));
    const int64_t inner = innermost();
    const bool oneRun = o0 % inner + n <= inner;
    for (size_t i = 0; i < views->size(); ++i) {
      const int leaf = static_cast<int>(i) + 1;
      const BroadcastView& v = (*views)[i];
      const int64_t step = space->size.empty() ? 0 : space->stride[i].back();
      if (oneRun && (step == 0 || step == v.elemSize)) {
        const char* p = v.data + (runBase ? runBase[i] + (o0 % inner) * step : space->offset(i, o0));
        step == 0 ? es->uniformLeaf(leaf, p) : es->vectorLeaf(leaf, p);
        continue;
      }
      gatherInto(*space, i, v, 0, o0, n, es->buffer[leaf]);
      es->vectorLeaf(leaf, es->buffer[leaf]);
    }
    if (segments && oneRun) {
      segments->run(*es, n, dst);
      return;
    }
    if (resultInPlace) {
      es->slot[epilogue->result] = dst;
      epilogue->run(*es, n);
      es->slot[epilogue->result] = es->buffer[epilogue->result];
      return;
    }
    std::memcpy(dst, epilogue->run(*es, n), n * outSize);
  }
  // Fills runBase (as to() reads it) for the run starting at linear output index `start`.
  void runStart(int64_t start, int64_t* runBase) const {
    for (size_t i = 0; epilogue && i < views->size(); ++i) runBase[i] = space->offset(i, start);
  }
  int64_t innermost() const { return space && !space->size.empty() ? space->size.back() : 1; }
  // The epilogue as compiled runs (into *made), for tiles that each lie in one run of the output's
  // innermost dim: the values and every operand but those constant along the run (read as one
  // element) are then read as contiguous lanes. Unchanged where there is no such epilogue or it
  // does not compile.
  Finisher withSegments(std::optional<jit::SegmentedProgram>* made) const {
    Finisher f = *this;
    if (!epilogue) return f;
    if (!resultInPlace) {
      TSFUSE_LOG(kernel, debug, "epilogue interpreted: its result is not written last in the output's dtype");
      return f;
    }
    std::vector<jit::Leaf> leaves{jit::Leaf::Contiguous};
    for (size_t i = 0; i < views->size(); ++i)
      leaves.push_back(!space->size.empty() && space->stride[i].back() == 0 ? jit::Leaf::Uniform
                                                                            : jit::Leaf::Contiguous);
    std::string why;
    *made = jit::SegmentedProgram::make(*epilogue, leaves, &why);
    if (*made)
      f.segments = &**made;
    else
      TSFUSE_LOG(kernel, debug, "epilogue interpreted: ", why);
    return f;
  }
  std::optional<TileProgram::Scratch> scratch() const {
    if (!epilogue) return std::nullopt;
    return epilogue->makeScratch();
  }
};

// A reduce_chain's next stage folded into this reduction (runReduceRowSums): every output row,
// `length` float32 values along the output's innermost dim, is finished into the thread's row
// buffer instead of the output and summed there in eager's order (row_sum.h) into out[row].
struct RowSums {
  float* out = nullptr;
  int64_t length = 0;
};

// Chunks of [0, n), about eight per thread, that torch's threads take in turn as they finish their
// previous one, so that threads running at different speeds (a VM's vCPUs sharing a core) end
// together where static halves would leave one waiting. Each work item writes its own outputs, so
// the bits do not depend on who runs it.
class ChunkQueue {
 public:
  ChunkQueue(int64_t n, int64_t chunks) : n_(n), chunks_(chunks) {}
  // The next chunk [b, e); false when none is left.
  bool next(int64_t& b, int64_t& e) const {
    const int64_t c = next_.fetch_add(1, std::memory_order_relaxed);
    if (c >= chunks_) return false;
    b = c * n_ / chunks_, e = (c + 1) * n_ / chunks_;
    return true;
  }

 private:
  int64_t n_, chunks_;
  mutable std::atomic<int64_t> next_{0};
};

// Calls worker(queue) once on each of torch's threads (once on this one where `alone`, inside a
// parallel region, or for n items of `perItem` elements each that are too little work to share):
// each sets up its scratch once and then takes chunks from the queue.
template <typename F>
void forEachWorker(int64_t n, int64_t perItem, bool alone, const F& worker) {
  if (n <= 0) return;
  const int threads = alone || at::in_parallel_region() || n <= grainFor(perItem) ? 1 : at::get_num_threads();
  const ChunkQueue queue(n, threads <= 1 ? 1 : std::min<int64_t>(n, int64_t(threads) * 8));
  if (threads <= 1 || n == 1) return worker(queue);
  at::parallel_for(0, threads, 1, [&](int64_t, int64_t) { worker(queue); });
}

template <typename Acc>
struct IsSumLike : std::false_type {};
template <typename T>
struct IsSumLike<SumAcc<T>> : std::true_type {};
template <typename T>
struct IsSumLike<MeanAcc<T>> : std::true_type {};

// The sum of a tile's n values in the wide domain as eight interleaved partial sums (value j goes to
// partial j % 8; the partials are then added in order): a fixed order, so the same bits for any
// thread count, without a chain of n dependent adds. Not eager's order (callers folding in eager's
// order, or rounding every step to float, add one value at a time).
template <typename T>
Wide<T> tileSum(const T* v, int64_t n) {
  constexpr int64_t K = 8;
  Wide<T> part[K] = {};
  int64_t j = 0;
  for (; j + K <= n; j += K)
    for (int64_t k = 0; k < K; ++k) part[k] = rules::sumStep(part[k], static_cast<Wide<T>>(v[j + k]));
  for (int64_t k = 0; j < n; ++j, ++k) part[k] = rules::sumStep(part[k], static_cast<Wide<T>>(v[j]));
  Wide<T> s = part[0];
  for (int64_t k = 1; k < K; ++k) s = rules::sumStep(s, part[k]);
  return s;
}

// Whether every value of dtype `from` converts to `to` exactly.
inline bool convertsExactly(c10::ScalarType from, c10::ScalarType to) {
  if (from == to || from == c10::ScalarType::Bool) return true;
  if (to == c10::ScalarType::Bool) return false;
  const bool fromInt = c10::isIntegralType(from, false), toInt = c10::isIntegralType(to, false);
  const int64_t fs = c10::elementSize(from), ts = c10::elementSize(to);
  if (fromInt && toInt) {
    if (from == c10::ScalarType::Byte) return to == c10::ScalarType::Byte || ts > 1;
    return to != c10::ScalarType::Byte && ts >= fs;  // signed into a signed type at least as wide
  }
  if (fromInt) return fs <= (to == c10::ScalarType::Float ? 2 : 4);  // 24 / 53 mantissa bits
  return !toInt && ts >= fs;                                         // float -> double
}

// The instructions a sum runs before accumulating: all but a final cast of the result that
// cannot change a value (its wide accumulation then converts the source directly, same result).
inline size_t sumPrefix(const TileProgram& prog) {
  if (prog.code.empty()) return 0;
  const lower::Instr& last = prog.code.back();
  if (last.op == Prim::Cast && last.out == prog.result && last.a >= 0 &&
      convertsExactly(prog.slotType[last.a], prog.slotType[last.out]))
    return prog.code.size() - 1;
  return prog.code.size();
}

// The kTile lane sums of a vertical sum/mean in their wide type W (int64 or double), added with
// the op loops' instruction set (inFloat: each row's sums rounded to float, rules::foldsInFloat).
// Bool values (a count: sum(lt(..))) go through byte counters, 32 lanes an instruction, flushed
// into the sums every 255 rows: integer adds, so the same result.
template <typename W>
struct SumLanes {
  static constexpr int64_t kFlushEvery = 255;
  c10::ScalarType type;  // of the values added
  bool inFloat;
  std::vector<W> sums = std::vector<W>(kTile);
  std::vector<uint8_t> counts;  // bools only
  int64_t pending = 0;          // rows in counts

  SumLanes(c10::ScalarType t, bool roundToFloat)
      : type(t), inFloat(roundToFloat && t != c10::ScalarType::Bool), counts(t == c10::ScalarType::Bool ? kTile : 0) {}
  void reset(int64_t n) {
    std::fill(sums.begin(), sums.begin() + n, W(0));
    std::fill(counts.begin(), counts.begin() + std::min<int64_t>(n, counts.size()), uint8_t(0));
    pending = 0;
  }
  void add(const char* values, int64_t n) {
    if (counts.empty()) {
      accumulateSum(type, values, sums.data(), n);
      if (inFloat)
        for (int64_t j = 0; j < n; ++j) sums[j] = reduce_rules::roundedToFloat(sums[j]);
      return;
    }
    countFlags(values, counts.data(), n);
    if (++pending == kFlushEvery) flush(n);
  }
  void flush(int64_t n) {
    if (pending == 0) return;
    accumulateSum(c10::ScalarType::Byte, reinterpret_cast<const char*>(counts.data()), sums.data(), n);
    std::fill(counts.begin(), counts.begin() + n, uint8_t(0));
    pending = 0;
  }
};

// The kTile lanes of a vertical var/std: every lane takes the same rows, so one count serves all,
// and each lane's update is WelfordAcc::add's (the same operations in the same order, so the same
// bits), over arrays in vectors (welfordAdd) where WelfordAcc's array of structs runs one lane at
// a time.
template <typename T>
struct WelfordLanes {
  std::vector<double> mean = std::vector<double>(kTile), m2 = std::vector<double>(kTile);
  int64_t n = 0;
  void reset(int64_t lanes) {
    std::fill(mean.begin(), mean.begin() + lanes, 0.0);
    std::fill(m2.begin(), m2.begin() + lanes, 0.0);
    n = 0;
  }
  void add(const T* v, int64_t lanes) {
    const double nf = static_cast<double>(++n);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      welfordAdd(v, mean.data(), m2.data(), nf, lanes);
    } else {
      for (int64_t k = 0; k < lanes; ++k) {
        const double x = static_cast<double>(v[k]), delta = x - mean[k];
        mean[k] += delta / nf;
        m2[k] += delta * (x - mean[k]);
      }
    }
  }
  void into(WelfordAcc<T>* acc, int64_t lanes) const {
    for (int64_t k = 0; k < lanes; ++k) {
      acc[k].mean = mean[k], acc[k].m2 = m2[k];
      acc[k].n = n, acc[k].nf = static_cast<double>(n);
    }
  }
};
template <typename Acc>
struct IsWelford : std::false_type {};
template <typename T>
struct IsWelford<WelfordAcc<T>> : std::true_type {};

// Max/min accumulators of float32 values that keep their first index (argmax, max(dim)): the
// compiled kernels' extremum sinks fold them.
template <typename Acc>
struct FirstExtremum : std::false_type {};
template <bool IsMax>
struct FirstExtremum<ArgAcc<float, IsMax>> : std::true_type {
  static constexpr bool kMax = IsMax;
};
template <bool IsMax>
struct FirstExtremum<ValueIndexAcc<float, IsMax>> : FirstExtremum<ArgAcc<float, IsMax>> {};
// amax/amin: the first extremum's value is the value the accumulator keeps (NaN where there is
// one; of equal values, -0.0 and 0.0 included, the first), so the same kernels fold it.
template <bool IsMax>
struct FirstExtremum<ExtremumAcc<float, IsMax>> : FirstExtremum<ArgAcc<float, IsMax>> {};

// Accumulators whose result does not depend on the order of the values (their ties keep the
// first index or value by the index they are given, not by when they see it).
template <typename Acc>
struct OrderFree : std::false_type {};
template <typename T, bool IsMax>
struct OrderFree<ExtremumAcc<T, IsMax>> : std::true_type {};
template <typename T, bool IsMax>
struct OrderFree<ArgAcc<T, IsMax>> : std::true_type {};
template <typename T, bool IsMax>
struct OrderFree<ValueIndexAcc<T, IsMax>> : std::true_type {};
template <typename T, bool IsAny>
struct OrderFree<TruthAcc<T, IsAny>> : std::true_type {};

// How a compiled kernel folds the values of Acc (a sum, or FirstExtremum; `source`: their dtype;
// inEagerOrder: a sum in eager's inner order, inner_sum.h).
template <typename Acc>
jit::Sink compiledSink(const Acc& proto, c10::ScalarType source, bool inEagerOrder) {
  if constexpr (FirstExtremum<Acc>::value) {
    return FirstExtremum<Acc>::kMax ? jit::Sink::MaxFirst : jit::Sink::MinFirst;
  } else {
    static_assert(IsSumLike<Acc>::value, "compiled kernels fold sums and first extrema");
    if (!std::is_floating_point_v<Wide<typename Acc::Value>>) return jit::Sink::SumInt64;
    if (inEagerOrder && (source == c10::ScalarType::Float || source == c10::ScalarType::Double))
      return jit::Sink::SumInner;
    return proto.inFloat && source == c10::ScalarType::Float ? jit::Sink::SumFloat : jit::Sink::SumDouble;
  }
}

// Acc holding lane j of one output row's lanes, as a compiled kernel left them.
template <typename Acc>
Acc laneAccumulator(const Acc& proto, jit::Sink sink, const char* lanes, int64_t j) {
  Acc acc = proto;
  if constexpr (std::is_same_v<Acc, ExtremumAcc<float, true>> || std::is_same_v<Acc, ExtremumAcc<float, false>>) {
    std::memcpy(&acc.v, lanes + 4 * j, 4);
  } else if constexpr (FirstExtremum<Acc>::value) {
    int32_t index;
    std::memcpy(&acc.best, lanes + 4 * j, 4);
    std::memcpy(&index, lanes + jit::kExtremumIndexBytes + 4 * j, 4);
    acc.idx = index;
  } else if (sink == jit::Sink::SumFloat ||
             (sink == jit::Sink::SumInner && std::is_same_v<typename Acc::Value, float>)) {
    float sum;
    std::memcpy(&sum, lanes + 4 * j, 4);
    acc.v = static_cast<decltype(acc.v)>(sum);
  } else {
    static_assert(sizeof(acc.v) == 8, "int64 or double lane sums");
    std::memcpy(&acc.v, lanes + 8 * j, 8);
  }
  return acc;
}

// Copies n elements of `size` bytes from src to dst, `step` elements apart there.
inline void scatter(const char* src, char* dst, int64_t n, int64_t step, int64_t size) {
  auto typed = [&](auto tag) {
    using U = decltype(tag);
    for (int64_t j = 0; j < n; ++j) std::memcpy(dst + j * step * sizeof(U), src + j * sizeof(U), sizeof(U));
  };
  switch (size) {
    case 1:
      return typed(uint8_t());
    case 2:
      return typed(uint16_t());
    case 4:
      return typed(uint32_t());
    case 8:
      return typed(uint64_t());
    default:
      for (int64_t j = 0; j < n; ++j) std::memcpy(dst + j * step * size, src + j * size, size);
  }
}

// A vertical reduction through compiled kernels (jit::VerticalReduce): tiles of up to
// rowsPerTile() consecutive outputs along the kept dim next to the lanes' dim, each output's lanes
// in its own kSumsRowBytes row of the lanes buffer; then the accumulator's value and the finisher,
// per row.
// swap: the plan's two innermost kept dims are the output's swapped (IterationPlan::
// withInnerKeptSwapped): the lanes run along the output's second-innermost dim, a work item takes
// every row of the output's short innermost dim for its tile of lanes, and each row is written
// `swap->inner` elements apart (row sums: each lane's rows summed in eager's order).
template <typename Acc>
void runCompiledVertical(jit::VerticalReduce& compiled, const IterationPlan& plan, const SubSpace& outer, int64_t count,
                         const Acc& proto, const Finisher& finish, const RowSums* rowSums = nullptr,
                         const InnerSwap* swap = nullptr) {
  using Out = typename Acc::Out;
  constexpr bool kIndexed = std::is_base_of_v<IndexedTag, Acc>;
  const int L = static_cast<int>(outer.stride.size());
  const int64_t inner = plan.kept.size.back(), tilesPerRow = (inner + kTile - 1) / kTile;
  const int64_t R = compiled.rowsPerTile(), line = compiled.lineLength();
  // Where a tile's operand rows overflow L2 (a long reduced dim), a work item takes kGroups groups
  // of R output rows and walks its lanes in chunks whose operand rows fit in L1, every group over
  // each chunk: a chunk is read from memory once, not once per group. Below that, L2 serves the
  // groups one after another as well, and chunks would only add overhead.
  constexpr int64_t kGroups = 8, kChunkBytes = int64_t(16) << 10, kTileBytes = int64_t(512) << 10;
  const bool chunked = count * kTile * 4 > (swap ? kChunkBytes : kTileBytes);
  const int64_t perBlock = compiled.lanesPerBlock();
  const int64_t chunk = chunked ? std::max(perBlock, kChunkBytes / (count * 4) / perBlock * perBlock) : kTile;
  const int64_t RK = swap ? line : chunked ? R * kGroups : R;
  TORCH_INTERNAL_ASSERT(!swap || (line == swap->inner && line < kTile), "tsfuse: swapped lanes over a long row");
  const int64_t groups = (line + RK - 1) / RK, lines = outer.numel() / line;
  const jit::Sink sink = compiled.sink();
  // Tiles never cross a row: where the epilogue's innermost dim is the row, its operands' offsets
  // are taken once per row and it runs compiled.
  const bool epiRows = finish.innermost() == inner;
  std::optional<jit::SegmentedProgram> segments;
  const Finisher finishRows = epiRows ? finish.withSegments(&segments) : finish;
  // Row sums: a work item is a group's whole rows, its tiles in order into the thread's buffer.
  const int64_t tilesPerItem = rowSums && !swap ? tilesPerRow : 1;
  TORCH_INTERNAL_ASSERT(!(rowSums && !swap && compiled.panelled()), "tsfuse: row sums over packed panels");
  // Panel by panel where an operand is packed a panel of lanes at a time (else one panel): every
  // output row's tiles of the panel's lanes, then the next panel packed. Line by line where an
  // operand is packed per line (else every line at once).
  const int64_t panel = compiled.panelLanes(), panels = (inner + panel - 1) / panel;
  const int64_t lineCount = compiled.packsPerLine() ? 1 : lines;  // lines a pass covers
  const int64_t passes = lines / lineCount * panels;
  // A worker's buffers (every value in them is written before it is read).
  const size_t E = finish.views ? finish.views->size() : 0;
  struct Buffers {
    std::optional<TileProgram::Scratch> es;
    std::vector<int64_t> lanes;  // aligned, raw lanes
    std::unique_ptr<Out[]> vals;
    std::vector<float> rowBuffer;
    std::unique_ptr<char[]> staged;
    // Per output row of the current group: each operand's offset at the row's start, and the
    // epilogue operands' (where the epilogue's innermost dim is the row), computed once per group.
    std::vector<int64_t> base, rowBase, epiBase;
  };
  auto makeBuffers = [&] {
    Buffers f;
    f.es = finish.scratch();
    f.lanes.resize(RK * jit::kSumsRowBytes / sizeof(int64_t));
    f.vals.reset(new Out[kTile]);
    f.rowBuffer.resize(rowSums ? RK * (swap ? kTile : inner) : 0);
    if (swap && !rowSums) f.staged.reset(new char[kTile * finish.outSize]);
    f.base.resize(L);
    f.rowBase.resize(RK * L);
    f.epiBase.resize(RK * E);
    return f;
  };
  // Passes [b, e) with red's packed operands (red holds pass `packed` packed; -1: none); each worker
  // sets up its buffers, or uses `kept`, a thread's for all its passes (lines in parallel: a pass
  // is one small line, and its worker is the thread itself).
  auto runPasses = [&](jit::VerticalReduce& red, int64_t packed, int64_t b, int64_t e, Buffers* kept) {
    for (int64_t pass = b; pass < e; ++pass) {
      const int64_t firstLine = pass / panels * lineCount, p0 = pass % panels * panel;
      if (pass != packed) red.pack(firstLine, p0);
      const int64_t firstTile = p0 / kTile, tiles = (std::min(panel, inner - p0) + kTile - 1) / kTile;
      // A thread's own buffers (`kept`): it is the only worker, whether or not at::parallel_for ran
      // it on a pool thread (OpenMP's in_parallel_region is false where the loop ran inline).
      forEachWorker(
          lineCount * groups * tiles / tilesPerItem, RK * tilesPerItem * std::min(kTile, inner) * count,
          kept != nullptr,
          [&](const ChunkQueue& queue) {  // (rowSums: tiles = tilesPerRow)
            const VmlSerialScope serialVml;
            std::optional<Buffers> own;
            Buffers& f = kept ? *kept : own.emplace(makeBuffers());
            auto& es = f.es;
            char* lanes = reinterpret_cast<char*>(f.lanes.data());
            auto& vals = f.vals;
            auto& rowBuffer = f.rowBuffer;
            auto& staged = f.staged;
            auto& base = f.base;
            auto& rowBase = f.rowBase;
            auto& epiBase = f.epiBase;
            int64_t baseOf = -1;
            for (int64_t b, e; queue.next(b, e);)
              for (int64_t w = b * tilesPerItem; w < e * tilesPerItem; ++w) {
                const int64_t start = (firstTile + w % tiles) * kTile, n = std::min(kTile, inner - start);
                const int64_t g = (w / tiles) % groups, o0 = (firstLine + w / (tiles * groups)) * line + g * RK;
                const int64_t rows = std::min(RK, line - g * RK);
                if (o0 != baseOf) {
                  baseOf = o0;
                  for (int64_t r = 0; r < rows; ++r) {
                    for (int i = 0; i < L; ++i) rowBase[r * L + i] = outer.offset(i, o0 + r);
                    if (epiRows) finish.runStart((o0 + r) * inner, epiBase.data() + r * E);
                  }
                }
                if (!red.startsFromZero())
                  for (int64_t r = 0; r < rows; ++r) red.clear(lanes + r * jit::kSumsRowBytes, n);
                for (int64_t c0 = 0; c0 < n; c0 += chunk)
                  for (int64_t q = 0; q < rows; q += R) {
                    for (int i = 0; i < L; ++i)
                      base[i] = rowBase[q * L + i] + (start + c0) * plan.kept.stride[i].back();
                    red.run(base, start + c0, std::min(R, rows - q), std::min(chunk, n - c0),
                            lanes + q * jit::kSumsRowBytes + c0 * red.laneBytes());
                  }
                for (int64_t r = 0; r < rows; ++r) {
                  const int64_t o = (o0 + r) * inner + start, at = swap ? swap->outputIndex(o) : o;
                  const int64_t step = swap ? swap->inner : 1;  // between the outputs of consecutive lanes
                  char* dst = rowSums ? reinterpret_cast<char*>(&rowBuffer[swap ? r * kTile : r * inner + start])
                              : swap  ? staged.get()
                                      : finish.out + o * finish.outSize;
                  const char* row = lanes + r * jit::kSumsRowBytes;
                  const int64_t* runBase = epiRows ? epiBase.data() + r * E : nullptr;
                  bool asTheyAre = false;  // float32 lane sums: finished as they are
                  if constexpr (std::is_same_v<Acc, SumAcc<float>>)
                    asTheyAre = sink == jit::Sink::SumFloat || sink == jit::Sink::SumInner;
                  if (asTheyAre) {
                    finishRows.to(dst, es ? &*es : nullptr, row, o, n, runBase);
                  } else {
                    for (int64_t j = 0; j < n; ++j) {
                      const Acc acc = laneAccumulator(proto, sink, row, j);
                      vals[j] = acc.get(count);
                      if constexpr (kIndexed) finish.indices[at + j * step] = acc.index();
                    }
                    finishRows.to(dst, es ? &*es : nullptr, vals.get(), o, n, runBase);
                  }
                  if (swap && !rowSums) scatter(dst, finish.out + at * finish.outSize, n, step, finish.outSize);
                }
                if (rowSums && swap) {  // every row of the output's innermost dim is here, lane by lane
                  float v[kTile];
                  for (int64_t j = 0; j < n; ++j) {
                    for (int64_t r = 0; r < rows; ++r) v[r] = rowBuffer[r * kTile + j];
                    rowSums->out[o0 / line * inner + start + j] = eagerRowSum(v, rows);
                  }
                } else if (rowSums && start + n == inner) {
                  for (int64_t r = 0; r < rows; ++r) rowSums->out[o0 + r] = eagerRowSum(&rowBuffer[r * inner], inner);
                }
              }
          });
    }
  };
  // Lines too small to share among threads one at a time: each thread takes whole lines, packing
  // them into its own copy of the reduction.
  if (compiled.linesInParallel()) {
    at::parallel_for(0, passes, grainFor(outer.numel() / passes * inner * count), [&](int64_t b, int64_t e) {
      jit::VerticalReduce own = compiled.forAnotherThread();
      Buffers buffers = makeBuffers();
      runPasses(own, -1, b, e, &buffers);
    });
  } else {
    runPasses(compiled, 0, 0, passes, nullptr);
  }
}
}  // namespace tsfuse::cpu::reduce_parts
