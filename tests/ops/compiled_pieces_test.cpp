// Fused programs that no one compiled kernel runs still run compiled code
// (kernels/backends/cpu/tile_eval.h): maps around eager's vector routines, a run cut where a later
// step reads its inner value, a cast between float64 and float32 or an ATen op with no routine
// through the interpreter between compiled runs; reductions whose values are compiled and folded
// in C++ (exp inside a sum and an argmax, prod, var, all, a product of bools); epilogues of a
// routine alone. Each bit for bit eager's and the interpreter's, and each counted where it ran
// (tsfuse::pathCounts): no tile interpreted whole where some compiled code applies.
#include "jit_support.h"

#include "tsfuse/ops.h"

namespace ops_compiled_pieces_test {

namespace {

using namespace tsfuse_test;
using T = std::vector<at::Tensor>;

// How a call ran, from the path counts around it.
struct Ran {
  int64_t whole = 0, pieces = 0, interpreted = 0, steps = 0, atenTiles = 0;
};
Ran ranBy(const std::function<void()>& call) {
  const tsfuse::PathCounts a = tsfuse::pathCounts();
  call();
  const tsfuse::PathCounts b = tsfuse::pathCounts();
  return {b.compiledTiles - a.compiledTiles, b.compiledPieces - a.compiledPieces,
          b.interpretedTiles - a.interpretedTiles, b.interpretedSteps - a.interpretedSteps,
          b.atenTileOps - a.atenTileOps};
}

struct Case {
  const char* name;
  std::string expr;
  EagerFn eager;
  bool steps;  // some instruction runs through the interpreter between compiled runs
  size_t operands = 3;
};

// Runs a map: eager's bits with the compiled kernels on and off, the same bits both ways, and
// with them on, compiled pieces and no tile interpreted whole.
void expectMapInPieces(const Case& k, const T& ops) {
  const std::string what = std::string(k.name) + ": " + k.expr + " on " + describeOperands(ops);
  const BothRuns both =
      runBoth([&] { return checkPairwise(k.expr, ops, k.eager); }, [&] { return tsfuse::pairwise(ops, k.expr); }, what);
  EXPECT_TRUE(both.result) << what;
  JitOn on(true);
  const Ran r = ranBy([&] { tsfuse::pairwise(ops, k.expr); });
  EXPECT_GT(r.pieces, 0) << what;
  EXPECT_EQ(r.interpreted, 0) << what;
  EXPECT_EQ(r.steps > 0, k.steps) << what;
}

}  // namespace

TEST(CompiledPieces, MapsAroundRoutinesCutRunsAndInterpretedSteps) {
  if (!haveJit()) GTEST_SKIP() << "no AVX2/BMI2: the compiled kernels are off";
  Gen g(71);
  const std::vector<Case> cases = {
      {"a Gaussian kernel: run, routine, run", "v1: sub($0, $1); mul(%0, %0); mul(%1, -0.5); exp(%2); mul(%3, $2)",
       [](const T& o) { return at::exp((o[0] - o[1]) * (o[0] - o[1]) * -0.5) * o[2]; }, false},
      {"a Matern polynomial: the distance read after the exp cuts the run",
       "v1: sub($0, $1); abs(%0); mul(%1, 2.5); neg(%2); exp(%3); add(%2, 1); mul(%5, %4)",
       [](const T& o) {
         at::Tensor d = (o[0] - o[1]).abs() * 2.5;
         return (d + 1) * at::exp(-d);
       },
       false, 2},
      {"an ATen op with no routine between runs", "v1: mul($0, 0.5); hypot(%0, $1); add(%1, %0); sqrt(%2)",
       [](const T& o) {
         at::Tensor h = o[0] * 0.5;
         return at::sqrt(at::hypot(h, o[1]) + h);
       },
       true, 2},
  };
  for (const Case& k : cases)
    for (at::ScalarType dt : {at::kFloat, at::kDouble})
      for (int64_t m : {700, 37}) {  // row tiles, linear tiles
        T ops = {g.tensor({9, 1}, dt, kNaNInf), g.tensor({1, m}, dt, kNaNInf), g.tensor({1, m}, dt)};
        ops.resize(k.operands);
        expectMapInPieces(k, ops);
      }
  // float64 distances cast to float32 before the root (torchmetrics' euclidean distance): the
  // cast between the two dtypes runs through the interpreter, the runs either side compiled.
  const Case cast{"float64 then float32", "v1: sub($0, $1); mul(%0, %0); to(%1, float32); sqrt(%2); mul(%3, 0.5)",
                  [](const T& o) { return ((o[0] - o[1]) * (o[0] - o[1])).to(at::kFloat).sqrt() * 0.5; }, true, 2};
  expectMapInPieces(cast, {g.tensor({9, 1}, at::kDouble), g.tensor({1, 300}, at::kDouble)});
}

TEST(CompiledPieces, ReductionValuesAreCompiledAndFoldedInCpp) {
  if (!haveJit()) GTEST_SKIP() << "no AVX2/BMI2: the compiled kernels are off";
  Gen g(72);
  struct R {
    const char* name;
    std::string expr;
    EagerFn eager;
    ReduceArgs args;
    CheckOpts opts;
    int64_t coords;  // operands [40, 1, coords] and [1, m, coords] (0: [40, 1] and [1, m])
  };
  auto gauss = [](const T& o) { return at::exp(-(o[0] - o[1]).abs()); };
  const std::vector<int64_t> dim1{1}, dim2{2};
  const std::vector<R> cases = {
      {"exp inside a sum", "v1: sub($0, $1); abs(%0); neg(%1); exp(%2)", gauss, {"sum", dim1}, {}, 0},
      {"exp inside an argmax", "v1: sub($0, $1); abs(%0); neg(%1); exp(%2)", gauss, {"argmax", dim1}, {}, 0},
      {"a product of box sides",
       "v1: sub($0, $1); clamp_min(%0, 0)",
       [](const T& o) { return (o[0] - o[1]).clamp_min(0); },
       {"prod", dim2},
       {},
       2},
      {"a variance over the broadcast difference",
       "v1: sub($0, $1)",
       [](const T& o) { return o[0] - o[1]; },
       {"var:1.0", dim2},
       CheckOpts{false},
       8},
      {"all of a compare",
       "v1: sub($0, $1); lt(%0, 1.5)",
       [](const T& o) { return (o[0] - o[1]) < 1.5; },
       {"all", dim2},
       {},
       4},
      // a product of bools: the reduction appends a cast to int64 after lowering (no routine)
      {"a product of a compare",
       "v1: sub($0, $1); lt(%0, 1.5)",
       [](const T& o) { return (o[0] - o[1]) < 1.5; },
       {"prod", dim2},
       {},
       4},
  };
  for (const R& k : cases)
    for (int64_t m : {300, 5}) {
      T ops = k.coords ? T{g.tensor({40, 1, k.coords}, at::kFloat, kNaNInf), g.tensor({1, m, k.coords}, at::kFloat)}
                       : T{g.tensor({40, 1}, at::kFloat, kNaNInf), g.tensor({1, m}, at::kFloat)};
      const std::string what = std::string(k.name) + " on " + describeOperands(ops);
      const BothRuns both = reduceBoth(k.expr, ops, k.eager, k.args, k.opts, what);
      EXPECT_TRUE(both.result) << what;
      JitOn on(true);
      const Ran r = ranBy([&] { tsfuse::reduce(ops, k.expr, k.args.reduction, k.args.dim); });
      EXPECT_GT(r.whole + r.pieces, 0) << what;
      EXPECT_EQ(r.interpreted, 0) << what;
    }
}

TEST(CompiledPieces, AnEpilogueOfOneRoutineRunsAsThatRoutine) {
  if (!haveJit()) GTEST_SKIP() << "no AVX2/BMI2: the compiled kernels are off";
  Gen g(73);
  // gpytorch's periodic kernel: exp of a sum over the coordinates.
  T ops = {g.tensor({50, 1, 3}, at::kFloat), g.tensor({1, 200, 3}, at::kFloat)};
  const std::string expr = "v1: sub($0, $1); abs(%0); mul(%1, -0.5)";
  auto fused = [&] {
    return tsfuse::reduce(ops, expr, "sum", std::vector<int64_t>{2}, false, std::nullopt, "v1: exp($0)");
  };
  const at::Tensor want = at::exp(((ops[0] - ops[1]).abs() * -0.5).sum(2));
  JitOn on(true);
  at::Tensor got;
  const Ran r = ranBy([&] { got = fused(); });
  EXPECT_TRUE(sameTensor(want, got, /*exact=*/true));
  EXPECT_EQ(r.interpreted, 0);
}

}  // namespace ops_compiled_pieces_test
