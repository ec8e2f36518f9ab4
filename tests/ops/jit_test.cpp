// Compiled tile programs (kernels/backends/cpu/jit/jit.h) against eager and against the interpreter. Sums:
//  * every op the code generator emits, on float32 and float64, with NaN/inf/signed zeros, each
//    checked bit for bit (counts) or to eager's tolerance and bit for bit against the
//    interpreter (float sums: the same additions in the same order);
//  * lane tails (masked vectors), blocks, several reduced dims, uniform and contiguous operands;
//  * what the generator declines (strided operands, integers, ATen ops, too many live values)
//    still gives eager's result through the interpreter.
// Maps: tests/ops/jit_map_test.cpp.
// tilesRun() tells whether the compiled kernels ran; they need AVX2 and BMI2 (skipped without).
#include "jit_support.h"

#include "kernels/reference/aten_eval.h"

#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>

#include <unistd.h>

namespace ops_jit_test {

namespace {

using namespace tsfuse_test;
using T = std::vector<at::Tensor>;

const ReduceArgs kSum0{"sum", std::vector<int64_t>{0}};

// The seed similarity's value, counted by most of the sum tests.
const char* kSim = "v1: sub($0, $1); abs(%0); lt(%1, 1)";
at::Tensor simEager(const T& o) { return (o[0] - o[1]).abs().lt(1); }

TEST(JitSum, EveryOpOnBothFloatDtypes) {
  if (!haveJit()) GTEST_SKIP() << "no AVX2/BMI2: the compiled kernels are off";
  Gen g(31);
  struct Case {
    const char* expr;
    EagerFn eager;
  };
  // Counts (bool values) and float sums of every op the generator emits.
  const std::vector<Case> cases = {
      {"v1: sub($0, $1); abs(%0); lt(%1, 1)", [](const T& o) { return (o[0] - o[1]).abs().lt(1); }},
      {"v1: sub($0, $1); abs(%0)", [](const T& o) { return (o[0] - o[1]).abs(); }},
      {"v1: add($0, $1); mul(%0, $1); div(%1, 3)", [](const T& o) { return (o[0] + o[1]) * o[1] / 3; }},
      {"v1: minimum($0, $1); sub($0, $1); maximum(%0, %1)",
       [](const T& o) { return at::maximum(at::minimum(o[0], o[1]), o[0] - o[1]); }},
      {"v1: clamp($0, -1, 2); sub(%0, $1)", [](const T& o) { return at::clamp(o[0], -1, 2) - o[1]; }},
      {"v1: clamp($0, None, 0.25); neg(%0); mul(%1, $1)",
       [](const T& o) { return -at::clamp(o[0], c10::nullopt, 0.25) * o[1]; }},
      {"v1: clamp($0, $1, None)", [](const T& o) { return at::clamp(o[0], o[1], c10::nullopt); }},
      {"v1: gt($0, $1); le($0, 0); logical_or(%0, %1)",
       [](const T& o) { return at::logical_or(o[0] > o[1], o[0] <= 0); }},
      {"v1: ge($0, $1); ne($1, 0); logical_and(%0, %1); eq($0, $1); logical_xor(%2, %3); logical_not(%4)",
       [](const T& o) {
         return at::logical_not(at::logical_xor(at::logical_and(o[0] >= o[1], o[1] != 0), o[0] == o[1]));
       }},
      {"v1: lt($0, $1); eq(%0, True); ne(%0, %1)", [](const T& o) { return (o[0] < o[1]) != ((o[0] < o[1]) == true); }},
      {"v1: gt($0, $1); where(%0, $0, $1)", [](const T& o) { return at::where(o[0] > o[1], o[0], o[1]); }},
      {"v1: lt($0, $1); to(%0, float32); mul(%1, $1)", [](const T& o) { return (o[0] < o[1]).to(at::kFloat) * o[1]; }},
      {"v1: sub($0, $1); to(%0, bool)", [](const T& o) { return (o[0] - o[1]).to(at::kBool); }},
  };
  for (at::ScalarType dt : {at::kFloat, at::kDouble}) {
    for (const Case& c : cases) {
      if (std::string(c.expr).find("to(%0, float32)") != std::string::npos && dt == at::kDouble) continue;
      // [rows, N, 1] against [rows, 1, M]: x uniform along the lanes, y contiguous; M (>= 16: a
      // vertical sum) covers blocks with masked tails (17, 25), exact blocks (32), several tiles.
      // Few rows keep most sums free of NaN (one NaN row makes a lane's float sum NaN).
      // Outputs per line 3 and 7: blocks of several output rows plus single rows left over.
      for (int64_t rows : {2, 37})
        for (int64_t m : {17, 25, 32, 1100}) {
          T ops = {g.tensor({rows, m == 25 ? 7 : 3, 1}, dt, kAllSpecials), g.tensor({rows, 1, m}, dt, kAllSpecials)};
          EXPECT_TRUE(checkBoth(c.expr, ops, c.eager, kSum0, true, CheckOpts{false, 1e-5, 1e-6}))
              << dt << " rows=" << rows << " m=" << m;
        }
    }
  }
}

TEST(JitSum, CountsAndSumsKeepEagerDtypes) {
  if (!haveJit()) GTEST_SKIP() << "no AVX2/BMI2: the compiled kernels are off";
  Gen g(32);
  T ops = {g.tensor({300, 4, 1}, at::kFloat), g.tensor({300, 1, 70}, at::kFloat)};
  // int64 counts, a count into double lanes (dtype float64), mean, keepdim.
  EXPECT_TRUE(checkBoth(kSim, ops, simEager, kSum0, true));
  EXPECT_TRUE(checkBoth(kSim, ops, simEager, {"sum", std::vector<int64_t>{0}, true, at::kDouble}, true));
  EXPECT_TRUE(
      checkBoth(kSim, ops, simEager, {"mean", std::vector<int64_t>{0}, false, at::kFloat}, true, CheckOpts{false}));
  // A float sum widened to float64 (the final cast is folded into the double lanes).
  const char* l1 = "v1: sub($0, $1); abs(%0)";
  auto l1Eager = [](const T& o) { return (o[0] - o[1]).abs(); };
  EXPECT_TRUE(
      checkBoth(l1, ops, l1Eager, {"sum", std::vector<int64_t>{0}, false, at::kDouble}, true, CheckOpts{false}));
  EXPECT_TRUE(checkBoth(l1, ops, l1Eager, {"mean", std::vector<int64_t>{0}}, true, CheckOpts{false, 1e-5, 1e-5}));
  // Every lane true in every row: counts reach the row count exactly.
  T same = {at::zeros({600, 2, 1}), at::zeros({600, 1, 50})};
  EXPECT_TRUE(checkBoth(kSim, same, simEager, kSum0, true));
}

TEST(JitSum, ReducedSpacesAndLayouts) {
  if (!haveJit()) GTEST_SKIP() << "no AVX2/BMI2: the compiled kernels are off";
  Gen g(33);
  // Output rows in blocks: both operands changing per row (their strides differ), lines shorter
  // than a block, outputs with several outer dims (a block never crosses a line's end).
  T both = {g.tensor({30, 9, 1}, at::kFloat), g.tensor({30, 9, 70}, at::kFloat)};
  EXPECT_TRUE(checkBoth(kSim, both, simEager, kSum0, true));
  T lines = {g.tensor({20, 3, 5, 1}, at::kFloat), g.tensor({20, 1, 1, 40}, at::kFloat)};
  EXPECT_TRUE(checkBoth(kSim, lines, simEager, kSum0, true));
  T shortLines = {g.tensor({20, 4, 1, 1}, at::kFloat), g.tensor({20, 1, 1, 40}, at::kFloat)};
  EXPECT_TRUE(checkBoth(kSim, shortLines, simEager, kSum0, true));
  // Two reduced dims (outer dim x inner rows), reduced dims in the middle, a 0-dim operand.
  T three = {g.tensor({5, 6, 3, 1}, at::kFloat), g.tensor({5, 6, 1, 40}, at::kFloat)};
  EXPECT_TRUE(checkBoth(kSim, three, simEager, {"sum", std::vector<int64_t>{0, 1}}, true));
  T mid = {g.tensor({3, 9, 1}, at::kFloat), g.tensor({1, 9, 45}, at::kFloat)};
  EXPECT_TRUE(checkBoth(kSim, mid, simEager, {"sum", std::vector<int64_t>{1}}, true));
  T scalar = {g.tensor({}, at::kFloat), g.tensor({8, 3, 50}, at::kFloat)};
  EXPECT_TRUE(checkBoth(kSim, scalar, simEager, kSum0, true));
  // An operand strided along the lanes but the same for every output is packed once per call
  // (a column-major y; the distance forms' y[j, d] summed over d); one that also changes per
  // output row is interpreted.
  at::Tensor y = g.tensor({40, 20}, at::kFloat).t().contiguous().t();  // [40, 20] column-major
  T strided = {g.tensor({40, 1}, at::kFloat), y};
  EXPECT_TRUE(checkBoth(kSim, strided, simEager, kSum0, true));
  const ReduceArgs lastDim{"sum", std::vector<int64_t>{-1}};
  auto l2Eager = [](const T& o) { return at::pow(o[0] - o[1], 2); };
  for (at::ScalarType dt : {at::kFloat, at::kDouble}) {
    T points = {g.tensor({37, 1, 8}, dt, kNaNInf), g.tensor({1, 301, 8}, dt, kNaNInf)};
    EXPECT_TRUE(checkBoth("v1: sub($0, $1); pow(%0, 2)", points, l2Eager, lastDim, true, CheckOpts{false})) << dt;
    EXPECT_TRUE(checkBoth(kSim, points, simEager, lastDim, true)) << dt;
  }
  at::Tensor perOutput = g.tensor({6, 40, 3}, at::kFloat).transpose(1, 2);  // [6, 3, 40], strided lanes
  T notPacked = {perOutput, g.tensor({6, 3, 1}, at::kFloat)};
  EXPECT_TRUE(checkBoth(kSim, notPacked, simEager, kSum0, false));
  // The reduced operand is a step-2 slice: rows are 2 rows apart (row stride), lanes contiguous.
  at::Tensor big = g.tensor({80, 1, 33}, at::kFloat);
  T sliced = {g.tensor({40, 5, 1}, at::kFloat), big.slice(0, 0, 80, 2)};
  EXPECT_TRUE(checkBoth(kSim, sliced, simEager, kSum0, true));
  // Tiles whose operand rows overflow L2 (300 rows of 512 lanes): groups of output rows walk
  // the lanes in chunks (runCompiledVertical); 19 rows end in a partial group, 530 lanes in a
  // second, partial tile.
  T tall = {g.tensor({300, 19, 1}, at::kFloat), g.tensor({300, 1, 530}, at::kFloat)};
  EXPECT_TRUE(checkBoth(kSim, tall, simEager, kSum0, true));
  EXPECT_TRUE(checkBoth(
      "v1: sub($0, $1); mul(%0, %0)", tall, [](const T& o) { return (o[0] - o[1]) * (o[0] - o[1]); }, kSum0, true,
      CheckOpts{false}));
}

// An operand packed for the lanes whose copy would pass VerticalReduce::kMaxPackBytes is packed a
// panel of lanes at a time (whole tiles), every output row's tiles of a panel before the next.
TEST(JitSum, PackedOperandsPastThePackBudgetRunPanelByPanel) {
  if (!haveJit()) GTEST_SKIP() << "no AVX2/BMI2: the compiled kernels are off";
  Gen g(35);
  const ReduceArgs lastDim{"sum", std::vector<int64_t>{-1}};
  auto l2Eager = [](const T& o) { return at::pow(o[0] - o[1], 2); };
  // y[j, d] summed over d in eager's inner order: 64 rows x 4200 lanes (1.03 MiB) -> 4096 + 104.
  T points = {g.tensor({3, 1, 64}, at::kFloat, kNaNInf), g.tensor({1, 4200, 64}, at::kFloat, kNaNInf)};
  EXPECT_TRUE(checkBoth("v1: sub($0, $1); pow(%0, 2)", points, l2Eager, lastDim, true, CheckOpts{false}));
  // float64: half the lanes per panel (2048), three panels.
  T wide = {g.tensor({2, 1, 64}, at::kDouble), g.tensor({1, 4500, 64}, at::kDouble)};
  EXPECT_TRUE(checkBoth("v1: sub($0, $1); pow(%0, 2)", wide, l2Eager, lastDim, true, CheckOpts{false}));
  // A y strided along the lanes summed over dim 0 (rows of the reduced space, not eager's inner
  // order): 300 rows x 1000 lanes -> panels of 768 and 232 lanes, over output rows in blocks.
  at::Tensor y = g.tensor({300, 1000, 2}, at::kFloat).select(2, 0);  // [300, 1000], lanes 2 apart
  T columns = {g.tensor({300, 5, 1}, at::kFloat), y.unsqueeze(1)};
  EXPECT_TRUE(checkBoth(kSim, columns, simEager, kSum0, true));
  columns[0] = g.tensor({300, 5, 1}, at::kFloat);  // again, through the kernel compiled above
  EXPECT_TRUE(checkBoth(kSim, columns, simEager, kSum0, true));
}

// Outputs whose innermost dim is shorter than a vector (distances to 3 centroids) run vertically
// through the compiled kernels when the reduced space is shorter than a tile; a long reduction
// into few outputs keeps the horizontal tiling (interpreted).
TEST(JitSum, NarrowOutputsOfShortReductionsRunCompiled) {
  if (!haveJit()) GTEST_SKIP() << "no AVX2/BMI2: the compiled kernels are off";
  Gen g(36);
  const ReduceArgs lastDim{"sum", std::vector<int64_t>{-1}};
  auto l2Eager = [](const T& o) { return at::pow(o[0] - o[1], 2); };
  for (int64_t m : {1, 3, 15}) {
    T centroids = {g.tensor({700, 1, 3}, at::kFloat, kNaNInf), g.tensor({1, m, 3}, at::kFloat)};
    EXPECT_TRUE(checkBoth("v1: sub($0, $1); pow(%0, 2)", centroids, l2Eager, lastDim, true, CheckOpts{false})) << m;
    T wide = {g.tensor({300, 1, 40}, at::kDouble), g.tensor({1, m, 40}, at::kDouble)};
    EXPECT_TRUE(checkBoth("v1: sub($0, $1); pow(%0, 2)", wide, l2Eager, lastDim, true, CheckOpts{false})) << m;
  }
  T counts = {g.tensor({200, 6, 1}, at::kFloat), g.tensor({200, 1, 5}, at::kFloat)};
  EXPECT_TRUE(checkBoth(kSim, counts, simEager, kSum0, true));
  T longRows = {g.tensor({1, 3, 1}, at::kFloat), g.tensor({5000, 1, 3}, at::kFloat)};
  EXPECT_TRUE(checkBoth(kSim, longRows, simEager, kSum0, false));
}

TEST(JitSum, DeclinedProgramsAreInterpreted) {
  if (!haveJit()) GTEST_SKIP() << "no AVX2/BMI2: the compiled kernels are off";
  Gen g(34);
  // Integers, an ATen tile op, a float32/float64 mix: interpreted, still eager's result.
  T ints = {g.tensor({20, 3, 1}, at::kInt), g.tensor({20, 1, 40}, at::kInt)};
  EXPECT_TRUE(checkBoth(
      "v1: sub($0, $1); abs(%0)", ints, [](const T& o) { return (o[0] - o[1]).abs(); }, kSum0, false));
  T floats = {g.tensor({20, 3, 1}, at::kFloat), g.tensor({20, 1, 40}, at::kFloat)};
  EXPECT_TRUE(checkBoth(
      "v1: sub($0, $1); exp(%0)", floats, [](const T& o) { return (o[0] - o[1]).exp(); }, kSum0, false,
      CheckOpts{false, 1e-5, 1e-4}));
  T mixed = {g.tensor({20, 1, 40}, at::kFloat), g.tensor({20, 3, 1}, at::kDouble)};
  EXPECT_TRUE(checkBoth(
      "v1: sub($0, $1)", mixed, [](const T& o) { return o[0] - o[1]; }, kSum0, false, CheckOpts{false}));
  // k products live at once, each with its own literal: with 8, narrower blocks and literals read
  // from memory fit the 16 registers; with 12 nothing does and the interpreter runs it.
  auto chain = [](int k) {
    std::string e = "v1: ";
    for (int i = 0; i < k; ++i) e += "mul($" + std::to_string(i % 2) + ", " + std::to_string(i + 2) + "); ";
    for (int i = 0; i + 1 < k; ++i)
      e += "add(%" + std::to_string(i == 0 ? 0 : k - 1 + i) + ", %" + std::to_string(i + 1) + (i + 2 < k ? "); " : ")");
    return e;
  };
  auto chainEager = [](int k) {
    return [k](const T& o) {
      std::vector<at::Tensor> v;
      for (int i = 0; i < k; ++i) v.push_back(o[i % 2] * (i + 2));
      at::Tensor s = v[0];
      for (int i = 1; i < k; ++i) s = s + v[i];
      return s;
    };
  };
  EXPECT_TRUE(checkBoth(chain(8), floats, chainEager(8), kSum0, true, CheckOpts{false, 1e-5, 1e-3}));
  EXPECT_TRUE(checkBoth(chain(12), floats, chainEager(12), kSum0, false, CheckOpts{false, 1e-5, 1e-3}));
}

// A leaf of another dtype that is one value along the lanes (a Python number known only at run
// time, a column) is converted as the kernel broadcasts it: compiled, with the interpreter's bits
// (its cast rounds to nearest like the kernel's vcvt*), float32 and float64 programs alike.
TEST(JitSum, UniformLeavesOfOtherDtypesAreConvertedAsTheyAreBroadcast) {
  if (!haveJit()) GTEST_SKIP() << "no AVX2/BMI2: the compiled kernels are off";
  Gen g(35);
  auto sub = [](const T& o) { return o[0] - o[1]; };
  for (at::ScalarType column : {at::kDouble, at::kLong, at::kInt}) {
    SCOPED_TRACE(c10::toString(column));
    T f32 = {g.tensor({20, 1, 40}, at::kFloat), g.tensor({20, 3, 1}, column, kNaNInf)};
    EXPECT_TRUE(checkBoth("v1: sub($0, $1)", f32, sub, kSum0, column != at::kDouble, CheckOpts{false}));
    T f64 = {g.tensor({20, 1, 40}, at::kDouble), g.tensor({20, 3, 1}, column == at::kDouble ? at::kFloat : column)};
    EXPECT_TRUE(checkBoth("v1: sub($0, $1)", f64, sub, kSum0, true, CheckOpts{false}));
  }
  // A 0-dim float64 operand of a float32 program, with values float32 rounds: 1/3, denormals.
  T wrapped = {g.tensor({30, 50}, at::kFloat), at::scalar_tensor(1.0 / 3, at::kDouble)};
  EXPECT_TRUE(checkBoth(
      "v1: mul($0, $1)", wrapped, [](const T& o) { return o[0] * o[1]; }, kSum0, true));
  T tiny = {g.tensor({30, 50}, at::kFloat), at::scalar_tensor(3e-39, at::kDouble)};
  EXPECT_TRUE(checkBoth(
      "v1: div($0, $1)", tiny, [](const T& o) { return o[0] / o[1]; }, kSum0, true));
}

}  // namespace

namespace {

// Random float/bool programs over the ops the generator emits: operand mixes of uniform and
// contiguous leaves, values reused far apart (long live ranges, register pressure), dying
// operands reused for results. Each is summed with the compiled kernels and with the interpreter
// (bit for bit the same) and checked against eager (evalAten, then at::sum).
TEST(JitSum, RandomProgramsMatchTheInterpreterBitForBit) {
  AnyReduceOrder anyOrder;
  if (!haveJit()) GTEST_SKIP() << "no AVX2/BMI2: the compiled kernels are off";
  ProgramGen pg(35);
  Gen g(36);
  FailureLog log;
  int compiled = 0, total = 0;
  for (int i = 0; i < 300; ++i) {
    const bool f64 = pg.pick(3) == 0, boolResult = pg.pick(2) == 0;
    const at::ScalarType dt = f64 ? at::kDouble : at::kFloat;
    const int numInputs = 1 + pg.pick(4);
    const std::string expr = pg.make(numInputs, f64, boolResult);
    const T ops = verticalFoldOperands(pg, g, numInputs, dt, expr);
    auto eager = [&](const T& o) { return tsfuse::evalAten(tsfuse::Expr::parse(expr), o); };
    std::function<::testing::AssertionResult()> check;
    if (!underMemcheck()) check = [&] { return checkReduce(expr, ops, eager, kSum0, CheckOpts{false, 1e-5, 1e-5}); };
    const BothRuns both = runBoth(
        check, [&] { return tsfuse::reduce(ops, expr, "sum", std::vector<int64_t>{0}); }, expr);
    log.add(both.result, expr + " ");
    compiled += both.ran;
    ++total;
  }
  EXPECT_TRUE(log.result());
  // Most programs fit the registers (the rest are interpreted, which the checks above cover too).
  EXPECT_GT(compiled, total * 8 / 10) << compiled << " of " << total << " programs ran compiled";
}

}  // namespace

}  // namespace ops_jit_test
