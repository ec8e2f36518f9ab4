// Native CPU evaluation of tsfuse::pairwise / tsfuse::reduce: tiles of the broadcast iteration
// space are gathered from the operands, run through the TileProgram and written (map) or folded
// into accumulators (reduce). Nothing of the broadcast shape's size is ever allocated.
#include "kernels/cpu/native.h"

#include "kernels/cpu/accumulators.h"
#include "kernels/cpu/gather.h"
#include "kernels/cpu/jit.h"
#include "kernels/cpu/reduce_parts.h"
#include "kernels/cpu/tile_program.h"

#include <ATen/Parallel.h>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include <cstring>
#include <memory>
#include <numeric>
#include <optional>
#include <type_traits>

namespace tsfuse::cpu {
namespace {

using namespace reduce_parts;

// Dims of `t` (a dense tensor) ordered outermost-first in memory, size-1 dims dropped. Returns
// false when `t` is not a dense permutation of its shape.
bool memoryOrder(const at::Tensor& t, const std::vector<int64_t>& dims, std::vector<int64_t>& order) {
  order.clear();
  for (int64_t d : dims)
    if (t.size(d) != 1) order.push_back(d);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t x, int64_t y) { return t.stride(x) > t.stride(y); });
  int64_t expect = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (t.stride(*it) != expect) return false;
    expect *= t.size(*it);
  }
  return true;
}

// Backs a large output with transparent huge pages before the tiles write it (THP in "madvise"
// mode, the common default): one page fault per 2 MiB instead of per 4 KiB. The huge pages are
// faulted in here, one thread, one byte each: measured on the seed intersection (57 MiB output,
// 2 threads), concurrent huge-page faults from the parallel tiles took 68 ms, this 16 ms (4 KiB
// pages: 28 ms). The output is written in full anyway, so resident memory is the same; only its
// 2 MiB-aligned interior is advised. A no-op where unsupported or refused.
void adviseHugePages(const at::Tensor& t) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr uintptr_t kHuge = uintptr_t(2) << 20;
  const size_t bytes = t.nbytes();
  if (bytes < 2 * kHuge) return;
  const auto begin = reinterpret_cast<uintptr_t>(t.data_ptr());
  const uintptr_t first = (begin + kHuge - 1) & ~(kHuge - 1), last = (begin + bytes) & ~(kHuge - 1);
  if (last <= first || madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE) != 0) return;
  for (uintptr_t p = first; p < last; p += kHuge) *reinterpret_cast<volatile char*>(p) = 0;
#else
  (void)t;
#endif
}

