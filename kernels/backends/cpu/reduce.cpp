// The CPU reduce driver (tsfuse::reduce): the TileProgram's value folded into one accumulator per
// output (accumulators.h), written through the finisher and epilogue. Vertical tiles (the output's
// innermost dim has kVerticalMin elements, or the reduced space is shorter than a tile) give each
// lane one output (swapsLanes: along the outer dim where the inner one is short); horizontal tiles
// run along one output's reduced space, split among threads. Either way each output's values are
// folded in the reduced space's order, so the bits of a float sum do not depend on the thread count.
#include "kernels/backends/cpu/accumulators.h"
#include "kernels/backends/cpu/drivers.h"
#include "kernels/backends/cpu/gather.h"
#include "kernels/backends/cpu/inner_sum.h"
#include "kernels/backends/cpu/jit/jit.h"
#include "kernels/backends/cpu/reduce_parts.h"
#include "kernels/backends/cpu/row_extremum.h"
#include "kernels/backends/cpu/row_sum.h"
#include "kernels/backends/cpu/tile_eval.h"
#include "kernels/backends/cpu/vml.h"

#include <ATen/Parallel.h>
#if defined(__SSE2__)
#include <immintrin.h>
#endif
#include <c10/core/Contiguity.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <type_traits>

namespace tsfuse::cpu {
namespace {

using namespace reduce_parts;

constexpr int64_t kVerticalMin = 16;
// An order-free reduction reads rows of at least this many contiguous values in place, one output
// per tile (horizontal), rather than packing them across lanes, even where the packed kernels
// would be faster: packing rows this long takes up to jit::VerticalReduce::kMaxPackBytes of scratch
// per call, per thread beside each slab inside a chain or sweep, which the first-call bound of
// output + inputs + 2 MiB cannot hold (Chamfer's [256, 500] slabs).
constexpr int64_t kInPlaceRowMin = kTile / 2;

// Rows summed whole in eager's order (eagerRowSum) are gathered into a per-thread buffer: up to
// this many values, so a call's scratch stays bounded (1 MiB of float32); longer rows fold as any
// other reduction (or, where that would change eager's bits, through ATen: fused_call.cpp).
constexpr int64_t kWholeRowMax = int64_t(1) << 18;

// Whether this sum's (or logsumexp's) rows fold whole in eager's order here (row_sum.h).
bool foldsWholeRows(c10::ScalarType t, int64_t count, int64_t outputs, int dimsAboveOne, bool innermost) {
  return count > 0 && count <= kWholeRowMax && eagerSumsWholeRows(t, count, outputs, dimsAboveOne, innermost);
}

// Of the reduced dims of `shape`: how many have size > 1, and whether the one there is is the
// innermost of size > 1 in eager's value (`order`: its dims outermost-first; empty: not known).
struct ReducedRows {
  int dimsAboveOne = 0;
  bool innermost = false;
};
ReducedRows reducedRowsOf(at::IntArrayRef shape, at::IntArrayRef reduced, at::IntArrayRef order) {
  ReducedRows r;
  int64_t reducedDim = -1, innermostDim = -1;
  for (int64_t d : reduced)
    if (shape[d] > 1) ++r.dimsAboveOne, reducedDim = d;
  if (order.size() == shape.size())
    for (int64_t d : order)
      if (shape[d] > 1) innermostDim = d;
  r.innermost = reducedDim >= 0 && reducedDim == innermostDim;
  return r;
}

// Whether eager's exp and log routines for t are at hand (logsumexp rows need both).
bool logsumexpRoutines(c10::ScalarType t) {
  return (t == c10::ScalarType::Float || t == c10::ScalarType::Double) && vmlRoutine(Op::Exp, t) &&
         vmlRoutine(Op::Log, t);
}

// orderFree: the accumulator's result does not depend on the order it takes the values in
// (max/min, argmax/argmin by their first-index rule, any/all); then an operand read a row at a
// time along the reduced dim but strided along the output's (the values of a row-major [N, M]
// reduced over M) makes the tiles run along the reduced dim, where it is read in place, instead of
// gathering (or packing) every lane from another row: where a tile's worth of values is reduced,
// or a row of kInPlaceRowMin.
bool isVertical(const IterationPlan& plan, bool orderFree) {
  if (plan.kept.size.empty() || !(plan.kept.size.back() >= kVerticalMin || plan.reduced.numel() < kTile)) return false;
  if (!orderFree || plan.reduced.size.empty()) return true;
  if (plan.reduced.numel() < kTile && plan.reduced.size.back() < kInPlaceRowMin) return true;
  for (size_t i = 0; i < plan.views.size(); ++i)
    if ((plan.keptAccess[i] == Access::Packed || plan.keptAccess[i] == Access::Gathered) &&
        plan.reduced.stride[i].back() == plan.views[i].elemSize)
      return false;
  return true;
}

// Outputs whose innermost dim is too short for a vector but the dim outside it is long (distances
// from 50000 points to 3 centroids: [50000, 3]): their compiled tiles run along that outer dim
// instead, with every row of the short dim in one work item (InnerSwap), so a vector's lanes are
// all used and the epilogue runs on whole tiles, not on 3 values at a time.
bool swapsLanes(const IterationPlan& plan) {
  const size_t kd = plan.kept.size.size();
  return kd >= 2 && plan.kept.size.back() < kVerticalMin && plan.kept.size[kd - 2] >= kVerticalMin;
}

std::atomic<int64_t> gSwapped{0};  // swappedLaneReductions()
std::atomic<int64_t> gRelaid{0};   // relaidOperands()

// Whether interpreted vertical tiles would use few of their lanes (the gradient of [N, D] points
// summed over M others: D lanes) where horizontal tiles along the reduced space fill most of theirs:
// each program step's per-call cost is then paid for kTile values, not for D.
bool narrowLanes(const IterationPlan& plan, int64_t count) {
  return plan.kept.size.back() * 4 < kTile && count * 4 >= kTile;
}

// logsumexp of one row as eager's kernel computes it (ReduceOps.cpp, logsumexp_out_impl): m = the
// row's max (NaN if any), 0 where it is infinite; row[j] - m, exp'd by eager's routine in place;
// their sum in eager's order (eagerRowSum). Returns (sum, m); the caller takes log(sum) + m.
template <typename T>
std::pair<T, T> logsumexpOfRow(T* row, int64_t n, const VmlRoutine& exp) {
  // The max of the non-NaN values (SSE2: maxps keeps its second operand where the first is NaN),
  // then NaN if there was one.
  T m = -std::numeric_limits<T>::infinity();
  bool anyNan = false;
  int64_t j = 0;
#if defined(__SSE2__)
  if constexpr (std::is_same_v<T, float>) {
    __m128 mx = _mm_set1_ps(m), un = _mm_setzero_ps();
    for (; j + 4 <= n; j += 4) {
      const __m128 x = _mm_loadu_ps(row + j);
      mx = _mm_max_ps(x, mx);
      un = _mm_or_ps(un, _mm_cmpunord_ps(x, x));
    }
    alignas(16) float lanes[4];
    _mm_store_ps(lanes, mx);
    for (float v : lanes) m = v > m ? v : m;
    anyNan = _mm_movemask_ps(un) != 0;
  } else {
    __m128d mx = _mm_set1_pd(m), un = _mm_setzero_pd();
    for (; j + 2 <= n; j += 2) {
      const __m128d x = _mm_loadu_pd(row + j);
      mx = _mm_max_pd(x, mx);
      un = _mm_or_pd(un, _mm_cmpunord_pd(x, x));
    }
    alignas(16) double lanes[2];
    _mm_store_pd(lanes, mx);
    for (double v : lanes) m = v > m ? v : m;
    anyNan = _mm_movemask_pd(un) != 0;
  }
#endif
  for (; j < n; ++j) {
    anyNan |= row[j] != row[j];
    m = row[j] > m ? row[j] : m;
  }
  if (anyNan) m = std::numeric_limits<T>::quiet_NaN();
  if (std::isinf(m)) m = 0;
  for (j = 0; j < n; ++j) row[j] = row[j] - m;
  exp(n, row, row);
  return {eagerRowSum(row, n), m};
}

// order: eager's order for this sum (inner_sum.h), which every path then follows. wholeRows: a
// sum of whole rows in eager's order (eagerRowSum): horizontal tiles gather each row, then sum it.
// rowSums: only through a compiled vertical kernel (false where none applies; nothing is written).
template <typename Acc>
bool runReduceTyped(const TileProgram& prog, const IterationPlan& plan, const Acc& proto, const Finisher& finish,
                    const std::optional<InnerSumOrder>& order, bool wholeRows, const RowSums* rowSums) {
  using T = typename Acc::Value;
  using Out = typename Acc::Out;
  constexpr bool kIndexed = std::is_base_of_v<IndexedTag, Acc>;
  // Sums that may follow eager's inner order (and their values' type where they cannot).
  constexpr bool kOrdered = IsSumLike<Acc>::value && std::is_floating_point_v<T>;
  // A logsumexp of whole rows in eager's steps (logsumexpOfRow).
  constexpr bool kRowLse = std::is_same_v<Acc, LogsumexpAcc<T>> && std::is_floating_point_v<T>;
  using OrderT = std::conditional_t<kOrdered, T, double>;
  const int64_t numOut = plan.kept.numel();
  const int64_t count = plan.reduced.numel();
  const int L = prog.numLeaves;
  const auto& views = plan.views;
  TORCH_INTERNAL_ASSERT(static_cast<int64_t>(sizeof(Out)) == finish.reducedSize, "tsfuse: native reduction writes ",
                        sizeof(Out), "-byte values to a ", finish.reducedSize, "-byte dtype");

  if (isVertical(plan, OrderFree<Acc>::value) && !wholeRows) {
    // Tiles run along the innermost output dim; the reduced space is walked once per tile, so
    // each lane accumulates one output element in order.
    const int64_t inner = plan.kept.size.back();
    const SubSpace outer = plan.kept.outer();
    // Sums read the value before the program's final cast when that cast cannot change it (not
    // in eager's order, which adds values of the result's dtype).
    constexpr bool kSum = IsSumLike<Acc>::value;
    const size_t prefix = kSum && !order ? sumPrefix(prog) : prog.code.size();
    const int source = prefix == prog.code.size() ? prog.result : prog.code[prefix].a;
    // Outputs whose innermost dim is short (swapsLanes): the tiles run along the dim outside it,
    // each lane still folding one output's values in the reduced order, and the finished values
    // go to their outputs `inner` apart. The swapped epilogue reads its operands in that order.
    std::optional<IterationPlan> swappedPlan;
    std::optional<jit::SegmentedProgram> swappedSegments;
    Finisher fin = finish;
    std::optional<InnerSwap> swap;
    if (swapsLanes(plan)) {
      swappedPlan.emplace(plan.withInnerKeptSwapped());
      if (fin.space) fin.space = &swappedPlan->epilogueSpace;
      fin.segments = nullptr;
      fin = fin.withSegments(&swappedSegments);
      swap = InnerSwap{inner, swappedPlan->kept.size.back()};
    }
    const IterationPlan& tiles = swappedPlan ? *swappedPlan : plan;
    // A compiled kernel folds the tile with its values in registers (jit.h), if one applies.
    if constexpr (kSum || FirstExtremum<Acc>::value) {
      const jit::Sink sink = compiledSink(proto, prog.slotType[source], order.has_value());
      if (swap && !(rowSums && kIndexed)) {
        if (auto compiled = jit::VerticalReduce::make(prog, prefix, source, sink, tiles, order ? &*order : nullptr)) {
          runCompiledVertical(*compiled, tiles, tiles.kept.outer(), count, proto, fin, rowSums, &*swap);
          gSwapped.fetch_add(1, std::memory_order_relaxed);
          return true;
        }
      }
      auto compiled = jit::VerticalReduce::make(prog, prefix, source, sink, plan, order ? &*order : nullptr);
      if (compiled && !(rowSums && (kIndexed || compiled->panelled()))) {
        runCompiledVertical(*compiled, plan, outer, count, proto, finish, rowSums);
        return true;
      }
    }
    if (rowSums) return false;
    // (Narrow rows no compiled kernel folds: the horizontal tiles below.)
    if (!narrowLanes(tiles, count)) {
      const int64_t lanesInner = tiles.kept.size.back();
      const int64_t perRow = (lanesInner + kTile - 1) / kTile;
      const SubSpace tileOuter = tiles.kept.outer();
      std::vector<char> constantOverRows(L);  // operands the same for every row of the reduced space
      for (int i = 0; i < L; ++i) constantOverRows[i] = tiles.reduced.constantFor(i);
      const int64_t sourceSize = c10::elementSize(prog.slotType[source]);
      // The tiles' values: a tile of one reduced row reads an operand uniform along the kept dim as
      // one value, a tile of several rows only one that is also the same for every row.
      auto kinds = [&](bool severalRows) {
        std::vector<jit::Leaf> k(L);
        for (int i = 0; i < L; ++i)
          k[i] = tiles.keptAccess[i] == Access::Uniform && (!severalRows || constantOverRows[i])
                     ? jit::Leaf::Uniform
                     : jit::Leaf::Contiguous;
        return k;
      };
      const TileEvaluator oneRow(prog, kinds(false), TileEvaluator::Use::Folded, source, prefix);
      const TileEvaluator rowsAtOnce(prog, kinds(true), TileEvaluator::Use::Folded, source, prefix);
      const int64_t grain = grainFor(std::min(kTile, lanesInner) * count);  // (a tile: the row's lanes at most)
      at::parallel_for(0, tileOuter.numel() * perRow, grain, [&](int64_t b, int64_t e) {
        const VmlSerialScope serialVml;  // (tiles' routine calls: MKL's thread count set once)
        auto scratch = prog.makeScratch();
        auto es = fin.scratch();
        std::vector<Acc> acc(kTile, proto);
        std::optional<SumLanes<Wide<T>>> lanes;
        std::optional<WelfordLanes<T>> welford;
        if constexpr (IsWelford<Acc>::value) welford.emplace();
        std::optional<InnerSumLanes<OrderT>> ordered;
        if constexpr (kOrdered)
          if (order) ordered.emplace(*order, kTile);
        if constexpr (kSum)
          if (!ordered) lanes.emplace(prog.slotType[source], proto.inFloat);
        std::unique_ptr<Out[]> vals(new Out[kTile]);
        std::unique_ptr<char[]> staged(swap ? new char[kTile * finish.outSize] : nullptr);
        std::vector<int64_t> base(L);
        // Leaf i's n values of rows r0, r0 + 1, ... (rows of them) one after another in its buffer.
        auto loadRows = [&](int i, const char* p0, int64_t rows, int64_t n, TileProgram::Scratch& sc, int64_t b0,
                            int64_t r0) {
          const int64_t esz = tiles.views[i].elemSize;
          for (int64_t j = 0; j < rows; ++j) {
            const char* p = j ? tiles.views[i].data + b0 + tiles.reduced.offset(i, r0 + j) : p0;
            char* dst = sc.buffer[i] + j * n * esz;
            if (tiles.keptAccess[i] == Access::InPlace)
              std::memcpy(dst, p, n * esz);
            else
              gather(p, esz, &lanesInner, &tiles.kept.stride[i].back(), 1, 0, n, dst);  // uniform: n copies
          }
          sc.vectorLeaf(i, sc.buffer[i]);
        };
        for (int64_t w = b; w < e; ++w) {
          const int64_t o = w / perRow, start = (w % perRow) * kTile;
          const int64_t n = std::min(kTile, lanesInner - start);
          if constexpr (kSum)
            ordered ? ordered->reset(n) : lanes->reset(n);
          else
            std::fill(acc.begin(), acc.begin() + n, proto);
          if constexpr (IsWelford<Acc>::value) welford->reset(n);
          for (int i = 0; i < L; ++i) base[i] = tileOuter.offset(i, o) + start * tiles.kept.stride[i].back();
          // A narrow tile (n < kTile / 2) evaluates several rows of the reduced space per program
          // run: each op's per-call cost is paid once per kTile values, not once per n. The lanes
          // still take the rows one after another, in the reduced space's order.
          const int64_t rowsPerRun = std::max<int64_t>(1, kTile / n);
          for (int64_t r0 = 0; r0 < count; r0 += rowsPerRun) {
            const int64_t rows = std::min(rowsPerRun, count - r0);
            for (int i = 0; i < L; ++i) {
              const char* p = tiles.views[i].data + base[i] + tiles.reduced.offset(i, r0);
              if (rows > 1 && !(tiles.keptAccess[i] == Access::Uniform && constantOverRows[i])) {
                loadRows(i, p, rows, n, scratch, base[i], r0);
                continue;
              }
              switch (tiles.keptAccess[i]) {
                case Access::Uniform:
                  scratch.uniformLeaf(i, p);
                  break;
                case Access::InPlace:
                  scratch.vectorLeaf(i, p);
                  break;
                case Access::Packed:  // per tile here: only the compiled sums pack once per call
                case Access::Gathered:
                  gather(p, tiles.views[i].elemSize, &lanesInner, &tiles.kept.stride[i].back(), 1, 0, n,
                         scratch.buffer[i]);
                  scratch.vectorLeaf(i, scratch.buffer[i]);
                  break;
              }
            }
            const int64_t m = rows * n;
            const char* v = (rows > 1 ? rowsAtOnce : oneRow).value(scratch, m);
            if constexpr (kSum) {
              for (int64_t j = 0; j < rows; ++j) {
                if constexpr (kOrdered)
                  if (ordered) {
                    ordered->add(reinterpret_cast<const T*>(v) + j * n);
                    continue;
                  }
                lanes->add(v + j * n * sourceSize, n);
              }
            } else if constexpr (IsWelford<Acc>::value) {
              for (int64_t j = 0; j < rows; ++j) welford->add(reinterpret_cast<const T*>(v) + j * n, n);
            } else {
              const T* t = reinterpret_cast<const T*>(v);
              for (int64_t j = 0; j < rows; ++j)
                for (int64_t k = 0; k < n; ++k) acc[k].add(t[j * n + k], r0 + j);
            }
          }
          if constexpr (kOrdered) {
            if (ordered) {
              ordered->result(vals.get());
              for (int64_t j = 0; j < n; ++j) acc[j].v = vals[j];
            }
          }
          if constexpr (kSum) {
            if (!ordered) {
              lanes->flush(n);
              for (int64_t j = 0; j < n; ++j) acc[j].v = lanes->sums[j];
            }
          }
          if constexpr (IsWelford<Acc>::value) welford->into(acc.data(), n);
          const int64_t o0 = o * lanesInner + start;
          // The outputs of the tile's lanes: from `at`, `step` apart.
          const int64_t at = swap ? swap->outputIndex(o0) : o0, step = swap ? swap->inner : 1;
          for (int64_t j = 0; j < n; ++j) vals[j] = acc[j].get(count);
          if constexpr (kIndexed)
            for (int64_t j = 0; j < n; ++j) finish.indices[at + j * step] = acc[j].index();
          if (!swap) {
            fin(es ? &*es : nullptr, vals.get(), o0, n);
          } else {
            fin.to(staged.get(), es ? &*es : nullptr, vals.get(), o0, n);
            scatter(staged.get(), finish.out + at * finish.outSize, n, step, finish.outSize);
          }
        }
      });
      if (swap) gSwapped.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
  }
  if (rowSums) return false;

  // Horizontal: tiles run along the (linearised) reduced space. With few outputs, each output's
  // reduced space is split into parts whose partial accumulators are merged in order. NB: the
  // split does not depend on the thread count, so neither do the bits of a float sum.
  const int64_t tilesPerOut = std::max<int64_t>(1, (count + kTile - 1) / kTile);
  constexpr int64_t want = 64;  // work items: enough for 64 threads
  // (A sum in eager's order is one part: its partial sums do not merge.)
  const int64_t parts = numOut >= want || order || wholeRows ? 1 : std::min(tilesPerOut, (want + numOut - 1) / numOut);
  const int64_t tilesPerPart = (tilesPerOut + parts - 1) / parts;
  std::vector<Acc> partial(numOut * parts, proto);
  std::vector<char> constant(L);  // operands constant over the reduced space
  for (int i = 0; i < L; ++i) constant[i] = plan.reduced.constantFor(i);
  // Operands whose innermost reduced dim is contiguous are read in place where a tile stays in one
  // of its rows (a reduction over the last dim of a row-major operand), not copied.
  const int64_t innerReduced = plan.reduced.size.empty() ? 1 : plan.reduced.size.back();
  std::vector<char> inPlace(L);
  for (int i = 0; i < L; ++i)
    inPlace[i] = !constant[i] && !plan.reduced.size.empty() && plan.reduced.stride[i].back() == views[i].elemSize;
  std::vector<jit::Leaf> kinds(L);
  for (int i = 0; i < L; ++i) kinds[i] = constant[i] ? jit::Leaf::Uniform : jit::Leaf::Contiguous;
  const TileEvaluator eval(prog, kinds, TileEvaluator::Use::Folded);
  std::optional<VmlRoutine> rowExp, rowLog;
  if constexpr (kRowLse) {
    if (wholeRows) {
      rowExp = vmlRoutine(Op::Exp, c10::CppTypeToScalarType<T>::value);
      rowLog = vmlRoutine(Op::Log, c10::CppTypeToScalarType<T>::value);
      TORCH_INTERNAL_ASSERT(*rowExp && *rowLog, "tsfuse: logsumexp rows without eager's exp and log routines");
    }
  }
  at::parallel_for(0, numOut * parts, grainFor(std::min(count, tilesPerPart * kTile)), [&](int64_t b, int64_t e) {
    auto scratch = prog.makeScratch();
    std::vector<int64_t> base(L);
    std::optional<InnerSumLanes<OrderT>> fold;  // one lane: this output's sum
    std::vector<T> row;                         // wholeRows: this output's values
    if constexpr (kOrdered)
      if (order) fold.emplace(*order, 1);
    if constexpr (kOrdered || kRowLse)
      if (wholeRows) row.resize(count);
    const VmlSerialScope serialVml;  // (tiles' routine calls, a row's logsumexp: MKL's thread count set once)
    for (int64_t w = b; w < e; ++w) {
      const int64_t o = w / parts, part = w % parts;
      for (int i = 0; i < L; ++i) base[i] = plan.kept.offset(i, o);
      Acc acc = proto;
      if (fold) fold->reset(1);
      const int64_t first = part * tilesPerPart * kTile;
      const int64_t last = std::min(count, (part + 1) * tilesPerPart * kTile);
      for (int64_t start = first; start < last; start += kTile) {
        const int64_t n = std::min(kTile, last - start);
        for (int i = 0; i < L; ++i) {
          if (constant[i]) {
            scratch.uniformLeaf(i, views[i].data + base[i]);
          } else if (inPlace[i] && start % innerReduced + n <= innerReduced) {
            scratch.vectorLeaf(i, views[i].data + base[i] + plan.reduced.offset(i, start));
          } else {
            gatherInto(plan.reduced, i, views[i], base[i], start, n, scratch.buffer[i]);
            scratch.vectorLeaf(i, scratch.buffer[i]);
          }
        }
        const T* v = reinterpret_cast<const T*>(eval.value(scratch, n));
        if constexpr (kOrdered) {
          if (fold) {
            for (int64_t j = 0; j < n; ++j) fold->add(&v[j]);
            continue;
          }
        }
        if constexpr (kOrdered || kRowLse) {
          if (wholeRows) {
            std::memcpy(row.data() + start, v, n * sizeof(T));
            continue;
          }
        }
        if constexpr (FirstExtremum<Acc>::value) {
          // The tile's first extremum (the first NaN where there is one) is what the values, taken
          // one at a time, leave in the accumulator: two vector passes (row_extremum.h), or without
          // indices its value, mostly in one.
          if constexpr (std::is_same_v<Acc, ExtremumAcc<float, FirstExtremum<Acc>::kMax>>) {
            float best = 0;
            if (firstExtremumValue(v, n, FirstExtremum<Acc>::kMax, &best)) {
              acc.add(best, start);
              continue;
            }
          }
          int64_t k = 0;
          if (firstExtremumOfRows(v, 1, n, FirstExtremum<Acc>::kMax, &k)) {
            acc.add(v[k], start + k);
            continue;
          }
        }
        if constexpr (IsSumLike<Acc>::value) {
          if (!acc.inFloat) {
            acc.v = rules::sumStep(acc.v, tileSum(v, n));
            continue;
          }
        }
        for (int64_t j = 0; j < n; ++j) acc.add(v[j], start + j);
      }
      if constexpr (kOrdered) {
        if (fold) {
          T sum;
          fold->result(&sum);
          acc.v = sum;
        }
        if (wholeRows) acc.v = eagerRowSum(row.data(), count);
      }
      if constexpr (kRowLse) {
        if (wholeRows) {
          const auto [sum, max] = logsumexpOfRow(row.data(), count, *rowExp);
          acc.s = sum;
          acc.m = max;
        }
      }
      partial[w] = acc;
    }
  });
  const int64_t chunks = (numOut + kTile - 1) / kTile;
  at::parallel_for(0, chunks, grainFor(kTile), [&](int64_t b, int64_t e) {
    const VmlSerialScope serialVml;  // (the epilogue's routine calls)
    auto es = finish.scratch();
    std::unique_ptr<Out[]> vals(new Out[kTile]);
    for (int64_t c = b; c < e; ++c) {
      const int64_t o0 = c * kTile, n = std::min(kTile, numOut - o0);
      for (int64_t j = 0; j < n; ++j) {
        const int64_t o = o0 + j;
        Acc acc = partial[o * parts];
        for (int64_t p = 1; p < parts; ++p) acc.merge(partial[o * parts + p]);
        vals[j] = acc.get(count);
        if constexpr (kIndexed) finish.indices[o] = acc.index();
      }
      if constexpr (kRowLse) {
        if (wholeRows) {  // log(sum) + max, as eager's result.log_().add_(max)
          for (int64_t j = 0; j < n; ++j) vals[j] = static_cast<T>(partial[o0 + j].s);
          (*rowLog)(n, vals.get(), vals.get());
          for (int64_t j = 0; j < n; ++j) vals[j] = vals[j] + static_cast<T>(partial[o0 + j].m);
        }
      }
      finish(es ? &*es : nullptr, vals.get(), o0, n);
    }
  });
  return true;
}

// inFloat: rules::foldsInFloat holds for this call (sums, means and products of float32 values).
template <typename Acc>
Acc prototype(const ReduceSpec& r, bool inFloat) {
  using T = typename Acc::Value;
  if constexpr (std::is_same_v<Acc, NormAcc<T>>) {
    return Acc(r.p);
  } else if constexpr (std::is_same_v<Acc, WelfordAcc<T>>) {
    return Acc(r.correction, r.kind == Reduction::Std);
  } else if constexpr (std::is_same_v<T, float> && (IsSumLike<Acc>::value || std::is_same_v<Acc, ProdAcc<T>>)) {
    Acc acc;
    acc.inFloat = inFloat;
    return acc;
  } else {
    return Acc();
  }
}

// A 2-norm of floating values into its own dtype, with nothing after it in the call (no epilogue,
// no row sums): it runs as a sum of squares, then a square root.
bool twoNormAsSum(const ReduceSpec& r, const Analysis& an, const RowSums* rowSums) {
  const bool floating = an.reducedDtype == c10::ScalarType::Float || an.reducedDtype == c10::ScalarType::Double;
  return r.kind == Reduction::Norm && r.p == 2.0 && floating && an.outDtype == an.reducedDtype && !r.epilogue &&
         !rowSums;
}

// runReduce, or runReduceRowSums where rowSums is set: false where that declines.
bool reduceInto(TileProgram& prog, const Expr& e, at::TensorList operands, const ReduceSpec& reduce, const Analysis& an,
                const IterationPlan& plan, Outputs& outs, const RowSums* rowSums, std::string* why) {
  const Reduction kind = reduce.kind;
  // These reduce the value converted to their result dtype (sum/mean/prod/norm's dtype argument,
  // logsumexp's float for integers).
  if (kind == Reduction::Sum || kind == Reduction::Mean || kind == Reduction::Prod || kind == Reduction::Logsumexp ||
      kind == Reduction::Norm)
    prog.castResultTo(an.reducedDtype);
  Finisher finish;
  finish.out = rowSums ? nullptr : static_cast<char*>(outs[0].data_ptr());
  finish.outSize = c10::elementSize(an.outDtype);
  finish.reducedSize = c10::elementSize(an.reducedDtype);
  if (reduce.withIndices()) {
    outs.push_back(an.allocIndices(c10::kCPU));
    finish.indices = outs[1].data_ptr<int64_t>();
  }
  std::optional<TileProgram> epilogue;
  if (reduce.epilogue) {
    // The reduced value is the epilogue's leaf 0: only its dtype matters for lowering.
    std::vector<at::Tensor> leaves{at::empty({0}, at::TensorOptions().dtype(an.reducedDtype))};
    const at::TensorList epiOps = epilogueOperands(e, operands);
    leaves.insert(leaves.end(), epiOps.begin(), epiOps.end());
    std::string epiWhy;
    epilogue = TileProgram::lower(*reduce.epilogue, *an.epilogue, leaves, &epiWhy);
    if (!epilogue) {
      if (why) *why = "epilogue: " + epiWhy;
      return false;
    }
    finish.epilogue = &*epilogue;
    finish.resultInPlace = epilogue->resultWrittenLast() && epilogue->slotType[epilogue->result] == an.outDtype;
    finish.views = &plan.epilogueViews;
    finish.space = &plan.epilogueSpace;
  }
  std::optional<jit::SegmentedProgram> epilogueSegments;
  finish = finish.withSegments(&epilogueSegments);
  const auto [dimsAboveOne, innermost] = reducedRowsOf(plan.shape, plan.reducedDims, an.valueOrder);
  const bool inFloat =
      rules::foldsInFloat(an.reducedDtype == c10::ScalarType::Float, plan.reduced.numel(), dimsAboveOne, innermost);
  std::optional<InnerSumOrder> order;
  if (kind == Reduction::Sum || kind == Reduction::Mean)
    order = eagerInnerSumOrder(an.reducedDtype, plan.reduced.numel(), dimsAboveOne, innermost);
  const bool wholeRows =
      (kind == Reduction::Sum ? !order : kind == Reduction::Logsumexp && logsumexpRoutines(an.reducedDtype)) &&
      !rowSums && foldsWholeRows(an.reducedDtype, plan.reduced.numel(), plan.kept.numel(), dimsAboveOne, innermost);
  // A 2-norm: the square root of the sum of squares, the sum in the compiled kernels (a float norm
  // is within the summation-order tolerance, not eager's bits: docs/exactness.md), the root over
  // the output.
  const bool twoNorm = twoNormAsSum(reduce, an, rowSums);
  ReduceSpec spec = reduce;
  if (twoNorm) {
    spec.kind = Reduction::Sum;
    prog.squareResult();
  }
  bool ran = false;
  dispatchAccumulator(spec.kind, prog.slotType[prog.result], [&](auto accTag) {
    using Acc = typename decltype(accTag)::type;
    ran = runReduceTyped<Acc>(prog, plan, prototype<Acc>(spec, inFloat), finish, order, wholeRows, rowSums);
  });
  if (ran && twoNorm) outs[0].sqrt_();
  if (!ran && why) *why = "no compiled vertical kernel for its value";
  return ran;
}

// The most bytes an operand copied by relaidForLanes may take: the copies are a call's scratch.
constexpr int64_t kRelayoutMaxBytes = int64_t(1) << 20;

// The dim of plan.shape the reduction's tiles will run their lanes along, as runReduceTyped picks
// it: vertical tiles along the output's innermost dim, or the one outside it where that is short
// and a compiled kernel folds them; horizontal tiles, and the vertical ones whose lanes would be
// few (narrowLanes) with no compiled kernel, along the reduced space's innermost dim. -1: none.
// (A compiled kernel may still decline: then only the copy is wasted.)
int64_t laneDimOf(const TileProgram& prog, const IterationPlan& plan, const ReduceSpec& reduce) {
  bool orderFree = false, compiledKind = false;
  dispatchAccumulator(reduce.kind, prog.slotType[prog.result], [&](auto tag) {
    using Acc = typename decltype(tag)::type;
    orderFree = OrderFree<Acc>::value;
    compiledKind = IsSumLike<Acc>::value || FirstExtremum<Acc>::value;
  });
  const bool compiles =
      compiledKind && jit::enabled() &&
      std::all_of(prog.code.begin(), prog.code.end(), [](const lower::Instr& li) { return primHas(li.op, kJit); });
  const size_t kd = plan.keptOrder.size();
  if (isVertical(plan, orderFree) && (compiles || !narrowLanes(plan, plan.reduced.numel())))
    return compiles && swapsLanes(plan) ? plan.keptOrder[kd - 2] : plan.keptOrder.back();
  return plan.reducedOrder.empty() ? -1 : plan.reducedOrder.back();
}

// The call's operands, each one the tiles would gather along their lanes (the gradient of [N, D]
// points summed over [M, D] others reads the others down their columns) copied once with the lanes'
// dim innermost in memory, where the copy is small beside the values read from it (at most 1/8 of
// the broadcast space, and kRelayoutMaxBytes). Empty where no operand is copied. The values, and
// so every result bit, are the same: only where the tiles find them changes.
std::vector<at::Tensor> relaidForLanes(const TileProgram& prog, const Expr& e, at::TensorList operands,
                                       const ReduceSpec& reduce, const IterationPlan& plan) {
  if (plan.unsupported) return {};
  const int64_t lane = laneDimOf(prog, plan, reduce);
  if (lane < 0) return {};
  const auto R = static_cast<int64_t>(plan.shape.size());
  std::vector<at::Tensor> out;
  for (int i = 0; i < e.numInputs; ++i) {
    const at::Tensor& t = operands[i];
    const int64_t stride = plan.views[i].stride[lane];
    if (stride == 0 || stride == plan.views[i].elemSize || t.numel() * 8 > plan.numel() ||
        static_cast<int64_t>(t.nbytes()) > kRelayoutMaxBytes)
      continue;
    if (out.empty()) out = operands.vec();
    const int64_t k = lane - (R - t.dim());
    out[i] = t.movedim(k, -1).contiguous().movedim(-1, k);
    gRelaid.fetch_add(1, std::memory_order_relaxed);
  }
  return out;
}

}  // namespace

bool reducesInEagerOrder(const ReduceSpec& reduce, const Analysis& an) {
  const bool lse = reduce.kind == Reduction::Logsumexp;
  // A sum's epilogue runs over the folded values as eager's ops run over its sum; a logsumexp's
  // takes its steps (fused_call.cpp, logsumexpInEagerSteps) with the epilogue after them.
  if (!(reduce.kind == Reduction::Sum || lse) || (lse && reduce.epilogue)) return false;
  if (lse && (an.resultType.back() != an.reducedDtype || !logsumexpRoutines(an.reducedDtype))) return false;
  const auto rank = static_cast<int64_t>(an.valueShape.size());
  if (rank == 0 || an.valueShape != an.shape || static_cast<int64_t>(an.valueOrder.size()) != rank) return false;
  const std::vector<int64_t> reduced = reducedDims(reduce, rank);
  int64_t count = 1;
  for (int64_t d : reduced) count *= an.valueShape[d];
  if (count == 0) return false;
  const auto [dimsAboveOne, innermost] = reducedRowsOf(an.valueShape, reduced, an.valueOrder);
  return (!lse && eagerInnerSumOrder(an.reducedDtype, count, dimsAboveOne, innermost)) ||
         foldsWholeRows(an.reducedDtype, count, an.valueNumel() / count, dimsAboveOne, innermost);
}

int64_t swappedLaneReductions() { return gSwapped.load(std::memory_order_relaxed); }
int64_t relaidOperands() { return gRelaid.load(std::memory_order_relaxed); }

Outputs runReduce(TileProgram& prog, const Expr& e, at::TensorList operands, const ReduceSpec& reduce,
                  const Analysis& an, const IterationPlan& plan, const at::Tensor& out, std::string* why) {
  Outputs outs{out};
  const std::vector<at::Tensor> relaid = relaidForLanes(prog, e, operands, reduce, plan);
  std::optional<IterationPlan> replanned;
  if (!relaid.empty()) replanned = IterationPlan::make(e, relaid, &reduce, an, /*bindData=*/true);
  if (!reduceInto(prog, e, replanned ? relaid : operands.vec(), reduce, an, replanned ? *replanned : plan, outs,
                  nullptr, why))
    return {};
  return outs;
}

bool runReduceRowSums(TileProgram& prog, const Expr& e, at::TensorList operands, const ReduceSpec& reduce,
                      const Analysis& an, const IterationPlan& plan, at::Tensor& sums, std::string* why) {
  const int64_t length = plan.kept.size.empty() ? 0 : plan.kept.size.back();
  // What the caller (chain.cpp, foldedRowSums) decides on eager's terms: no indices, float32 rows
  // of a row-major value, one contiguous float32 sum per row.
  TORCH_INTERNAL_ASSERT(!reduce.withIndices() && an.outDtype == c10::ScalarType::Float && !an.outSizes.empty() &&
                            c10::_compute_contiguous<int64_t>(an.outSizes, an.outStrides, an.outNumel()) &&
                            sums.scalar_type() == c10::ScalarType::Float && sums.is_contiguous() &&
                            sums.numel() * an.outSizes.back() == an.outNumel(),
                        "tsfuse: row sums of a value that is not row-major float32 rows");
  if (length != an.outSizes.back()) {
    if (why) *why = "the lanes do not run along whole rows of the output's last dim";
    return false;
  }
  RowSums rows{sums.mutable_data_ptr<float>(), length};
  Outputs outs{sums};
  return reduceInto(prog, e, operands, reduce, an, plan, outs, &rows, why);
}

}  // namespace tsfuse::cpu
