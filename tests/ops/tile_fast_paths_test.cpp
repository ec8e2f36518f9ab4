// The tile evaluator's fast paths against eager:
//  * uniform leaves: an operand constant along a tile is read as one value (0-dim and fully
//    broadcast operands in linear tiles, [N, 1] columns in row tiles, the shared leading dim of a
//    vertical reduction, operands constant over a horizontal reduction);
//  * periodic leaves: linear tiles read an operand whose values repeat along them in place;
//  * values computed once from uniform operands (a result that is uniform is expanded, also when
//    it is written in place into the output), `where` and ATen tile ops on uniform operands;
//  * the vertical sum: the program's final widening cast folded into the accumulation, and bools
//    counted in byte lanes flushed every 255 rows.
// The same tests run with TSFUSE_CPU_ISA=baseline (ctest tsfuse_row_tiles_sse2).
#include "test_util.h"

#include <ATen/Parallel.h>

namespace ops_tile_fast_paths_test {

namespace {

using namespace tsfuse_test;
using T = std::vector<at::Tensor>;

int specialsFor(at::ScalarType dt) { return at::isFloatingType(dt) ? kNaNInf : 0; }

TEST(TileFastPaths, UniformOperandsInEveryMapTiling) {
  Gen g(5);
  const char* expr = "v1: sub($0, $1); mul(%0, $2); maximum(%1, $1)";
  auto eager = [](const T& o) { return at::maximum((o[0] - o[1]) * o[2], o[1]); };
  for (at::ScalarType dt : {at::kFloat, at::kDouble, at::kInt, at::kLong}) {
    const int sp = specialsFor(dt);
    // Linear tiles (short rows): a 0-dim operand and a [1, 1] one are constant everywhere.
    EXPECT_TRUE(checkPairwise(expr, {g.tensor({7, 9}, dt, sp), g.tensor({}, dt, sp), g.tensor({1, 1}, dt, sp)}, eager));
    // Row tiles (rows >= 128): a [N, 1] column is constant along each row, in first or later place.
    for (int64_t m : {128, 700, 1025}) {
      EXPECT_TRUE(
          checkPairwise(expr, {g.tensor({3, 1}, dt, sp), g.tensor({3, m}, dt, sp), g.tensor({}, dt, sp)}, eager));
      EXPECT_TRUE(
          checkPairwise(expr, {g.tensor({1, m}, dt, sp), g.tensor({5, 1}, dt, sp), g.tensor({5, 1}, dt, sp)}, eager));
    }
  }
}

// Linear tiles (rows shorter than a row tile) read an operand broadcast along every dim outside a
// block of at most kTile values (an anchor's [1, 9] beside [N, 1] boxes) in place from its values
// gathered once, at the tile's start modulo the block: periods that do not divide the tile, a
// block of two dims (one of them broadcast within it), a transposed block, a block of exactly
// kTile values, one just over (gathered per tile), and bool and integer operands.
TEST(TileFastPaths, PeriodicOperandsInLinearTiles) {
  Gen g(9);
  const char* expr = "v1: sub($0, $1); mul(%0, $2)";
  auto eager = [](const T& o) { return (o[0] - o[1]) * o[2]; };
  for (at::ScalarType dt : {at::kFloat, at::kLong}) {
    const int sp = specialsFor(dt);
    EXPECT_TRUE(checkPairwise(expr, {g.tensor({300, 1}, dt, sp), g.tensor({1, 9}, dt, sp), g.tensor({9}, dt)}, eager));
    EXPECT_TRUE(checkPairwise(
        expr, {g.tensor({70, 3, 5}, dt, sp), g.tensor({1, 3, 5}, dt, sp), g.tensor({1, 3, 1}, dt)}, eager));
    EXPECT_TRUE(checkPairwise(
        expr, {g.tensor({70, 1, 5}, dt, sp), g.tensor({5, 3}, dt, sp).t().unsqueeze(0), g.tensor({3, 1}, dt)}, eager));
    EXPECT_TRUE(checkPairwise(expr, {g.tensor({1000, 1}, dt, sp), g.tensor({100}, dt, sp), g.tensor({}, dt)}, eager));
    for (int64_t rows : {8, 9})  // a block of 512 values, then 576
      EXPECT_TRUE(checkPairwise(
          expr, {g.tensor({21, 1, 64}, dt, sp), g.tensor({rows, 64}, dt, sp), g.tensor({1, rows, 1}, dt)}, eager));
  }
  const char* masked = "v1: logical_and($0, $1); where(%0, $2, 0.5)";
  auto maskedEager = [](const T& o) { return at::where(at::logical_and(o[0], o[1]), o[2], 0.5); };
  EXPECT_TRUE(checkPairwise(
      masked, {g.tensor({333, 1}, at::kBool), g.tensor({1, 7}, at::kBool), g.tensor({7}, at::kFloat, kNaNInf)},
      maskedEager));
}

TEST(TileFastPaths, ResultComputedOnceFromUniformOperands) {
  Gen g(6);
  // Every operand constant: the value is computed once and expanded into the whole output.
  const char* expr = "v1: add($0, $1); mul(%0, 3)";
  auto eager = [](const T& o) { return (o[0] + o[1]) * 3; };
  for (at::ScalarType dt : {at::kFloat, at::kInt, at::kBool})
    for (auto shapes : std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>{
             {{}, {1, 1}}, {{1}, {1, 1, 1}}, {{1, 1}, {}}})
      EXPECT_TRUE(checkPairwise(expr, {g.tensor(shapes.first, dt), g.tensor(shapes.second, dt)}, eager));
  // A uniform comparison feeding where() next to a varying operand (mixed uniform/vector slots).
  const char* sel = "v1: gt($0, $1); where(%0, $0, $2)";
  auto selEager = [](const T& o) { return at::where(o[0] > o[1], o[0], o[2]); };
  for (int64_t m : {9, 300})
    EXPECT_TRUE(checkPairwise(
        sel, {g.tensor({4, 1}, at::kFloat, kNaNInf), g.tensor({}, at::kFloat), g.tensor({4, m}, at::kFloat, kNaNInf)},
        selEager));
}

TEST(TileFastPaths, AtenTileOpsSeeVectorsEvenForUniformOperands) {
  Gen g(7);
  // exp of a [N, 1] column is uniform along each row; it still runs on the whole tile, so it is
  // eager's vectorized kernel (eager computes exp over the N-element column with it too).
  const char* expr = "v1: exp($0); add(%0, $1)";
  auto eager = [](const T& o) { return at::exp(o[0]) + o[1]; };
  CheckOpts o;
  o.exact = false;  // eager's scalar tail loop may differ from its vector loop by 1 ulp
  o.rtol = 3e-7;
  o.atol = 0;
  for (int64_t m : {16, 600})
    EXPECT_TRUE(checkPairwise(expr, {g.tensor({64, 1}, at::kFloat), g.tensor({1, m}, at::kFloat)}, eager, o));
}

TEST(TileFastPaths, ReductionsWithUniformOperands) {
  Gen g(8);
  // Vertical (innermost kept dim >= 16): x[r, i] is one value along the tile of j.
  const char* sim = "v1: sub($0, $1); abs(%0); lt(%1, 1)";
  auto simEager = [](const T& o) { return (o[0] - o[1]).abs().lt(1); };
  for (at::ScalarType dt : {at::kFloat, at::kDouble, at::kInt})
    for (int64_t n : {16, 513})
      EXPECT_TRUE(checkReduce(sim, {g.tensor({6, 5, 1}, dt), g.tensor({6, 1, n}, dt)}, simEager,
                              {"sum", std::vector<int64_t>{0}}));
  // Horizontal (few outputs): a [M, 1] operand is constant over the reduced dim.
  const char* mul = "v1: mul($0, $1)";
  auto mulEager = [](const T& o) { return o[0] * o[1]; };
  for (const char* red : {"sum", "amax", "argmin", "prod"})
    EXPECT_TRUE(checkReduce(mul, {g.tensor({5, 1}, at::kDouble), g.tensor({5, 700}, at::kDouble)}, mulEager,
                            {red, std::vector<int64_t>{-1}}, CheckOpts{false}));
}

TEST(TileFastPaths, VerticalCountsAcrossByteCounterFlushes) {
  Gen g(9);
  const char* expr = "v1: sub($0, $1); abs(%0); lt(%1, 1)";
  auto eager = [](const T& o) { return (o[0] - o[1]).abs().lt(1); };
  // Rows around the flush period (255): the byte counters never wrap.
  for (int64_t rows : {1, 254, 255, 256, 510, 511, 777}) {
    // All true: every counter reaches its maximum between flushes.
    T same = {at::zeros({rows, 1, 1}), at::zeros({rows, 1, 40})};
    EXPECT_TRUE(checkReduce(expr, same, eager, {"sum", std::vector<int64_t>{0}})) << rows;
    T ops = {g.tensor({rows, 3, 1}, at::kFloat), g.tensor({rows, 1, 40}, at::kFloat)};
    EXPECT_TRUE(checkReduce(expr, ops, eager, {"sum", std::vector<int64_t>{0}})) << rows;
    EXPECT_TRUE(checkReduce(expr, ops, eager, {"sum", std::vector<int64_t>{0}, true, at::kFloat})) << rows;
    EXPECT_TRUE(checkReduce(expr, ops, eager, {"mean", std::vector<int64_t>{0}, false, at::kDouble}, CheckOpts{false}))
        << rows;
  }
}

TEST(TileFastPaths, VerticalSumFoldsOnlyExactWideningCasts) {
  Gen g(10);
  const char* expr = "v1: sub($0, $1)";
  auto eager = [](const T& o) { return o[0] - o[1]; };
  // int8 wraps in int8 before the sum widens it (folded: int8 -> int64 is exact).
  for (at::ScalarType dt : {at::kChar, at::kByte, at::kShort, at::kInt, at::kBool}) {
    T ops = {g.tensor({300, 1, 1}, dt), g.tensor({300, 2, 33}, dt)};
    if (dt == at::kBool) continue;  // sub of bools raises in eager (tested elsewhere)
    EXPECT_TRUE(checkReduce(expr, ops, eager, {"sum", std::vector<int64_t>{0}})) << dt;
    // int32 -> float is not exact: the cast stays, the float values are summed.
    EXPECT_TRUE(checkReduce(expr, ops, eager, {"sum", std::vector<int64_t>{0}, false, at::kFloat}, CheckOpts{false}))
        << dt;
  }
}

// The tiles run on torch's intra-op threads (at::parallel_for): shapes large enough to be split
// give the same bits with 1 and 4 threads, and eager's (reductions merge their parts in order).
TEST(TileFastPaths, ResultsDoNotDependOnTheThreadCount) {
  struct Restore {
    int n = at::get_num_threads();
    ~Restore() { at::set_num_threads(n); }
  } restore;
  Gen g(12);
  const char* sim = "v1: sub($0, $1); abs(%0); lt(%1, 1)";
  auto simEager = [](const T& o) { return (o[0] - o[1]).abs().lt(1); };
  const char* mapExpr = "v1: minimum($0, $1); sub(%0, $2); clamp(%1, 0, None); mul(%2, $1)";
  auto mapEager = [](const T& o) { return at::clamp(at::minimum(o[0], o[1]) - o[2], 0) * o[1]; };
  T mapOps = {g.tensor({300, 1}, at::kFloat, kNaNInf), g.tensor({1, 700}, at::kFloat, kNaNInf),
              g.tensor({300, 1}, at::kFloat)};
  T simOps = {g.tensor({300, 90, 1}, at::kFloat), g.tensor({300, 1, 600}, at::kFloat)};
  T horOps = {g.tensor({3, 1}, at::kDouble), g.tensor({3, 70000}, at::kDouble)};
  std::vector<at::Tensor> first;
  for (int threads : {1, 4}) {
    at::set_num_threads(threads);
    EXPECT_TRUE(checkPairwise(mapExpr, mapOps, mapEager)) << threads;
    EXPECT_TRUE(checkReduce(sim, simOps, simEager, {"sum", std::vector<int64_t>{0}})) << threads;
    EXPECT_TRUE(checkReduce(
        "v1: mul($0, $1)", horOps, [](const T& o) { return o[0] * o[1]; }, {"sum", std::vector<int64_t>{-1}},
        CheckOpts{false}))
        << threads;
    std::vector<at::Tensor> got = {tsfuse::pairwise(mapOps, mapExpr),
                                   tsfuse::reduce(simOps, sim, "sum", std::vector<int64_t>{0}),
                                   tsfuse::reduce(horOps, "v1: mul($0, $1)", "sum", std::vector<int64_t>{-1})};
    if (first.empty()) {
      first = got;
      continue;
    }
    for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(sameTensor(first[i], got[i], true)) << i;
  }
}

}  // namespace

}  // namespace ops_tile_fast_paths_test