std::vector<int64_t> iota(int64_t n) {
  std::vector<int64_t> v(n);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

// Where one operand's tile comes from in the map path.
enum class LeafSource : uint8_t {
  Uniform,  // constant along the row: the slot points at its one element (no copies)
  InPlace,  // contiguous along the tile: the slot points into the operand
  Packed,   // varies along the inner dim only: its row is packed once, the slot points into it
  Gather,   // copied (strided / broadcast) into the slot's buffer
};

// Rows of at least this many elements are tiled row by row (tiles never cross a row), so that
// operands can be read in place or from a packed row; shorter rows use linear tiles.
constexpr int64_t kMinRowTile = 128;

void runMap(const TileProgram& prog, const std::vector<BroadcastView>& views, at::IntArrayRef shape,
            const std::vector<int64_t>& order, at::Tensor& out) {
  SubSpace space = SubSpace::select(views, shape, order);
  space.coalesce();
  const int64_t numel = out.numel();
  char* outData = static_cast<char*>(out.data_ptr());
  const int64_t esz = out.element_size();
  const int L = prog.numLeaves;
  // The output is dense in `order`, so linear index i of the space is element i of its memory.
  const bool resultInPlace = prog.resultWrittenLast() && prog.slotType[prog.result] == out.scalar_type();
  const int64_t inner = space.size.empty() ? 1 : space.size.back();

  // An operand with no stride at all (a 0-dim tensor, or broadcast along every dim) is one value.
  std::vector<char> constant(L);
  for (int i = 0; i < L; ++i) constant[i] = space.constantFor(i);
  // A compiled kernel runs the whole program per tile with its values in registers (jit.h), if one
  // applies: every operand reaches it as one value or as contiguous elements.
  auto compile = [&](auto uniform) {
    std::vector<jit::Leaf> leaves(L);
    for (int i = 0; i < L; ++i) leaves[i] = uniform(i) ? jit::Leaf::Uniform : jit::Leaf::Contiguous;
    return jit::CompiledMap::make(prog, out.scalar_type(), leaves);
  };

  if (space.size.empty() || inner < kMinRowTile) {
    const auto compiled = compile([&](int i) { return constant[i] != 0; });
    const int64_t ntiles = (numel + kTile - 1) / kTile;
    at::parallel_for(0, ntiles, std::max<int64_t>(1, 16384 / kTile), [&](int64_t b, int64_t e) {
      auto scratch = prog.makeScratch();
      for (int64_t t = b; t < e; ++t) {
        const int64_t start = t * kTile, n = std::min(kTile, numel - start);
        for (int i = 0; i < L; ++i) {
          if (constant[i]) {
            scratch.uniformLeaf(i, views[i].data);
          } else {
            space.gatherInto(i, views[i], 0, start, n, scratch.buffer[i]);
            scratch.vectorLeaf(i, scratch.buffer[i]);
          }
        }
        if (compiled) {
          compiled->run(scratch.slot.data(), n, outData + start * esz);
          continue;
        }
        if (resultInPlace) scratch.slot[prog.result] = outData + start * esz;
        const char* r = prog.run(scratch, n);
        if (!resultInPlace) std::memcpy(outData + start * esz, r, n * esz);
      }
    });
    return;
  }

  // Row tiles: row r, elements [start, start + n) of the inner dim.
  const int64_t rows = numel / inner, tilesPerRow = (inner + kTile - 1) / kTile;
  std::vector<LeafSource> source(L, LeafSource::Gather);
  std::vector<std::vector<char>> packed(L);
  for (int i = 0; i < L; ++i) {
    const auto& st = space.stride[i];
    const int64_t innerStride = st.back();
    const bool rowInvariant = std::all_of(st.begin(), st.end() - 1, [](int64_t x) { return x == 0; });
    if (innerStride == 0) {
      source[i] = LeafSource::Uniform;
    } else if (innerStride == views[i].elemSize) {
      source[i] = LeafSource::InPlace;
    } else if (innerStride != 0 && rowInvariant) {
      source[i] = LeafSource::Packed;
      packed[i].resize(inner * views[i].elemSize);
      gather(views[i].data, views[i].elemSize, &inner, &innerStride, 1, 0, inner, packed[i].data());
    }
  }
  SubSpace outer = space;
  outer.size.pop_back();
  for (auto& st : outer.stride) st.pop_back();
  const auto compiled = compile([&](int i) { return source[i] == LeafSource::Uniform; });
  at::parallel_for(0, rows * tilesPerRow, std::max<int64_t>(1, 16384 / kTile), [&](int64_t b, int64_t e) {
    auto scratch = prog.makeScratch();
    std::vector<const char*> rowBase(L);
    int64_t row = -1;
    for (int64_t w = b; w < e; ++w) {
      const int64_t r = w / tilesPerRow, start = (w % tilesPerRow) * kTile;
      const int64_t n = std::min(kTile, inner - start);
      if (r != row) {
        row = r;
        for (int i = 0; i < L; ++i) rowBase[i] = views[i].data + outer.offset(i, r);
      }
      for (int i = 0; i < L; ++i) {
        const int64_t s = space.stride[i].back();
        switch (source[i]) {
          case LeafSource::Uniform:
            scratch.uniformLeaf(i, rowBase[i]);
            break;
          case LeafSource::InPlace:
            scratch.vectorLeaf(i, rowBase[i] + start * s);
            break;
          case LeafSource::Packed:
            scratch.vectorLeaf(i, packed[i].data() + start * views[i].elemSize);
            break;
          case LeafSource::Gather:
            gather(rowBase[i], views[i].elemSize, &inner, &s, 1, start, n, scratch.buffer[i]);
            scratch.vectorLeaf(i, scratch.buffer[i]);
            break;
        }
      }
      char* dst = outData + (r * inner + start) * esz;
      if (compiled) {
        compiled->run(scratch.slot.data(), n, dst);
        continue;
      }
      if (resultInPlace) scratch.slot[prog.result] = dst;
      const char* res = prog.run(scratch, n);
      if (!resultInPlace) std::memcpy(dst, res, n * esz);
    }
  });
}


template <typename Acc>
void runReduceTyped(const TileProgram& prog, const std::vector<BroadcastView>& views,
                    const ReducePlan& plan, const Acc& proto, const Finisher& finish) {
  using T = typename Acc::Value;
  using Out = typename Acc::Out;
  constexpr bool kIndexed = std::is_base_of_v<IndexedTag, Acc>;
  const int64_t numOut = plan.kept.numel();
  const int64_t count = plan.reduced.numel();
  const int L = prog.numLeaves;
  TORCH_INTERNAL_ASSERT(static_cast<int64_t>(sizeof(Out)) == finish.reducedSize,
                        "tsfuse: native reduction writes ", sizeof(Out), "-byte values to a ",
                        finish.reducedSize, "-byte dtype");

  if (plan.vertical) {
    // Tiles run along the innermost output dim; the reduced space is walked once per tile, so
    // each lane accumulates one output element in order.
    const int64_t inner = plan.kept.size.back();
    const int64_t tilesPerRow = (inner + kTile - 1) / kTile;
    SubSpace outer = plan.kept;
    outer.size.pop_back();
    for (auto& st : outer.stride) st.pop_back();
    const int64_t work = outer.numel() * tilesPerRow;
    // Sums read the value before the program's final cast when that cast cannot change it.
    constexpr bool kSum = IsSumLike<Acc>::value;
    const size_t prefix = kSum ? sumPrefix(prog) : prog.code.size();
    const int source = prefix == prog.code.size() ? prog.result : prog.code[prefix].a;
    // A compiled kernel sums the tile with its values in registers (jit.h), if one applies.
    if constexpr (kSum) {
      auto compiled = jit::VerticalSum::make(prog, prefix, source, std::is_floating_point_v<Wide<T>>, views,
                                             plan.kept, plan.reduced);
      if (compiled) return runCompiledVerticalSum(*compiled, plan, outer, count, proto, finish);
    }
    at::parallel_for(0, work, 1, [&](int64_t b, int64_t e) {
      auto scratch = prog.makeScratch();
      auto es = finish.scratch();
      std::vector<Acc> acc(kTile, proto);
      std::optional<SumLanes<Wide<T>>> lanes;
      if constexpr (kSum) lanes.emplace(prog.slotType[source]);
      std::unique_ptr<Out[]> vals(new Out[kTile]);
      std::vector<int64_t> base(L);
      for (int64_t w = b; w < e; ++w) {
        const int64_t o = w / tilesPerRow, start = (w % tilesPerRow) * kTile;
        const int64_t n = std::min(kTile, inner - start);
        if constexpr (kSum) lanes->reset(n);
        else std::fill(acc.begin(), acc.begin() + n, proto);
        for (int i = 0; i < L; ++i) base[i] = outer.offset(i, o) + start * plan.kept.stride[i].back();
        for (int64_t r = 0; r < count; ++r) {
          for (int i = 0; i < L; ++i) {
            const char* p = views[i].data + base[i] + plan.reduced.offset(i, r);
            const int64_t s = plan.kept.stride[i].back();
            if (s == 0) {  // the same element for the whole tile
              scratch.uniformLeaf(i, p);
            } else if (s == views[i].elemSize) {  // contiguous along the tile: read in place
              scratch.vectorLeaf(i, p);
            } else {
              gather(p, views[i].elemSize, &inner, &s, 1, 0, n, scratch.buffer[i]);
              scratch.vectorLeaf(i, scratch.buffer[i]);
            }
          }
          if constexpr (kSum) {
            prog.runPrefix(scratch, n, prefix);
            lanes->add(prog.vectorOf(scratch, source, n), n);
          } else {
            const T* v = reinterpret_cast<const T*>(prog.run(scratch, n));
            for (int64_t j = 0; j < n; ++j) acc[j].add(v[j], r);
          }
        }
        if constexpr (kSum) {
          lanes->flush(n);
          for (int64_t j = 0; j < n; ++j) acc[j].v = lanes->sums[j];
        }
        const int64_t o0 = o * inner + start;
        for (int64_t j = 0; j < n; ++j) vals[j] = acc[j].get(count);
        if constexpr (kIndexed)
          for (int64_t j = 0; j < n; ++j) finish.indices[o0 + j] = acc[j].index();
        finish(es ? &*es : nullptr, vals.get(), o0, n);
      }
    });
    return;
  }

  // Horizontal: tiles run along the (linearised) reduced space. With few outputs, each output's
  // reduced space is split into parts whose partial accumulators are merged in order. NB: the
  // split does not depend on the thread count, so neither do the bits of a float sum.
  const int64_t tilesPerOut = std::max<int64_t>(1, (count + kTile - 1) / kTile);
  constexpr int64_t want = 64;  // work items: enough for 64 threads
  const int64_t parts = numOut >= want ? 1 : std::min(tilesPerOut, (want + numOut - 1) / numOut);
  const int64_t tilesPerPart = (tilesPerOut + parts - 1) / parts;
  std::vector<Acc> partial(numOut * parts, proto);
  std::vector<char> constant(L);  // operands constant over the reduced space
  for (int i = 0; i < L; ++i) constant[i] = plan.reduced.constantFor(i);
  at::parallel_for(0, numOut * parts, 1, [&](int64_t b, int64_t e) {
    auto scratch = prog.makeScratch();
    std::vector<int64_t> base(L);
    for (int64_t w = b; w < e; ++w) {
      const int64_t o = w / parts, part = w % parts;
      for (int i = 0; i < L; ++i) base[i] = plan.kept.offset(i, o);
      Acc acc = proto;
      const int64_t first = part * tilesPerPart * kTile;
      const int64_t last = std::min(count, (part + 1) * tilesPerPart * kTile);
      for (int64_t start = first; start < last; start += kTile) {
        const int64_t n = std::min(kTile, last - start);
        for (int i = 0; i < L; ++i) {
          if (constant[i]) {
            scratch.uniformLeaf(i, views[i].data + base[i]);
          } else {
            plan.reduced.gatherInto(i, views[i], base[i], start, n, scratch.buffer[i]);
            scratch.vectorLeaf(i, scratch.buffer[i]);
          }
        }
        const T* v = reinterpret_cast<const T*>(prog.run(scratch, n));
        for (int64_t j = 0; j < n; ++j) acc.add(v[j], start + j);
      }
      partial[w] = acc;
    }
  });
  const int64_t chunks = (numOut + kTile - 1) / kTile;
  at::parallel_for(0, chunks, 1, [&](int64_t b, int64_t e) {
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
      finish(es ? &*es : nullptr, vals.get(), o0, n);
    }
  });
}

