// tsfuse::reduce on special cases, against eager: NaN propagation through amax/amin, first index
// of the extremum (NaN counts) for argmax/argmin, truth of NaN and -0.0 in any/all, result dtypes
// (sum of bool -> int64, dtype=), empty reductions, 0-dim operands, and the path taken.
#include "test_util.h"

namespace ops_reduce_special_test {

namespace {

using namespace tsfuse_test;
using T = std::vector<at::Tensor>;

const std::string kMax = "v1: maximum($0, $1)";
const EagerFn kMaxFn = [](const T& x) { return at::maximum(x[0], x[1]); };
const std::string kMul = "v1: mul($0, $1); add(%0, 1)";
const EagerFn kMulFn = [](const T& x) { return at::add(at::mul(x[0], x[1]), 1); };

std::vector<std::optional<std::vector<int64_t>>> singleDims() {
  return {std::vector<int64_t>{0}, std::vector<int64_t>{1}, std::vector<int64_t>{-1}, std::nullopt};
}

TEST(ReduceSpecial, AmaxAminPropagateNaN) {
  Gen g(200);
  FailureLog log;
  for (at::ScalarType dt : {at::kFloat, at::kDouble})
    for (const std::string r : {"amax", "amin"})
      for (const auto& d : singleDims())
        for (bool keep : {false, true}) {
          T ops = {g.tensor({6, 1}, dt, kNaNInf), g.tensor({1, 7}, dt, kNaNInf)};
          log.add(checkReduce(kMax, ops, kMaxFn, {r, d, keep, std::nullopt}));
          T big = {g.tensor({1500, 1}, dt, kNaN), g.tensor({1, 3}, dt)};  // split into parts
          log.add(checkReduce(kMax, big, kMaxFn, {r, d, keep, std::nullopt}));
          T vert = {g.tensor({40, 1}, dt, kNaNInf), g.tensor({1, 20}, dt, kNaNInf)};  // wide kept dim
          log.add(checkReduce(kMax, vert, kMaxFn, {r, d, keep, std::nullopt}));
        }
  EXPECT_TRUE(log.result());
}

TEST(ReduceSpecial, ArgmaxArgminFirstIndexOfExtremumAndNaN) {
  Gen g(201);
  FailureLog log;
  for (const std::string r : {"argmax", "argmin"})
    for (const auto& d : singleDims())
      for (bool keep : {false, true}) {
        // Many ties: the first index wins.
        T ints = {at::randint(0, 3, {9, 1}, g.gen, at::kInt), at::randint(0, 3, {1, 8}, g.gen, at::kInt)};
        log.add(checkReduce(kMax, ints, kMaxFn, {r, d, keep, std::nullopt}));
        // NaN counts as the extremum (its first occurrence); inf ties.
        T f = {g.tensor({9, 1}, at::kFloat, kNaNInf), g.tensor({1, 8}, at::kFloat, kInf)};
        log.add(checkReduce(kMax, f, kMaxFn, {r, d, keep, std::nullopt}));
        // Long reductions split into parts: ties and NaN in later parts.
        at::Tensor a = at::randint(0, 4, {3000, 1}, g.gen, at::kLong).to(at::kFloat);
        a.index_put_({2700, 0}, std::numeric_limits<float>::quiet_NaN());
        a.index_put_({2900, 0}, std::numeric_limits<float>::quiet_NaN());
        log.add(checkReduce(kMax, {a, at::zeros({1, 2})}, kMaxFn, {r, d, keep, std::nullopt}));
        log.add(checkReduce(kMax, {a.neg().nan_to_num(0.5), at::zeros({1, 2})}, kMaxFn, {r, d, keep, std::nullopt}));
        // Reducing dim 0 with a wide innermost kept dim (tiles run along the kept dim).
        T vert = {g.tensor({40, 1}, at::kFloat, kNaNInf), g.tensor({1, 20}, at::kFloat, kInf)};
        log.add(checkReduce(kMax, vert, kMaxFn, {r, d, keep, std::nullopt}));
      }
  EXPECT_TRUE(log.result());
}

// A row-major [N, M] operand reduced over M (its rows): tiles run along the rows, read in place,
// and a tile's first extremum is found by vector passes. Ties of equal values (the first index
// wins), NaN in some rows (the first one), every order-free reduction; float32 and float64, rows
// longer than a tile.
TEST(ReduceSpecial, ARowMajorOperandReducedOverItsRows) {
  Gen g(206);
  FailureLog log;
  for (at::ScalarType dt : {at::kFloat, at::kDouble}) {
    at::Tensor a = at::randint(0, 5, {64, 1500}, g.gen, at::kLong).to(dt);
    a.index_put_({3, 700}, std::numeric_limits<double>::quiet_NaN());
    a.index_put_({3, 1400}, std::numeric_limits<double>::quiet_NaN());
    a.index_put_({40, 2}, std::numeric_limits<double>::quiet_NaN());
    const T ops = {a, g.tensor({64, 1}, dt)};
    for (const std::string r : {"amax", "amin", "argmax", "argmin", "any", "all"})
      for (bool keep : {false, true})
        log.add(checkReduce(kMax, ops, kMaxFn, {r, std::vector<int64_t>{1}, keep, std::nullopt}));
  }
  EXPECT_TRUE(log.result());
}

TEST(ReduceSpecial, AnyAllTruthOfNaNAndSignedZero) {
  FailureLog log;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  at::Tensor a = at::tensor({0.0, -0.0, nan, 0.0}, at::kDouble).view({4, 1});
  at::Tensor b = at::tensor({0.0, -0.0, 1.0}, at::kDouble).view({1, 3});
  EagerFn mul = [](const T& x) { return at::mul(x[0], x[1]); };
  for (const std::string r : {"any", "all"})
    for (const auto& d : singleDims())
      for (bool keep : {false, true}) {
        log.add(checkReduce("v1: mul($0, $1)", {a, b}, mul, {r, d, keep, std::nullopt}));
        log.add(checkReduce("v1: mul($0, $1)", {a.to(at::kFloat), b.to(at::kInt)}, mul, {r, d, keep, std::nullopt}));
      }
  EXPECT_TRUE(log.result());
}

TEST(ReduceSpecial, ResultDtypes) {
  Gen g(202);
  FailureLog log;
  const CheckOpts kClose{false, 1e-5, 1e-6};  // float results: allclose; integer results: equal
  T b = {g.tensor({5, 1}, at::kBool), g.tensor({1, 4}, at::kBool)};
  EagerFn andFn = [](const T& x) { return at::logical_and(at::logical_not(x[0]), x[1]); };
  EagerFn ltFn = [](const T& x) { return at::lt(x[0], x[1]); };
  for (const auto& d : singleDims()) {
    log.add(checkReduce("v1: lt($0, $1)", {g.tensor({5, 1}, at::kFloat), g.tensor({1, 4}, at::kFloat)}, ltFn,
                        {"sum", d, false, std::nullopt}, kClose));  // bool -> int64
    log.add(checkReduce("v1: logical_not($0); logical_and(%0, $1)", b, andFn, {"prod", d, true, std::nullopt}, kClose));
    T u = {g.tensor({5, 1}, at::kByte), g.tensor({1, 4}, at::kByte)};
    log.add(checkReduce(kMul, u, kMulFn, {"sum", d, false, std::nullopt}, kClose));  // uint8 -> int64
    log.add(checkReduce(kMul, u, kMulFn, {"sum", d, false, at::kByte}, kClose));     // wraps in uint8
    T i = {g.tensor({5, 1}, at::kInt), g.tensor({1, 4}, at::kInt)};
    log.add(checkReduce(kMul, i, kMulFn, {"mean", d, false, at::kDouble}, kClose));
    log.add(checkReduce(kMul, i, kMulFn, {"sum", d, true, at::kInt}, kClose));
    log.add(checkReduce(kMul, i, kMulFn, {"prod", d, false, at::kFloat}, kClose));
    T f = {g.tensor({5, 1}, at::kFloat), g.tensor({1, 4}, at::kFloat)};
    log.add(checkReduce(kMul, f, kMulFn, {"sum", d, false, at::kDouble}, kClose));
    log.add(checkReduce(kMul, f, kMulFn, {"mean", d, true, at::kDouble}, kClose));
  }
  EXPECT_TRUE(log.result());
  // Spelled out: counting a comparison gives int64, as eager's sum of bool does.
  at::Tensor count = tsfuse::reduce({at::ones({3, 1}), at::zeros({1, 2})}, "v1: gt($0, $1)", "sum");
  EXPECT_EQ(count.scalar_type(), at::kLong);
  EXPECT_EQ(count.item<int64_t>(), 6);
}

TEST(ReduceSpecial, EmptyReductionsAndEmptyOutputs) {
  Gen g(203);
  FailureLog log;
  for (at::ScalarType dt : {at::kFloat, at::kInt})
    for (const std::string r : {"sum", "mean", "prod", "amax", "amin", "any", "all", "argmax", "argmin"})
      for (const auto& d : singleDims())
        for (bool keep : {false, true}) {
          // Reducing a size-0 dim (identity or eager's error) and keeping one (empty output).
          T ops = {g.tensor({0, 1}, dt), g.tensor({1, 3}, dt)};
          log.add(checkReduce(kMul, ops, kMulFn, {r, d, keep, std::nullopt}, {false, 1e-5, 1e-6}),
                  r + (keep ? " keepdim " : " "));
        }
  EXPECT_TRUE(log.result());
}

// All operands 0-dim (and 0-dim with [1]), dim=[0] / [-1] / None. Run in a child process (gtest
// death-test machinery) so that a crash is reported as this test's failure instead of ending the
// whole test binary; the child exits 0 only when every case matches eager.
void zeroDimCases() {
  Gen g(204);
  FailureLog log;
  T ops = {g.tensor({}, at::kFloat), g.tensor({}, at::kFloat)};
  std::vector<std::optional<std::vector<int64_t>>> dims = {std::vector<int64_t>{0}, std::vector<int64_t>{-1},
                                                           std::nullopt};
  for (const std::string r : {"sum", "mean", "prod", "amax", "amin", "any", "all", "argmax", "argmin"})
    for (const auto& d : dims)
      for (bool keep : {false, true}) {
        log.add(checkReduce(kMul, ops, kMulFn, {r, d, keep, std::nullopt}));
        log.add(checkReduce(kMul, {ops[0], g.tensor({1}, at::kFloat)}, kMulFn, {r, d, keep, std::nullopt}));
      }
  auto res = log.result(20);
  if (!res) {
    std::fprintf(stderr, "%s\n", res.message());
    std::fflush(stderr);
    std::_Exit(1);
  }
  std::_Exit(0);
}

TEST(ReduceSpecial, ZeroDimOperands) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(zeroDimCases(), ::testing::ExitedWithCode(0), "")
      << "the cases crashed (killed by a signal) or mismatched eager (see the child's output above)";
}

// eager: "argmax(): does not support bool input".
TEST(ReduceSpecial, ArgmaxArgminOfBoolRaiseLikeEager) {
  Gen g(205);
  T ops = {g.tensor({4, 1}, at::kFloat), g.tensor({1, 5}, at::kFloat)};
  EagerFn lt = [](const T& x) { return at::lt(x[0], x[1]); };
  for (const std::string r : {"argmax", "argmin"}) {
    EXPECT_TRUE(checkReduce("v1: lt($0, $1)", ops, lt, {r, std::vector<int64_t>{1}, false, std::nullopt}));
    EXPECT_TRUE(checkReduce("v1: lt($0, $1)", ops, lt, {r, std::nullopt, false, std::nullopt}));
  }
}

// --- paths -----------------------------------------------------------------------------------

TEST(ReducePath, SeedSimilarityRunsNative) {
  Gen g(206);
  at::Tensor x = g.tensor({16, 24}, at::kFloat), y = g.tensor({16, 24}, at::kFloat);
  T ops = {x.unsqueeze(2), y.unsqueeze(1)};  // [S, D, 1] and [S, 1, D]
  EagerFn f = [](const T& v) { return at::lt(at::abs(at::sub(v[0], v[1])), 1); };
  EXPECT_TRUE(checkReduce("v1: sub($0, $1); abs(%0); lt(%1, 1)", ops, f,
                          {"sum", std::vector<int64_t>{0}, false, std::nullopt}, {true, 0, 0, "native"}));
}

TEST(ReducePath, NativeForEveryReductionOnNativeDtypes) {
  Gen g(207);
  FailureLog log;
  for (at::ScalarType dt : {at::kFloat, at::kDouble, at::kInt, at::kLong, at::kByte})
    for (const std::string r : {"sum", "mean", "prod", "amax", "amin", "any", "all", "argmax", "argmin"}) {
      if (r == "mean" && !at::isFloatingType(dt)) continue;  // eager rejects integer mean
      T ops = {g.tensor({4, 1}, dt), g.tensor({1, 5}, dt)};
      log.add(checkReduce(kMul, ops, kMulFn, {r, std::vector<int64_t>{1}, false, std::nullopt},
                          {false, 1e-5, 1e-6, "native"}));
    }
  EXPECT_TRUE(log.result());
}

TEST(ReducePath, ChunkedForHalfAndBFloat16) {
  Gen g(208);
  for (at::ScalarType dt : {at::kHalf, at::kBFloat16}) {
    T small = {g.tensor({4, 1}, dt), g.tensor({1, 5}, dt)};
    EXPECT_TRUE(checkReduce(kMul, small, kMulFn, {"sum", std::vector<int64_t>{1}, false, std::nullopt},
                            {true, 0, 0, "chunked"}));
    T large = {g.tensor({600, 1, 1}, dt), g.tensor({1, 30, 20}, dt)};  // 360k elements, reduced over dim 2
    EXPECT_TRUE(checkReduce(kMul, large, kMulFn, {"amax", std::vector<int64_t>{2}, false, std::nullopt},
                            {true, 0, 0, "chunked"}));
    EXPECT_TRUE(checkReduce(kMul, large, kMulFn, {"sum", std::vector<int64_t>{-1}, true, std::nullopt},
                            {true, 0, 0, "chunked"}));
  }
}

TEST(ReducePath, EmptyOutput) {
  Gen g(209);
  T ops = {g.tensor({0, 1}, at::kFloat), g.tensor({1, 3}, at::kFloat)};
  EXPECT_TRUE(
      checkReduce(kMul, ops, kMulFn, {"sum", std::vector<int64_t>{1}, false, std::nullopt}, {true, 0, 0, "empty"}));
}

}  // namespace

}  // namespace ops_reduce_special_test
