// Randomized (seeded) numerics of tsfuse::reduce against eager: every reduction over single,
// multiple, negative and all dims, keepdim, dtype=, every dtype, broadcast 3-d shapes and operand
// layouts. Integer and bool results must be equal, float results allclose (rtol 1e-5); dtype,
// sizes and strides must equal eager's; where eager raises, tsfuse must raise the same message.
#include "test_util.h"

namespace ops_reduce_random_test {

namespace {

using namespace tsfuse_test;
using T = std::vector<at::Tensor>;

struct ValueExpr {
  std::string expr;
  EagerFn eager;
};

const std::vector<ValueExpr>& valueExprs() {
  static const std::vector<ValueExpr> v = {
      // The seed similarity count: bool values.
      {"v1: sub($0, $1); abs(%0); lt(%1, 1)", [](const T& x) { return at::lt(at::abs(at::sub(x[0], x[1])), 1); }},
      // Non-negative numbers (no cancellation in sums).
      {"v1: sub($0, $1); mul(%0, %0)", [](const T& x) { return at::mul(at::sub(x[0], x[1]), at::sub(x[0], x[1])); }},
      // Signed, with the operands' own dtype semantics (min/max keep the dtype).
      {"v1: maximum($0, $1)", [](const T& x) { return at::maximum(x[0], x[1]); }},
      {"v1: mul($0, $1); add(%0, 1)", [](const T& x) { return at::add(at::mul(x[0], x[1]), 1); }},
  };
  return v;
}

std::vector<ReduceArgs> argsFor(const std::string& reduction, Gen& g) {
  std::vector<std::optional<std::vector<int64_t>>> dims = {std::vector<int64_t>{0},       std::vector<int64_t>{1},
                                                           std::vector<int64_t>{-1},      std::vector<int64_t>{2},
                                                           std::vector<int64_t>{-3},      std::vector<int64_t>{0, 2},
                                                           std::vector<int64_t>{-1, 0},   std::vector<int64_t>{1, 2},
                                                           std::vector<int64_t>{0, 1, 2}, std::nullopt};
  const bool single = reduction == "argmax" || reduction == "argmin" || reduction == "prod";
  std::vector<ReduceArgs> out;
  for (const auto& d : dims) {
    if (single && d && d->size() != 1) continue;
    ReduceArgs a{reduction, d, g.coin(), std::nullopt};
    if ((reduction == "sum" || reduction == "prod" || reduction == "mean") && g.coin(0.3))
      a.dtype = g.coin() ? at::kDouble : (reduction == "mean" ? at::kFloat : at::kLong);
    out.push_back(a);
  }
  return out;
}

std::pair<std::vector<int64_t>, std::vector<int64_t>> shapes3(Gen& g, int p) {
  const int64_t N = g.randint(1, 5), M = g.randint(1, 5), K = g.randint(1, 5);
  switch (p % 5) {
    case 0:
      return {{N, 1, K}, {M, K}};
    case 1:
      return {{N, 1, 1}, {1, M, K}};
    case 2:
      return {{N, M, K}, {}};
    case 3:
      return {{2, 1, 20}, {17, 20}};  // vertical plan: innermost kept dim >= 16
    default:
      return {{N, 1, K}, {1, M, 1}};
  }
}

void runRandom(uint64_t seed) {
  Gen g(seed);
  FailureLog log;
  for (const std::string r : {"sum", "mean", "prod", "amax", "amin", "any", "all", "argmax", "argmin"})
    for (const ValueExpr& v : valueExprs())
      for (at::ScalarType dt : allDtypes())
        for (const ReduceArgs& a : argsFor(r, g)) {
          if (!g.coin(0.25)) continue;  // a seeded quarter of the grid per seed keeps this fast
          auto [s0, s1] = shapes3(g, g.randint(0, 4));
          T ops = {g.layout(g.tensor(s0, dt), g.randint(0, 3)), g.layout(g.tensor(s1, dt), g.randint(0, 3))};
          CheckOpts o;
          o.exact = false;
          o.atol = 1e-5;
          if (dt == at::kHalf || dt == at::kBFloat16) o.rtol = 1e-2;
          log.add(checkReduce(v.expr, ops, v.eager, a, o));
        }
  EXPECT_TRUE(log.result());
  EXPECT_GT(log.cases, 200);
}

TEST(ReduceRandom, AllReductionsDtypesAndDimsSeed1) { runRandom(101); }
TEST(ReduceRandom, AllReductionsDtypesAndDimsSeed2) { runRandom(102); }

// Float32 only, every dim spec and layout for sum/amax/argmax: separates layout problems from
// dtype problems.
TEST(ReduceRandom, EveryDimSpecAndLayoutFloat32) {
  Gen g(103);
  FailureLog log;
  const ValueExpr& v = valueExprs()[3];
  for (const std::string r : {"sum", "amax", "argmax", "mean"})
    for (const ReduceArgs& a : argsFor(r, g))
      for (bool keep : {false, true})
        for (int l = 0; l < 4; ++l) {
          ReduceArgs k = a;
          k.keepdim = keep;
          auto [s0, s1] = shapes3(g, l + 1);
          T ops = {g.layout(g.tensor(s0, at::kFloat), l), g.layout(g.tensor(s1, at::kFloat), 3 - l)};
          log.add(checkReduce(v.expr, ops, v.eager, k, {false, 1e-5, 1e-5}));
        }
  EXPECT_TRUE(log.result());
}

// Output strides with a permuted (channels-last-like) operand, keepdim and not.
TEST(ReduceRandom, OutputStridesWithPermutedOperands) {
  Gen g(104);
  at::Tensor x = g.tensor({2, 4, 5, 3}, at::kFloat).permute({0, 3, 1, 2});  // [2,3,4,5]
  at::Tensor y = g.tensor({3, 1, 1}, at::kFloat);
  const ValueExpr& v = valueExprs()[3];
  for (const std::string r : {"sum", "amax", "argmax"})
    for (int64_t d : {0, 1, 3})
      for (bool keep : {false, true})
        EXPECT_TRUE(checkReduce(v.expr, {x, y}, v.eager, {r, std::vector<int64_t>{d}, keep, std::nullopt},
                                {false, 1e-5, 1e-5}));
  EXPECT_TRUE(checkReduce(v.expr, {x, y}, v.eager, {"sum", std::vector<int64_t>{1, 2}, true, std::nullopt},
                          {false, 1e-5, 1e-5}));
}

// Few outputs, long reductions: the reduced space is split into parts whose partial results
// are merged (sum / amax / argmax / mean over thousands of elements).
TEST(ReduceRandom, LongReductionsSplitIntoParts) {
  Gen g(105);
  const ValueExpr& v = valueExprs()[3];
  T ops = {g.tensor({3000, 1}, at::kFloat), g.tensor({1, 3}, at::kFloat)};
  for (const std::string r : {"sum", "mean", "amax", "amin", "argmax", "argmin", "any", "all"}) {
    EXPECT_TRUE(
        checkReduce(v.expr, ops, v.eager, {r, std::vector<int64_t>{0}, false, std::nullopt}, {false, 1e-5, 1e-4}));
    EXPECT_TRUE(checkReduce(v.expr, ops, v.eager, {r, std::nullopt, false, std::nullopt}, {false, 1e-5, 1e-4}));
  }
  T ints = {g.tensor({2500, 1}, at::kInt), g.tensor({1, 2}, at::kInt)};
  for (const std::string r : {"sum", "prod", "amax", "argmin"})
    EXPECT_TRUE(checkReduce(v.expr, ints, v.eager, {r, std::vector<int64_t>{0}, true, std::nullopt}));
}

}  // namespace

}  // namespace ops_reduce_random_test