template <typename Acc>
Acc prototype(const ReduceSpec& r) {
  if constexpr (std::is_same_v<Acc, NormAcc<typename Acc::Value>>) return Acc(r.p);
  else return Acc();
}

}  // namespace

Outputs runNative(const Expr& e, at::TensorList operands, const ReduceSpec* reduce,
                  const Analysis& an, std::string* why) {
  auto no = [&](const std::string& reason) {
    if (why) *why = reason;
    return Outputs();
  };
  at::IntArrayRef shape(an.shape);
  if (static_cast<int64_t>(shape.size()) > kMaxDims) return no("rank above 25");
  if (an.valueShape != an.shape) return no("expression value is not the operands' broadcast");
  if (shape.empty()) return no("0-dim value");
  for (int i = 0; i < e.numInputs; ++i)
    if (!operands[i].device().is_cpu()) return no("operand not on the CPU");
  auto prog = TileProgram::lower(e, an, operands, why);
  if (!prog) return Outputs();

  std::vector<BroadcastView> views;
  for (int i = 0; i < e.numInputs; ++i) views.emplace_back(operands[i], shape);
  at::Tensor out = an.allocOut(c10::kCPU);
  adviseHugePages(out);
  const int64_t R = static_cast<int64_t>(shape.size());

  if (!reduce) {
    std::vector<int64_t> order;
    if (!memoryOrder(out, iota(R), order)) return no("output layout is not dense");
    runMap(*prog, views, shape, order, out);
    return {out};
  }

  std::vector<int64_t> rdims = reducedDims(*reduce, R), kdims;
  for (int64_t d = 0; d < R; ++d)
    if (!std::binary_search(rdims.begin(), rdims.end(), d)) kdims.push_back(d);
  at::Tensor keep = out;  // the output with the reduced dims present as size 1
  if (!reduce->keepdim)
    for (int64_t d : rdims) keep = keep.unsqueeze(d);
  std::vector<int64_t> order, rorder;
  if (!memoryOrder(keep, kdims, order)) return no("output layout is not dense");
  for (int64_t d : rdims)
    if (shape[d] != 1) rorder.push_back(d);
  ReducePlan plan{SubSpace::select(views, shape, order), SubSpace::select(views, shape, rorder)};
  plan.vertical = !order.empty() && shape[order.back()] >= 16;

  const Reduction kind = reduce->kind;
  // These reduce the value converted to their result dtype (sum/mean/prod/norm's dtype argument,
  // logsumexp's float for integers).
  if (kind == Reduction::Sum || kind == Reduction::Mean || kind == Reduction::Prod ||
      kind == Reduction::Logsumexp || kind == Reduction::Norm)
    prog->castResultTo(an.reducedDtype);
  Outputs outs{out};
  Finisher finish;
  finish.out = static_cast<char*>(out.data_ptr());
  finish.outSize = out.element_size();
  finish.reducedSize = c10::elementSize(an.reducedDtype);
  if (reduce->withIndices()) {
    outs.push_back(an.allocIndices(c10::kCPU));
    finish.indices = outs[1].data_ptr<int64_t>();
  }
  std::optional<TileProgram> epilogue;
  if (reduce->epilogue) {
    const Expr& epi = *reduce->epilogue;
    at::TensorList epiOps = epilogueOperands(e, operands);
    // The reduced value is the epilogue's leaf 0: only its dtype matters for lowering.
    std::vector<at::Tensor> leaves{at::empty({0}, at::TensorOptions().dtype(an.reducedDtype))};
    leaves.insert(leaves.end(), epiOps.begin(), epiOps.end());
    std::string epiWhy;
    epilogue = TileProgram::lower(epi, *an.epilogue, leaves, &epiWhy);
    if (!epilogue) return no("epilogue: " + epiWhy);
    std::vector<int64_t> outOrder;
    if (!memoryOrder(out, iota(out.dim()), outOrder)) return no("output layout is not dense");
    for (const auto& t : epiOps) finish.views.emplace_back(t, out.sizes());
    finish.space = SubSpace::select(finish.views, out.sizes(), outOrder);
    finish.epilogue = &*epilogue;
  }
  dispatchAccumulator(kind, prog->slotType[prog->result], [&](auto accTag) {
    using Acc = typename decltype(accTag)::type;
    runReduceTyped<Acc>(*prog, views, plan, prototype<Acc>(*reduce), finish);
  });
  return outs;
}

}  // namespace tsfuse::cpu
