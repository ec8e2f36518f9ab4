// analyzeCached (kernels/reference/analysis.h) against analyze: calls whose signatures differ in one part
// only (dtype, a 0-dim operand's wrapped-number status, layout, sizes, the reduction's dims,
// keepdim, dtype, parameters and epilogue), interleaved so that a key missing that part would
// hand one call another's analysis.
#include "test_util.h"

#include "kernels/reference/analysis.h"

namespace ops_analysis_cache_test {

namespace {

using tsfuse::Analysis;
using tsfuse::ReduceSpec;
using T = std::vector<at::Tensor>;

::testing::AssertionResult sameAnalysis(const std::optional<Analysis>& want, const std::optional<Analysis>& got) {
  if (want.has_value() != got.has_value())
    return ::testing::AssertionFailure() << "analysis " << (want ? "present" : "absent") << " vs "
                                         << (got ? "present" : "absent");
  if (!want) return ::testing::AssertionSuccess();
  const Analysis &a = *want, &b = *got;
  const bool same = a.resultType == b.resultType && a.computeType == b.computeType && a.shape == b.shape &&
                    a.valueShape == b.valueShape && a.valueOrder == b.valueOrder && a.outSizes == b.outSizes &&
                    a.outStrides == b.outStrides && a.outDtype == b.outDtype && a.reducedSizes == b.reducedSizes &&
                    a.reducedDtype == b.reducedDtype && a.epilogueKeepsShape == b.epilogueKeepsShape &&
                    bool(a.epilogue) == bool(b.epilogue) &&
                    (!a.epilogue || a.epilogue->outDtype == b.epilogue->outDtype);
  if (same) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "out " << at::IntArrayRef(a.outSizes) << "/" << at::IntArrayRef(a.outStrides)
                                       << " " << a.outDtype << " vs " << at::IntArrayRef(b.outSizes) << "/"
                                       << at::IntArrayRef(b.outStrides) << " " << b.outDtype;
}

struct Call {
  std::string expr;
  T ops;
  std::optional<ReduceSpec> reduce;
};

ReduceSpec red(tsfuse::Reduction k, std::optional<std::vector<int64_t>> dims, bool keepdim = false,
               std::optional<c10::ScalarType> dtype = std::nullopt) {
  ReduceSpec r;
  r.kind = k;
  r.dims = std::move(dims);
  r.keepdim = keepdim;
  r.dtype = dtype;
  return r;
}

TEST(AnalysisCache, EveryPartOfTheSignatureCounts) {
  using tsfuse::Reduction;
  at::Tensor x = at::rand({5, 1, 3}), y = at::rand({1, 4, 3});
  at::Tensor wrapped = at::scalar_tensor(2.5, at::kDouble);
  wrapped.unsafeGetTensorImpl()->set_wrapped_number(true);
  const std::string sub = "v1: sub($0, $1)", add = "v1: add($0, $1)";
  ReduceSpec withEpi = red(Reduction::Sum, std::vector<int64_t>{2});
  withEpi.epilogue = tsfuse::cachedExpr("v1: mul($0, $1)");
  ReduceSpec norm1 = red(Reduction::Norm, std::vector<int64_t>{2}), norm2 = norm1;
  norm1.p = 1.0;
  ReduceSpec var0 = red(Reduction::Var, std::vector<int64_t>{1}), var1 = var0;
  var0.correction = 0.0;
  const std::vector<Call> calls = {
      {sub, {x, y}, std::nullopt},
      {sub, {x.to(at::kDouble), y}, std::nullopt},  // dtype
      {sub, {x.to(at::kInt), y.to(at::kInt)}, std::nullopt},
      {add, {x.to(at::kInt), wrapped}, std::nullopt},  // wrapped number: float
      {add,
       {x.to(at::kInt), at::scalar_tensor(2.5, at::kDouble)},
       std::nullopt},  // 0-dim tensor: float too, other rule
      {add, {x.to(at::kHalf), at::scalar_tensor(2.5, at::kDouble)}, std::nullopt},  // half stays half
      {add, {x.to(at::kHalf), at::rand({1}, at::kDouble)}, std::nullopt},           // a 1-dim operand promotes
      {sub, {x.transpose(0, 2).contiguous().transpose(0, 2), y}, std::nullopt},     // layout
      {sub, {x, y.expand({5, 4, 3})}, std::nullopt},                                // strides 0
      {sub, {at::rand({5, 2, 3}), y}, std::nullopt},                                // sizes (raises: analysis absent)
      {sub, {x, y}, red(Reduction::Sum, std::vector<int64_t>{2})},
      {sub, {x, y}, red(Reduction::Sum, std::vector<int64_t>{1})},                      // dims
      {sub, {x, y}, red(Reduction::Sum, std::vector<int64_t>{2}, true)},                // keepdim
      {sub, {x, y}, red(Reduction::Sum, std::vector<int64_t>{2}, false, at::kDouble)},  // dtype
      {sub, {x, y}, red(Reduction::Sum, std::nullopt)},                                 // all dims
      {sub, {x, y}, red(Reduction::Amax, std::vector<int64_t>{2})},                     // kind
      {sub, {x, y}, norm1},
      {sub, {x, y}, norm2},  // order
      {sub, {x, y}, var0},
      {sub, {x, y}, var1},                                    // correction
      {sub, {x, y, at::rand({5, 4}, at::kDouble)}, withEpi},  // epilogue
      {sub, {x, y, at::rand({5, 4})}, withEpi},               // its operand's dtype
  };
  for (int round = 0; round < 3; ++round)
    for (size_t i = 0; i < calls.size(); ++i) {
      const Call& c = calls[i];
      auto e = tsfuse::cachedExpr(c.expr);
      const ReduceSpec* r = c.reduce ? &*c.reduce : nullptr;
      EXPECT_TRUE(sameAnalysis(tsfuse::analyze(*e, c.ops, r), tsfuse::analyzeCached(e, c.ops, r)))
          << "call " << i << " round " << round;
    }
  // The cases differ where the test means them to (else the test above could not fail).
  auto e = tsfuse::cachedExpr(add);
  EXPECT_NE(tsfuse::analyzeCached(e, {x.to(at::kInt), wrapped}, nullptr)->outDtype,
            tsfuse::analyzeCached(e, {x.to(at::kInt), x.to(at::kInt)}, nullptr)->outDtype);
  EXPECT_NE(tsfuse::analyzeCached(e, {x.to(at::kHalf), at::rand({1}, at::kDouble)}, nullptr)->outDtype,
            tsfuse::analyzeCached(e, {x.to(at::kHalf), at::scalar_tensor(2.5, at::kDouble)}, nullptr)->outDtype);
}

// The fused op itself, run on the same signature twice and on a different one in between, gives
// eager's results each time.
TEST(AnalysisCache, FusedCallsAlternatingSignatures) {
  tsfuse_test::Gen g(7);
  at::Tensor a = g.tensor({6, 1}, at::kFloat), b = g.tensor({1, 5}, at::kFloat);
  at::Tensor ai = g.tensor({6, 1}, at::kInt), bi = g.tensor({1, 5}, at::kInt);
  for (int round = 0; round < 3; ++round) {
    EXPECT_TRUE(at::equal(tsfuse::pairwise({a, b}, "v1: sub($0, $1); abs(%0)"), at::abs(at::sub(a, b))));
    at::Tensor gotInt = tsfuse::pairwise({ai, bi}, "v1: sub($0, $1); abs(%0)");
    EXPECT_EQ(gotInt.scalar_type(), at::kInt);
    EXPECT_TRUE(at::equal(gotInt, at::abs(at::sub(ai, bi))));
    at::Tensor t = b.t().contiguous().t();  // same sizes, other strides
    at::Tensor got = tsfuse::pairwise({a.t(), t.t()}, "v1: sub($0, $1); abs(%0)");
    at::Tensor want = at::abs(at::sub(a.t(), t.t()));
    EXPECT_EQ(got.strides(), want.strides());
    EXPECT_TRUE(at::equal(got, want));
  }
}

}  // namespace

}  // namespace ops_analysis_cache_test
