// IR-string tests of the full_slice_checks pass: a full slice canonicalize kept for the error it
// raises becomes tsfuse::full_slice (the same errors, no view) in a graph that fuses something, and
// stays aten::slice in one that fuses nothing, or where the slice is written or returned.
#include "ir_util.h"

#include "passes/full_slice_checks.h"

namespace ir_full_slice_checks_test {

namespace {

using namespace tsfuse_test;

std::shared_ptr<Graph> graphOf(const std::string& body) { return graphWithConstants("%a : Tensor, %b : Tensor", body); }

// x[:, None, :] - y[None, :, :], summed over the last dim: the slices check x and y have rank 2.
constexpr const char* kDistances = R"IR(
  %s0 : Tensor = aten::slice(%a, %zero, %none, %none, %one)
  %u0 : Tensor = aten::unsqueeze(%s0, %one)
  %s1 : Tensor = aten::slice(%u0, %two, %none, %none, %one)
  %u1 : Tensor = aten::unsqueeze(%b, %zero)
  %s2 : Tensor = aten::slice(%u1, %one, %none, %none, %one)
  %s3 : Tensor = aten::slice(%s2, %two, %none, %none, %one)
  %d : Tensor = aten::sub(%s1, %s3, %one)
  %q : Tensor = aten::mul(%d, %d)
  %r : Tensor = aten::sum(%q, %dims1, %false, %none)
  return (%r)
)IR";

TEST(FullSliceChecksIR, SlicesThatMayRaiseKeepTheirChecksWithoutAView) {
  auto g = graphOf(kDistances);
  auto ref = g->copy();
  PassRun p = runPipelineOn(g);
  EXPECT_EQ(computingFusedOps(g), 1) << p.dump();
  EXPECT_TRUE(fileCheck(p.ir, [](FileCheck& fc) {
    fc.check_not("aten::slice")->check_count("tsfuse::full_slice", 4, true);
  })) << p.ir;
  Gen gen(1);
  EXPECT_TRUE(sameOutputs(ref, g, {gen.tensor({6, 3}, at::kFloat), gen.tensor({5, 3}, at::kFloat)}, false));
  // The inputs of too low a rank raise what aten::slice raises: a 0-dim one, a 1-D one.
  for (auto [a, b] : {std::pair{at::scalar_tensor(1.0), gen.tensor({5, 3}, at::kFloat)},
                      std::pair{gen.tensor({6}, at::kFloat), gen.tensor({5, 3}, at::kFloat)},
                      std::pair{gen.tensor({6, 3}, at::kFloat), gen.tensor({5}, at::kFloat)}}) {
    const std::string want = errorOf(ref, {a, b});
    EXPECT_FALSE(want.empty());
    EXPECT_EQ(errorOf(g, {a, b}), want);
  }
}

TEST(FullSliceChecksIR, AGraphThatFusesNothingKeepsAtenOnly) {
  tsfuse::PipelineOptions off;
  off.disabled = {"sink_views", "fuse_broadcast_reduce", "nest_reductions", "fuse_pairwise"};
  auto g = graphOf(kDistances);
  PassRun p = runPipelineOn(g, off);
  EXPECT_TRUE(fileCheck(p.ir, [](FileCheck& fc) { fc.check_not("tsfuse::"); })) << p.ir;
}

TEST(FullSliceChecksIR, ASliceReturnedOrWrittenStays) {
  auto g = graphOf(R"IR(
  %s0 : Tensor = aten::slice(%a, %one, %none, %none, %one)
  %s1 : Tensor = aten::slice(%b, %one, %none, %none, %one)
  %w : Tensor = aten::mul_(%s1, %two)
  %d : Tensor = aten::sub(%a, %b, %one)
  %e : Tensor = aten::abs(%d)
  return (%s0, %e)
)IR");
  PassRun p = runPipelineOn(g);
  EXPECT_EQ(computingFusedOps(g), 1) << p.dump();
  EXPECT_TRUE(fileCheck(p.ir, [](FileCheck& fc) {
    fc.check_count("aten::slice", 2, true)->check_not("tsfuse::full_slice");
  })) << p.ir;
}

}  // namespace

}  // namespace ir_full_slice_checks_test
