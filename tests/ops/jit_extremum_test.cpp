// Compiled extrema (jit::Sink::MaxFirst / MinFirst): argmax/argmin and max/min with indices of a
// float32 value, folded vertically with each lane's kept value and first index in registers.
// Checked against eager (values bit for bit, indices equal) and bit for bit against the
// interpreter, on what decides an index: ties (small integer values), NaN anywhere (the first NaN
// wins), rows of -inf (max) or +inf (min) only (index 0), signed zeros, masked lane tails, blocks of
// several output rows, operands past the pointer registers, bool operands, and random programs.
#include "jit_support.h"

#include "kernels/reference/aten_eval.h"

namespace ops_jit_extremum_test {

namespace {

using namespace tsfuse_test;
using T = std::vector<at::Tensor>;

// max/min with indices through both paths (runBoth), each against eager (unless againstEager is
// false). The two runs' values and indices are compared as one int64 tensor: the values' bits
// (NaNs made one NaN: which NaN an op returns is no more fixed in the interpreter's compiled C++
// than in eager, see sameTensor), then the indices.
BothRuns indexedBoth(const std::string& expr, const T& ops, const EagerFn& eager, const std::string& red, int64_t dim,
                     bool keepdim, bool againstEager = true) {
  const std::string what = red + "(" + expr + ", dim=" + std::to_string(dim) + ") on " + describeOperands(ops);
  std::function<::testing::AssertionResult()> check;
  if (againstEager)
    check = [&]() -> ::testing::AssertionResult {
      auto [wv, wi] = red == "max" ? at::max(eager(ops), dim, keepdim) : at::min(eager(ops), dim, keepdim);
      auto [gv, gi] = tsfuse::reduceWithIndices(ops, expr, red, dim, keepdim);
      if (auto r = sameTensor(wv, gv, true); !r) return r << "\n  values of " << what;
      if (auto r = sameTensor(wi, gi, true); !r) return r << "\n  indices of " << what;
      return ::testing::AssertionSuccess();
    };
  auto run = [&] {
    auto [v, i] = tsfuse::reduceWithIndices(ops, expr, red, dim, keepdim);
    if (!at::isFloatingType(v.scalar_type())) return at::cat({v.flatten().to(at::kLong), i.flatten()});
    const at::Tensor canonical = at::where(v.isnan(), at::scalar_tensor(NAN, v.options()), v).contiguous();
    const at::ScalarType bits = v.element_size() == 8 ? at::kLong : at::kInt;
    return at::cat({canonical.view(bits).flatten().to(at::kLong), i.flatten()});
  };
  return runBoth(check, run, what);
}

::testing::AssertionResult checkIndexed(const std::string& expr, const T& ops, const EagerFn& eager,
                                        const std::string& red, int64_t dim, bool keepdim, bool compiled) {
  return expectBoth(indexedBoth(expr, ops, eager, red, dim, keepdim), compiled, red + " of " + expr);
}

::testing::AssertionResult checkArg(const std::string& expr, const T& ops, const EagerFn& eager, const std::string& red,
                                    int64_t dim, bool compiled) {
  return checkBoth(expr, ops, eager, {red, std::vector<int64_t>{dim}}, compiled);
}

const char* kDiff = "v1: sub($0, $1)";
at::Tensor diffEager(const T& o) { return o[0] - o[1]; }

TEST(JitExtremum, EveryKindOnSpecialsTiesAndLaneTails) {
  if (!haveJit()) GTEST_SKIP() << "no AVX2/BMI2: the compiled kernels are off";
  Gen g(51);
  // [rows, N, 1] - [rows, 1, M] reduced over rows: lanes along M (masked tails at 17 and 25, exact
  // blocks at 32, several tiles at 1100), N outputs per line (blocks of output rows).
  for (int64_t rows : {1, 2, 37})
    for (int64_t m : {17, 25, 32, 1100}) {
      T specials = {g.tensor({rows, 3, 1}, at::kFloat, kAllSpecials), g.tensor({rows, 1, m}, at::kFloat, kAllSpecials)};
      // Values in {-1, 0, 1}: most lanes tie, often several times.
      T ties = {at::randint(-1, 2, {rows, 5, 1}, g.gen).to(at::kFloat),
                at::randint(0, 2, {rows, 1, m}, g.gen).to(at::kFloat)};
      for (const T& ops : {specials, ties}) {
        for (const char* red : {"max", "min"})
          for (bool keepdim : {false, true})
            EXPECT_TRUE(checkIndexed(kDiff, ops, diffEager, red, 0, keepdim, true)) << "rows=" << rows << " m=" << m;
        for (const char* red : {"argmax", "argmin"})
          EXPECT_TRUE(checkArg(kDiff, ops, diffEager, red, 0, true)) << "rows=" << rows << " m=" << m;
      }
    }
}

TEST(JitExtremum, InfiniteRowsKeepIndexZeroAndTheFirstNaNWins) {
  if (!haveJit()) GTEST_SKIP() << "no AVX2/BMI2: the compiled kernels are off";
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  // Lane j of a [6, 40] value: all -inf, all +inf, NaN at row 3 after a larger value, NaN at rows 1
  // and 4, a -inf then +inf, and plain values whose maximum repeats.
  at::Tensor v = at::zeros({6, 40});
  v.select(1, 0).fill_(-inf);
  v.select(1, 1).fill_(inf);
  v.select(1, 2).copy_(at::tensor({1.f, 5.f, 2.f, nan, 7.f, 0.f}));
  v.select(1, 3).copy_(at::tensor({1.f, nan, 2.f, 3.f, nan, 0.f}));
  v.select(1, 4).copy_(at::tensor({-inf, -inf, inf, 0.f, inf, 0.f}));
  v.select(1, 5).copy_(at::tensor({2.f, 3.f, 3.f, -1.f, 3.f, 2.f}));
  T ops = {v, at::zeros({40})};
  for (const char* red : {"max", "min"}) EXPECT_TRUE(checkIndexed(kDiff, ops, diffEager, red, 0, false, true));
  for (const char* red : {"argmax", "argmin"}) EXPECT_TRUE(checkArg(kDiff, ops, diffEager, red, 0, true));
  // The expected indices, spelled out (eager and the interpreter could share a mistake).
  auto firstSix = [&](const char* red) {
    const at::Tensor i = std::get<1>(tsfuse::reduceWithIndices(ops, kDiff, red, 0)).contiguous();
    return std::vector<int64_t>(i.data_ptr<int64_t>(), i.data_ptr<int64_t>() + 6);
  };
  EXPECT_EQ(firstSix("max"), (std::vector<int64_t>{0, 0, 3, 1, 2, 1}));
  EXPECT_EQ(firstSix("min"), (std::vector<int64_t>{0, 0, 3, 1, 0, 3}));
}

TEST(JitExtremum, ReducedDimsLayoutsAndOperandsPastThePointerRegisters) {
  if (!haveJit()) GTEST_SKIP() << "no AVX2/BMI2: the compiled kernels are off";
  Gen g(52);
  // The reduced dim in the middle and outputs with several outer dims.
  T mid = {g.tensor({3, 9, 1}, at::kFloat, kNaNInf), g.tensor({1, 9, 45}, at::kFloat, kNaNInf)};
  EXPECT_TRUE(checkIndexed(kDiff, mid, diffEager, "max", 1, false, true));
  EXPECT_TRUE(checkArg(kDiff, mid, diffEager, "argmin", -2, true));
  T lines = {g.tensor({20, 3, 5, 1}, at::kFloat), g.tensor({20, 1, 1, 40}, at::kFloat)};
  EXPECT_TRUE(checkIndexed(kDiff, lines, diffEager, "min", 0, true, true));
  // Anchor matching's layout: lanes along the anchors, whose box columns are strided along them
  // and the same for every reduced box (packed once); the boxes' columns uniform along the lanes.
  at::Tensor anchors = g.tensor({300, 4}, at::kFloat), boxes = g.tensor({50, 4}, at::kFloat);
  T columns = {anchors.select(1, 0).unsqueeze(1), boxes.select(1, 2).unsqueeze(0)};
  EXPECT_TRUE(checkIndexed(kDiff, columns, diffEager, "max", 1, false, true));
  EXPECT_TRUE(checkBoth(
      "v1: sub($0, $1); abs(%0)", columns, [](const T& o) { return (o[0] - o[1]).abs(); },
      {"sum", std::vector<int64_t>{1}}, true, CheckOpts{false}));
  // 16 and 24 operands: pointers past the general registers are read through Args.
  for (int pairs : {8, 12}) {
    T ops;
    for (int i = 0; i < pairs; ++i) {
      ops.push_back(anchors.select(1, i % 4).unsqueeze(1));
      ops.push_back(boxes.select(1, (i + 1) % 4).unsqueeze(0));
    }
    EXPECT_TRUE(checkIndexed(
        sumOfDifferences(pairs, false), ops, [](const T& o) { return sumOfDifferencesEager(o, false); }, "max", 1,
        false, true))
        << 2 * pairs << " operands";
  }
}

TEST(JitExtremum, BoolOperandsOfReductionsCompile) {
  if (!haveJit()) GTEST_SKIP() << "no AVX2/BMI2: the compiled kernels are off";
  Gen g(56);
  // A masked min/max (semi-hard negatives: (d - max) * mask, min over the row) and a masked count,
  // the mask a bool operand: packed across lanes where the reduced rows are contiguous (dim 1),
  // read in place along the lanes where they are not (dim 0), lanes ending in masked tails (37,
  // 131) or exact blocks (64). Bit for bit against eager and the interpreter.
  const char* masked = "v1: sub($0, $1); mul(%0, $2)";
  auto maskedEager = [](const T& o) { return (o[0] - o[1]) * o[2]; };
  // (3000 rows: a tail's in-place bools are copied a chunk of rows at a time)
  for (auto [n, m] : {std::pair<int64_t, int64_t>{203, 37}, {203, 64}, {203, 131}, {3000, 37}}) {
    const at::Tensor d = g.tensor({n, m}, at::kFloat, kNaNInf), mask = g.tensor({n, m}, at::kBool);
    const T rows = {d, g.tensor({n, 1}, at::kFloat, kNaNInf), mask};
    const T cols = {d, g.tensor({1, m}, at::kFloat, kNaNInf), mask};
    for (int64_t dim : {0, 1}) {
      const T& ops = dim == 1 ? rows : cols;
      for (const char* red : {"max", "min"})
        EXPECT_TRUE(checkIndexed(masked, ops, maskedEager, red, dim, true, true)) << "m=" << m << " dim=" << dim;
      for (const char* red : {"amin", "argmax"})
        EXPECT_TRUE(checkBoth(masked, ops, maskedEager, {red, std::vector<int64_t>{dim}}, true))
            << red << " m=" << m << " dim=" << dim;
      // (a count: st.semi_hard's `(mask & (d > t)).sum(1)`)
      EXPECT_TRUE(checkBoth(
          "v1: gt($0, $1); bitwise_and($2, %0)", ops, [](const T& o) { return (o[0] > o[1]).logical_and(o[2]); },
          {"sum", std::vector<int64_t>{dim}}, true))
          << "count m=" << m << " dim=" << dim;
    }
  }
}

TEST(JitExtremum, DeclinedValuesAreInterpreted) {
  if (!haveJit()) GTEST_SKIP() << "no AVX2/BMI2: the compiled kernels are off";
  Gen g(53);
  // float64 values (no float64 extremum kernel), an op without generated code, integers.
  T f64 = {g.tensor({20, 3, 1}, at::kDouble, kNaNInf), g.tensor({20, 1, 40}, at::kDouble, kNaNInf)};
  EXPECT_TRUE(checkIndexed(kDiff, f64, diffEager, "max", 0, false, false));
  T f32 = {g.tensor({20, 3, 1}, at::kFloat), g.tensor({20, 1, 40}, at::kFloat)};
  EXPECT_TRUE(checkArg(
      "v1: sub($0, $1); exp(%0)", f32, [](const T& o) { return (o[0] - o[1]).exp(); }, "argmax", 0, false));
  T ints = {g.tensor({20, 3, 1}, at::kInt), g.tensor({20, 1, 40}, at::kInt)};
  EXPECT_TRUE(checkIndexed(kDiff, ints, diffEager, "min", 0, false, false));
}

TEST(JitExtremum, RandomProgramsMatchEagerAndTheInterpreter) {
  if (!haveJit()) GTEST_SKIP() << "no AVX2/BMI2: the compiled kernels are off";
  ProgramGen pg(54);
  Gen g(55);
  FailureLog log;
  int compiled = 0, total = 0;
  const char* kinds[] = {"max", "min", "argmax", "argmin"};
  for (int i = 0; i < 200; ++i) {
    const int numInputs = 1 + pg.pick(4);
    const std::string expr = pg.make(numInputs, false, false);
    const T ops = verticalFoldOperands(pg, g, numInputs, at::kFloat, expr);
    auto eager = [&](const T& o) { return tsfuse::evalAten(tsfuse::Expr::parse(expr), o); };
    const std::string red = kinds[pg.pick(4)];
    std::function<::testing::AssertionResult()> check;
    if (!underMemcheck()) check = [&] { return checkReduce(expr, ops, eager, {red, std::vector<int64_t>{0}}); };
    const BothRuns both =
        red == "max" || red == "min"
            ? indexedBoth(expr, ops, eager, red, 0, false, !underMemcheck())
            : runBoth(
                  check, [&] { return tsfuse::reduce(ops, expr, red, std::vector<int64_t>{0}); }, red + " " + expr);
    log.add(both.result, red + " " + expr + " ");
    compiled += both.ran;
    ++total;
  }
  EXPECT_TRUE(log.result());
  EXPECT_GT(compiled, total * 7 / 10) << compiled << " of " << total << " programs ran compiled";
}

}  // namespace

}  // namespace ops_jit_extremum_test
