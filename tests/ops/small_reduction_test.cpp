// A sum or product of two to four values per output runs as the map folding them
// (kernels/runtime/small_reduction.h): eager's bits, sizes and strides (ATen over the stored value),
// for float32 and float64, every reduced-dim position, keepdim, operands broadcast along the
// reduced dim or without it, a number read at run time, an epilogue with an operand of its own,
// and NaN, infinities and signed zeros (two -0.0 sum to +0.0). The forms it declines (five values,
// two reduced dims, mean, integers, a dtype argument) run the reduction as before, with the same bits.
#include "test_util.h"

#include "kernels/reference/eval_fused.h"
#include "kernels/runtime/reduce_spec.h"

namespace ops_small_reduction_test {

namespace {

using tsfuse_test::Gen;
using tsfuse_test::sameTensor;

struct Call {
  std::vector<at::Tensor> ops;
  std::string expr, kind;
  std::vector<int64_t> dims;
  bool keepdim = false;
  std::optional<std::string> epilogue;
};

// The op's result against ATen's over the stored value, and whether the map ran.
::testing::AssertionResult runsAsMap(const Call& c, bool map) {
  const int64_t before = tsfuse::smallReductionsUnrolled();
  const at::Tensor got = tsfuse::reduce(c.ops, c.expr, c.kind, c.dims, c.keepdim, std::nullopt, c.epilogue);
  const bool ran = tsfuse::smallReductionsUnrolled() > before;
  std::optional<c10::string_view> epi;
  if (c.epilogue) epi = *c.epilogue;
  const tsfuse::ReduceSpec spec = tsfuse::makeReduceSpec(c.kind, c.dims, c.keepdim, std::nullopt, epi);
  const at::Tensor want = tsfuse::evalFused(tsfuse::Expr::parse(c.expr), c.ops, &spec)[0];
  if (ran != map) return ::testing::AssertionFailure() << "the map " << (ran ? "ran" : "did not run");
  return sameTensor(want, got, /*exact=*/true);
}

TEST(SmallReduction, FewValuesFoldedAsEagerFoldsThem) {
  Gen g(61);
  int cases = 0;
  for (at::ScalarType t : {at::kFloat, at::kDouble})
    for (int64_t k : {2, 3, 4})
      for (int64_t dim : {0, 1, 2})
        for (bool keepdim : {false, true})
          for (const char* kind : {"sum", "prod"}) {
            // k values along `dim`; of the other two dims x spans the first (37), y the second (41).
            std::vector<int64_t> xs(3), ys(3);
            for (int64_t d = 0, other = 0; d < 3; ++d) {
              const bool first = d != dim && other++ == 0;
              xs[d] = d == dim ? k : first ? 37 : 1;
              ys[d] = d == dim ? k : first ? 1 : 41;
            }
            // Signed zeros only where no minimum sees two of them (docs/exactness.md: eager's own
            // answer there depends on its loop).
            for (const bool zeros : {false, true}) {
              const int specials = zeros ? tsfuse_test::kAllSpecials : tsfuse_test::kNaNInf;
              Call c{{g.tensor(xs, t, specials), g.tensor(ys, t, specials)},
                     zeros ? "v1: sub($0, $1); mul(%0, 1.5); add(%1, $0)"
                           : "v1: minimum($0, $1); sub(%0, $1); mul(%1, 1.5)",
                     kind,
                     {dim},
                     keepdim};
              EXPECT_TRUE(runsAsMap(c, true))
                  << c.expr << ": " << kind << " of " << k << " along " << dim << " " << t << " keepdim " << keepdim;
              ++cases;
            }
          }
  EXPECT_EQ(cases, 144);
}

TEST(SmallReduction, SignedZerosSumToPositiveZero) {
  const at::Tensor z = at::full({5, 1, 2}, -0.0), w = at::full({1, 3, 2}, -0.0);
  EXPECT_TRUE(runsAsMap({{z, w}, "v1: add($0, $1)", "sum", {2}}, true));
  EXPECT_TRUE(runsAsMap({{z, w}, "v1: add($0, $1)", "prod", {2}}, true));
}

TEST(SmallReduction, BroadcastOperandsNumbersAndAnEpilogue) {
  Gen g(62);
  // a [N, 1, 1] is the same for each of the 3 values, b [3] lacks the N and M dims, the number
  // is read at run time, and the epilogue reads an [M] operand.
  const at::Tensor a = g.tensor({29, 1, 1}, at::kFloat), b = g.tensor({3}, at::kFloat),
                   c = g.tensor({1, 31, 3}, at::kFloat), m = g.tensor({31}, at::kFloat);
  for (bool keepdim : {false, true})
    for (const char* kind : {"sum", "prod"}) {
      std::vector<at::Tensor> ops{a, b, c, tsfuse::wrappedNumber(0.25)};
      if (!keepdim) ops.push_back(m);
      Call call{
          ops,     "v1: sub($0, $1); mul(%0, $2); add(%1, $3)",
          kind,    {-1},
          keepdim, keepdim ? std::optional<std::string>() : std::optional<std::string>("v1: div($0, $1); sqrt(%0)")};
      EXPECT_TRUE(runsAsMap(call, true)) << kind << " keepdim " << keepdim;
    }
  // Corners sliced from boxes (YOLOX's box1[:, None, :2] against box2[:, 2:]).
  const at::Tensor b1 = g.tensor({29, 4}, at::kFloat), b2 = g.tensor({31, 4}, at::kFloat);
  EXPECT_TRUE(
      runsAsMap({{b1.slice(1, 0, 2).unsqueeze(1), b2.slice(1, 2, 4), b1.slice(1, 2, 4).unsqueeze(1), b2.slice(1, 0, 2)},
                 "v1: maximum($0, $1); minimum($2, $3); sub(%1, %0); clamp(%2, 0, None)",
                 "prod",
                 {2}},
                true));
  // A permuted operand whose reduction eager lays out otherwise than the map would: the reduction.
  const at::Tensor t = g.tensor({2, 19, 23}, at::kFloat).permute({2, 1, 0});
  EXPECT_TRUE(runsAsMap({{t, g.tensor({1, 19, 2}, at::kFloat)}, "v1: maximum($0, $1)", "prod", {2}}, false));
}

TEST(SmallReduction, OtherFormsRunTheReduction) {
  Gen g(63);
  const at::Tensor x = g.tensor({17, 1, 5}, at::kFloat), y = g.tensor({1, 13, 5}, at::kFloat);
  EXPECT_TRUE(runsAsMap({{x, y}, "v1: sub($0, $1)", "sum", {2}}, false));  // five values
  const at::Tensor x2 = g.tensor({17, 2, 2}, at::kFloat), y2 = g.tensor({1, 2, 2}, at::kFloat);
  EXPECT_TRUE(runsAsMap({{x2, y2}, "v1: sub($0, $1)", "sum", {1, 2}}, false));  // two reduced dims
  EXPECT_TRUE(runsAsMap({{x2, y2}, "v1: sub($0, $1)", "mean", {2}}, false));
  EXPECT_TRUE(runsAsMap({{x2, y2}, "v1: sub($0, $1)", "amax", {2}}, false));
  const at::Tensor i = g.tensor({17, 1, 2}, at::kLong), j = g.tensor({1, 9, 2}, at::kLong);
  EXPECT_TRUE(runsAsMap({{i, j}, "v1: sub($0, $1)", "sum", {2}}, false));  // integers
  tsfuse_test::ReductionsNotUnrolled off;
  EXPECT_TRUE(runsAsMap({{x2, y2}, "v1: sub($0, $1)", "prod", {2}}, false));  // switched off
}

}  // namespace

}  // namespace ops_small_reduction_test
