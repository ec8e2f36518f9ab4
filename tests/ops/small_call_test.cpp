// A fused call small enough that the ATen ops it replaced cost less than its own fixed work runs as
// those ops (kernels/runtime/small_call.h): eager's bits and layout, eager's errors, and the fused
// kernels beyond the bound (more values, more ops). Every other test runs its
// small shapes through the fused kernels, as stand-ins for large ones: this file's global
// environment sets the bound to 0 for the whole binary, and its tests set it back.
#include "test_util.h"

#include "kernels/backends/path_counts.h"
#include "kernels/runtime/small_call.h"

namespace ops_small_call_test {

namespace {

using tsfuse_test::Gen;
using tsfuse_test::sameTensor;

class KernelsForSmallShapes : public ::testing::Environment {
 public:
  void SetUp() override { tsfuse::setSmallCallValues(0); }
};
::testing::Environment* const kEnvironment = ::testing::AddGlobalTestEnvironment(new KernelsForSmallShapes);

// The default bound while it lives.
struct SmallCallsOn {
  const int64_t was = tsfuse::smallCallValues();
  SmallCallsOn() { tsfuse::setSmallCallValues(2048); }
  ~SmallCallsOn() { tsfuse::setSmallCallValues(was); }
};

struct Ran {
  at::Tensor value;
  bool small = false;
};

Ran reduceCall(const std::vector<at::Tensor>& ops, const std::string& expr, const std::string& kind,
               std::vector<int64_t> dims, bool keepdim, std::optional<std::string> epilogue = std::nullopt) {
  const int64_t before = tsfuse::pathCount(tsfuse::PathCount::SmallCalls);
  Ran r;
  r.value = tsfuse::reduce(ops, expr, kind, dims, keepdim, std::nullopt, epilogue);
  r.small = tsfuse::pathCount(tsfuse::PathCount::SmallCalls) > before;
  return r;
}

Ran mapCall(const std::vector<at::Tensor>& ops, const std::string& expr) {
  const int64_t before = tsfuse::pathCount(tsfuse::PathCount::SmallCalls);
  Ran r;
  r.value = tsfuse_test::pairwiseBoxed(ops, expr);
  r.small = tsfuse::pathCount(tsfuse::PathCount::SmallCalls) > before;
  return r;
}

TEST(SmallCall, TinyMapsRunAsTheirAtenOpsWithEagersBits) {
  const SmallCallsOn on;
  Gen g(5);
  const std::string expr = "v1: sub($0, $1); abs(%0); clamp(%1, 0, 1.5); mul(%2, $1)";  // 4 ops
  for (const auto& [xs, ys, small] : std::vector<std::tuple<std::vector<int64_t>, std::vector<int64_t>, bool>>{
           {{16, 1}, {1, 16}, true},    // 256 values
           {{32, 1}, {1, 32}, true},    // 1024: 4 ops on each, twice the bound
           {{41, 1}, {1, 25}, false},   // 1025
           {{0, 1}, {1, 7}, true},      // empty
           {{3, 1}, {1, 512}, false}})  // a wide space of small operands
    for (at::ScalarType t : {at::kFloat, at::kDouble}) {
      const std::vector<at::Tensor> ops{g.tensor(xs, t, tsfuse_test::kAllSpecials),
                                        g.tensor(ys, t, tsfuse_test::kAllSpecials)};
      const Ran r = mapCall(ops, expr);
      EXPECT_EQ(r.small, small) << xs << " " << ys;
      const at::Tensor want = at::mul(at::clamp(at::abs(ops[0] - ops[1]), 0, 1.5), ops[1]);  // eager's ops
      EXPECT_TRUE(sameTensor(want, r.value, /*exact=*/true)) << xs << " " << ys;
    }
  // Five ops: the fused call costs less than they do.
  const std::vector<at::Tensor> ops{g.tensor({16, 1}, at::kFloat), g.tensor({1, 16}, at::kFloat)};
  EXPECT_FALSE(mapCall(ops, "v1: sub($0, $1); abs(%0); clamp(%1, 0, 1.5); mul(%2, $1); neg(%3)").small);
}

TEST(SmallCall, TinyReductionsRunAsTheirAtenOpsWithEagersBits) {
  const SmallCallsOn on;
  Gen g(6);
  // The centre loss's masked sum: compare, cast, product, clamp, sum, then its epilogue (6 ops).
  const at::Tensor labels = at::randint(0, 10, {128, 1}, at::kLong);
  const at::Tensor classes = at::arange(10, at::kLong).view({1, 10});
  const at::Tensor dist = g.tensor({128, 10}, at::kFloat);
  const std::string masked = "v1: eq($0, $1); to(%0, float32); mul($2, %1); clamp(%2, 1e-12, 1e+12)";
  const Ran all = reduceCall({labels, classes, dist, at::scalar_tensor(128, at::kLong)}, masked, "sum", {}, false,
                             "v1: div($0, $1)");
  EXPECT_TRUE(all.small);
  const at::Tensor want =  // eager's ops
      at::div((dist * at::eq(labels, classes).to(at::kFloat)).clamp(1e-12, 1e+12).sum(),
              at::scalar_tensor(128, at::kLong));
  EXPECT_TRUE(sameTensor(want, all.value, /*exact=*/true));
  // A row sum of squares over [rows, 2], keepdim: small up to 2048 values. Beyond, the map
  // folding each row's two values (kernels/runtime/small_reduction.h, 4 ops) is not small either.
  for (int64_t rows : {128, 1024, 1025, 2049}) {
    const at::Tensor x = g.tensor({rows, 2}, at::kFloat, tsfuse_test::kAllSpecials);
    const Ran r = reduceCall({x}, "v1: pow($0, 2)", "sum", {1}, true);
    EXPECT_EQ(r.small, rows <= 1024) << rows;
    EXPECT_TRUE(sameTensor(at::pow(x, 2).sum(1, true), r.value, /*exact=*/true)) << rows;
  }
}

TEST(SmallCall, EagersErrorsAndTheBoundOff) {
  const SmallCallsOn on;
  Gen g(7);
  const std::vector<at::Tensor> ops{g.tensor({3, 4}, at::kFloat), g.tensor({5}, at::kFloat)};
  const std::string smallError = tsfuse_test::errorOf([&] { mapCall(ops, "v1: add($0, $1)"); });
  tsfuse::setSmallCallValues(0);
  const std::string fusedError = tsfuse_test::errorOf([&] { mapCall(ops, "v1: add($0, $1)"); });
  EXPECT_FALSE(fusedError.empty());
  EXPECT_EQ(smallError, fusedError);
  EXPECT_FALSE(mapCall({g.tensor({4, 1}, at::kFloat), g.tensor({1, 4}, at::kFloat)}, "v1: add($0, $1)").small);
}

}  // namespace

}  // namespace ops_small_call_test
