// The iteration plan (kernels/plan/iteration.h) every path walks: kept dims in the output's memory
// order, reduced dims in dim order, each operand's access along the lanes, the chunked path's slab
// dim, and why a native path cannot take a call.
#include "test_util.h"

#include "kernels/runtime/reduce_spec.h"
#include "kernels/plan/iteration.h"

namespace ops_iteration_plan_test {

namespace {

using namespace tsfuse_test;
using tsfuse::Access;
using tsfuse::IterationPlan;
using T = std::vector<at::Tensor>;
using V = std::vector<int64_t>;
using A = std::vector<Access>;

V v(at::IntArrayRef dims) { return dims.vec(); }
A a(c10::ArrayRef<Access> access) { return access.vec(); }

IterationPlan planOf(const std::string& expr, const T& ops, const tsfuse::ReduceSpec* reduce = nullptr) {
  auto e = tsfuse::cachedExpr(expr);
  auto an = tsfuse::analyze(*e, ops, reduce);
  EXPECT_TRUE(an.has_value());
  return IterationPlan::make(*e, ops, reduce, *an, /*bindData=*/true);
}

tsfuse::ReduceSpec sumOver(V dims, bool keepdim) { return tsfuse::makeReduceSpec("sum", dims, keepdim, std::nullopt); }

const char* kSub = "v1: sub($0, $1)";

TEST(IterationPlan, MapKeepsEveryDimInTheOutputsMemoryOrder) {
  // Transposed operands: eager's output takes their layout, so the plan walks dim 1 outermost.
  at::Tensor x = at::randn({6, 5}).t(), y = at::randn({6, 5}).t();
  IterationPlan p = planOf(kSub, {x, y});
  EXPECT_EQ(p.unsupported, nullptr);
  EXPECT_EQ(v(p.keptOrder), (V{1, 0}));
  EXPECT_EQ(v(p.outOrder), (V{1, 0}));
  EXPECT_TRUE(p.reducedDims.empty());
  EXPECT_EQ(v(p.kept.size), (V{6, 5}));
  EXPECT_EQ(v(p.merged.size), (V{30}));  // both operands walk it as one run
  EXPECT_EQ(a(p.mergedAccess), (A{Access::InPlace, Access::InPlace}));
  EXPECT_EQ(p.slabDim(), 0);
}

TEST(IterationPlan, OperandAccessAlongTheLanes) {
  // [4, 1] against a strided row [1, 300] (every other element) and a contiguous [4, 300].
  at::Tensor col = at::randn({4, 1}), row = at::randn({1, 600}).slice(1, 0, 600, 2), full = at::randn({4, 300});
  IterationPlan p = planOf("v1: sub($0, $1); mul(%0, $2)", {col, row, full});
  EXPECT_EQ(v(p.merged.size), (V{4, 300}));
  EXPECT_EQ(a(p.mergedAccess), (A{Access::Uniform, Access::Packed, Access::InPlace}));
  EXPECT_FALSE(p.merged.rowInvariant(0));
  EXPECT_TRUE(p.merged.rowInvariant(1));
  // Strided along the lanes and different per row: gathered.
  IterationPlan q = planOf(kSub, {at::randn({4, 600}).slice(1, 0, 600, 2), col});
  EXPECT_EQ(q.mergedAccess[0], Access::Gathered);
}

TEST(IterationPlan, ReductionKeptAndReducedDims) {
  at::Tensor x = at::randn({4, 1, 6}), y = at::randn({1, 5, 6});
  auto last = sumOver({-1}, false);
  IterationPlan p = planOf(kSub, {x, y}, &last);
  EXPECT_EQ(v(p.reducedDims), (V{2}));
  EXPECT_EQ(v(p.keptOrder), (V{0, 1}));
  EXPECT_EQ(v(p.reducedOrder), (V{2}));
  EXPECT_EQ(v(p.kept.size), (V{4, 5}));
  EXPECT_EQ(v(p.reduced.size), (V{6}));
  // Along the output's inner dim (5): x is one value per row, y a strided row shared by all rows.
  EXPECT_EQ(a(p.keptAccess), (A{Access::Uniform, Access::Packed}));
  EXPECT_EQ(p.slabDim(), 0);

  // Reduced leading dim, keepdim=false: the output's dims 0, 1 are the shape's 1, 2.
  auto first = sumOver({0}, false);
  IterationPlan q = planOf(kSub, {x, y}, &first);
  EXPECT_EQ(v(q.outOrder), (V{0, 1}));
  EXPECT_EQ(v(q.keptOrder), (V{1, 2}));
  EXPECT_EQ(q.slabDim(), 1);

  // keepdim=true: the reduced dims stay in the output with one index each, so they are not walked.
  auto kept = sumOver({1, 2}, true);
  IterationPlan r = planOf(kSub, {at::randn({4, 5, 6}), at::randn({4, 1, 1})}, &kept);
  EXPECT_EQ(v(r.keptOrder), (V{0}));
  EXPECT_EQ(v(r.reducedOrder), (V{1, 2}));
  EXPECT_EQ(v(r.reduced.size), (V{30}));  // coalesced: the row-major index over (1, 2) is unchanged
}

TEST(IterationPlan, WhyNoNativePathTakesACall) {
  IterationPlan scalar = planOf(kSub, {at::scalar_tensor(1.0), at::scalar_tensor(2.0)});
  EXPECT_STREQ(scalar.unsupported, "0-dim value");
  EXPECT_EQ(scalar.slabDim(), -1);
  std::vector<int64_t> deepShape(26, 1);
  deepShape.back() = 2;
  IterationPlan deep = planOf(kSub, {at::randn(deepShape), at::randn({2})});
  EXPECT_STREQ(deep.unsupported, "rank above 25");
}

}  // namespace

}  // namespace ops_iteration_plan_test
