// The CPU map driver (tsfuse::pairwise): tiles of the broadcast space, in the output's memory
// order, each evaluated (tile_eval.h) and written to the output.
#include "kernels/backends/cpu/drivers.h"
#include "kernels/backends/cpu/gather.h"
#include "kernels/backends/cpu/tile_eval.h"

#include <ATen/Parallel.h>

#include <cstring>

namespace tsfuse::cpu {
namespace {

// Rows of at least this many elements are tiled row by row (tiles never cross a row), so that
// operands can be read in place or from a packed row, and one constant along a row is one value;
// shorter rows use linear tiles, which gather every operand that is not one value for the whole
// space. Below it, a tile per row costs more than the gathers save, compiled or not: an
// [E, 20] basis expansion ran 200,000 row tiles a call, 5x eager's time, where linear tiles run at
// eager's. The interpreter also needs long rows for its bits: an ATen op on the tile (pow, exp)
// computes a row's last elements in ATen's scalar loop where eager's vector loop computed them, so
// tiles of a short row would move its bits off eager's (within the 1 ulp docs/ops.md allows, but
// linear tiles of kTile elements, aligned as eager's vectors are, keep them).
constexpr int64_t kMinRowTile = 128;

// How map tiles read each operand: as one value where uniform(i), else as contiguous elements.
template <typename Uniform>
std::vector<jit::Leaf> leafKinds(const TileProgram& p, Uniform uniform) {
  std::vector<jit::Leaf> leaves(p.numLeaves);
  for (int i = 0; i < p.numLeaves; ++i) leaves[i] = uniform(i) ? jit::Leaf::Uniform : jit::Leaf::Contiguous;
  return leaves;
}

// The period of operand i's values along the linear index of `space`: the extent of the
// innermost dims from the outermost one it moves along (size-1 dims do not count); the whole
// space where it moves along the outermost dim.
int64_t periodOf(const SubSpace& space, int i) {
  size_t first = 0;
  while (first < space.size.size() && (space.size[first] == 1 || space.stride[i][first] == 0)) ++first;
  int64_t period = 1;
  for (size_t j = first; j < space.size.size(); ++j) period *= space.size[j];
  return period;
}

// An operand broadcast along every dim outside a short inner block (an anchor's width beside
// every box, wh2[None] over wh1's rows), whose values repeat with the block's period P <= kTile:
// its values for linear indices [0, P + kTile) gathered once per call, which every tile reads in
// place from its start modulo P, instead of a gather per tile (a row at a time, short runs).
struct Periodic {
  int64_t period = 0;  // 0: not periodic
  ScratchBuffer values;
};

Periodic periodicValues(const SubSpace& space, int i, const BroadcastView& v) {
  Periodic p;
  const int64_t period = periodOf(space, i);
  if (period > kTile || period >= space.numel()) return p;
  p.period = period;
  const int64_t length = period + kTile;
  p.values = ScratchBuffer(length * v.elemSize + 64);  // (a masked tail's whole-vector load)
  char* d = p.values.data();
  gatherInto(space, static_cast<size_t>(i), v, 0, 0, period, d);
  for (int64_t have = period; have < length;) {  // doubling copies of the first period
    const int64_t more = std::min(have, length - have);
    std::memcpy(d + have * v.elemSize, d, more * v.elemSize);
    have += more;
  }
  return p;
}

// Tiles of kTile consecutive elements of the whole space (its rows are short).
void runLinearTiles(const TileProgram& prog, const IterationPlan& plan, at::Tensor& out) {
  const SubSpace& space = plan.merged;
  const auto& views = plan.views;
  const int L = prog.numLeaves;
  const int64_t numel = out.numel(), esz = out.element_size();
  char* outData = static_cast<char*>(out.data_ptr());
  // An operand with no stride at all (a 0-dim tensor, or broadcast along every dim) is one value.
  std::vector<char> constant(L);
  std::vector<Periodic> periodic(L);
  for (int i = 0; i < L; ++i) {
    constant[i] = space.constantFor(i);
    if (!constant[i]) periodic[i] = periodicValues(space, i, views[i]);
  }
  const TileEvaluator eval(prog, leafKinds(prog, [&](int i) { return constant[i] != 0; }), TileEvaluator::Use::Output);
  const int64_t ntiles = (numel + kTile - 1) / kTile;
  at::parallel_for(0, ntiles, std::max<int64_t>(1, 16384 / kTile), [&](int64_t b, int64_t e) {
    auto scratch = prog.makeScratch();
    TileWriter writer(eval, outData, esz);
    for (int64_t t = b; t < e; ++t) {
      const int64_t start = t * kTile, n = std::min(kTile, numel - start);
      for (int i = 0; i < L; ++i) {
        if (constant[i]) {
          scratch.uniformLeaf(i, views[i].data);
        } else if (periodic[i].period) {
          scratch.vectorLeaf(i, periodic[i].values.data() + start % periodic[i].period * views[i].elemSize);
        } else {
          gatherInto(space, i, views[i], 0, start, n, scratch.buffer[i]);
          scratch.vectorLeaf(i, scratch.buffer[i]);
        }
      }
      writer.write(scratch, n, start);
    }
    writer.flush();
  });
}

// Row tiles: row r, elements [start, start + n) of the innermost dim; each operand read as the
// plan classifies it along that dim.
void runRowTiles(const TileProgram& prog, const IterationPlan& plan, at::Tensor& out, const TileEvaluator& eval) {
  const SubSpace& space = plan.merged;
  const auto& views = plan.views;
  const auto& access = plan.mergedAccess;
  const int L = prog.numLeaves;
  const int64_t numel = out.numel(), esz = out.element_size();
  char* outData = static_cast<char*>(out.data_ptr());
  const int64_t inner = space.size.back();
  const int64_t rows = numel / inner, tilesPerRow = (inner + kTile - 1) / kTile;
  std::vector<ScratchBuffer> packed(L);
  for (int i = 0; i < L; ++i) {
    if (access[i] != Access::Packed) continue;
    packed[i] = ScratchBuffer(inner * views[i].elemSize);
    gather(views[i].data, views[i].elemSize, &inner, &space.stride[i].back(), 1, 0, inner, packed[i].data());
  }
  const SubSpace outer = space.outer();
  at::parallel_for(0, rows * tilesPerRow, std::max<int64_t>(1, 16384 / kTile), [&](int64_t b, int64_t e) {
    auto scratch = prog.makeScratch();
    TileWriter writer(eval, outData, esz);
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
        switch (access[i]) {
          case Access::Uniform:
            scratch.uniformLeaf(i, rowBase[i]);
            break;
          case Access::InPlace:
            scratch.vectorLeaf(i, rowBase[i] + start * s);
            break;
          case Access::Packed:
            scratch.vectorLeaf(i, packed[i].data() + start * views[i].elemSize);
            break;
          case Access::Gathered:
            gather(rowBase[i], views[i].elemSize, &inner, &s, 1, start, n, scratch.buffer[i]);
            scratch.vectorLeaf(i, scratch.buffer[i]);
            break;
        }
      }
      writer.write(scratch, n, r * inner + start);
    }
    writer.flush();
  });
}

}  // namespace

void runMap(const TileProgram& prog, const IterationPlan& plan, at::Tensor& out) {
  // The output is dense in the plan's order, so linear index i of the space is element i of its memory.
  const int64_t inner = plan.merged.size.empty() ? 0 : plan.merged.size.back();
  if (inner >= kMinRowTile) {
    const TileEvaluator eval(prog, leafKinds(prog, [&](int i) { return plan.mergedAccess[i] == Access::Uniform; }),
                             TileEvaluator::Use::Output);
    return runRowTiles(prog, plan, out, eval);
  }
  runLinearTiles(prog, plan, out);
}

}  // namespace tsfuse::cpu
