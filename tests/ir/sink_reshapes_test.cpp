// IR-string tests of sink_reshapes (passes/sink_reshapes.h): expanded operands flattened with
// reshape(-1, d), a row-wise op (F.pairwise_distance, decomposed), and .view(n, k) restoring the
// pair dims fuse into one op that stores no [n, k, d] or [n * k, d] value; the same values,
// dtypes and errors as before (the reshape's own error on zero-length rows included). Negative
// cases: operands of shapes not provably equal, a reduction over another dim, a view to other
// sizes.
#include "ir_util.h"

#include "passes/sink_reshapes.h"

namespace ir_sink_reshapes_test {

namespace {

using namespace tsfuse_test;

// x [n, d] and y [k, d] expanded to [n, k, d] (by `xSizes` / `ySizes`, two lists as two calls
// spell them), flattened to [-1, d], then `tail` over %xe and %ye.
std::shared_ptr<Graph> flattenedPairs(const std::string& tail, const std::string& xSizes = "%n, %k, %d",
                                      const std::string& ySizes = "%n, %k, %d") {
  return graphWithConstants("%x : Tensor, %y : Tensor",
                            R"IR(
  %sx : int[] = aten::size(%x)
  %n : int, %d : int = prim::ListUnpack(%sx)
  %k : int = aten::size(%y, %zero)
  %xu : Tensor = aten::unsqueeze(%x, %one)
  %szx : int[] = prim::ListConstruct()IR" +
                                xSizes + R"IR()
  %xe0 : Tensor = aten::expand(%xu, %szx, %false)
  %flx : int[] = prim::ListConstruct(%m1, %d)
  %xe : Tensor = aten::reshape(%xe0, %flx)
  %yu : Tensor = aten::unsqueeze(%y, %zero)
  %szy : int[] = prim::ListConstruct()IR" +
                                ySizes + R"IR()
  %ye0 : Tensor = aten::expand(%yu, %szy, %false)
  %fly : int[] = prim::ListConstruct(%m1, %d)
  %ye : Tensor = aten::reshape(%ye0, %fly)
  %nk : int[] = prim::ListConstruct(%n, %k)
  %p : float = prim::Constant[value=2.]()
  %eps : float = prim::Constant[value=1e-06]()
)IR" + tail,
                            "  %dimsm1 : int[] = prim::Constant[value=[-1]]()\n"
                            "  %dims0 : int[] = prim::Constant[value=[0]]()\n");
}

std::vector<c10::IValue> points(uint64_t seed, int64_t n, int64_t k, int64_t d, int specials = kNaNInf) {
  Gen g(seed);
  return {g.tensor({n, d}, at::kFloat, specials), g.tensor({k, d}, at::kFloat, specials)};
}

const char* kNearest = R"IR(
  %dist : Tensor = aten::pairwise_distance(%xe, %ye, %p, %eps, %false)
  %v : Tensor = aten::view(%dist, %nk)
  %i : Tensor = aten::argmin(%v, %one, %false)
  return (%i)
)IR";

TEST(SinkReshapesIR, FlattenedPairsThroughPairwiseDistanceAreOneFusedOp) {
  auto g = flattenedPairs(kNearest);
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  EXPECT_EQ(r.rewritesBy("sink_reshapes"), 4) << r.dump();  // sub, add, norm, view
  EXPECT_EQ(computingFusedOps(g), 1) << r.dump();
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) {
    fc.check("tsfuse::check_reshape")->check_not("aten::reshape")->check_not("aten::view")->check_not("aten::argmin");
  }));
  EXPECT_TRUE(sameOutputs(ref, g, points(1, 7, 5, 3)));
  EXPECT_TRUE(sameOutputs(ref, g, points(2, 1, 6, 8)));
  EXPECT_TRUE(sameOutputs(ref, g, points(3, 4, 1, 2, 0)));
}

TEST(SinkReshapesIR, ZeroLengthRowsRaiseTheReshapesError) {
  // reshape(-1, 0) of no elements: -1 could be anything. Rows of 0 elements and no pairs raise
  // it too; pairs of no rows (n == 0, d > 0) do not.
  auto g = flattenedPairs(kNearest);
  auto ref = g->copy();
  runPipelineOn(g);
  for (auto [n, k, d] : {std::tuple{4, 3, 0}, std::tuple{0, 3, 0}, std::tuple{0, 3, 2}, std::tuple{3, 0, 2}}) {
    auto in = points(4, n, k, d, 0);
    SCOPED_TRACE(std::to_string(n) + " x " + std::to_string(k) + " x " + std::to_string(d));
    EXPECT_EQ(errorOf(g, in), errorOf(ref, in));
    if (d == 0)
      EXPECT_NE(errorOf(g, in).find("cannot reshape tensor of 0 elements"), std::string::npos) << errorOf(g, in);
    else if (k != 0)  // argmin over an empty dim raises, as eager does
      EXPECT_TRUE(sameOutputs(ref, g, in));
  }
}

TEST(SinkReshapesIR, ElementwiseTailsAndKeepdimReductionsMoveToo) {
  // (xe - ye).abs().sum(-1, keepdim) then neg, and the flat result returned as it is.
  auto g = flattenedPairs(R"IR(
  %t : Tensor = aten::sub(%xe, %ye, %one)
  %a : Tensor = aten::abs(%t)
  %s : Tensor = aten::sum(%a, %dimsm1, %true, %none)
  %e : Tensor = aten::neg(%s)
  return (%e)
)IR");
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  EXPECT_EQ(r.rewritesBy("sink_reshapes"), 4) << r.dump();  // sub, abs, sum, neg
  EXPECT_EQ(computingFusedOps(g), 1) << r.dump();
  EXPECT_TRUE(sameOutputs(ref, g, points(5, 6, 4, 3), /*exact=*/false));
}

// One reshape read twice by the op (clamp(r, min=r)): found by the fuzzer (seed 8112, program
// 6671), where erasing the reshape once per read failed TorchScript's assert.
TEST(SinkReshapesIR, OneReshapeReadTwiceMovesOnce) {
  auto g = flattenedPairs(R"IR(
  %t : Tensor = aten::sub(%xe, %ye, %one)
  %c : Tensor = aten::clamp(%xe, %xe, %none)
  %a : Tensor = aten::mul(%t, %c)
  return (%a)
)IR");
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  EXPECT_GE(r.rewritesBy("sink_reshapes"), 2) << r.dump();  // clamp, sub, mul
  EXPECT_TRUE(sameOutputs(ref, g, points(7, 6, 4, 3)));
}

TEST(SinkReshapesIR, OperandsNotProvablyOfOneShapeStay) {
  // y expanded to [k, n, d]: the flattened rows pair other points (and need n == k).
  auto g = flattenedPairs(kNearest, "%n, %k, %d", "%k, %n, %d");
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  EXPECT_EQ(r.rewritesBy("sink_reshapes"), 0) << r.dump();
  EXPECT_TRUE(r.rejectedWith("not provably of one shape")) << r.dump();
  EXPECT_EQ(findNodes(g, "aten::reshape").size(), 2u) << r.dump();
  EXPECT_TRUE(sameOutputs(ref, g, points(6, 5, 5, 3)));
}

TEST(SinkReshapesIR, AReductionOverAnotherDimAndAViewToOtherSizesStay) {
  auto g = flattenedPairs(R"IR(
  %t : Tensor = aten::sub(%xe, %ye, %one)
  %s : Tensor = aten::sum(%t, %dims0, %false, %none)
  %m : Tensor = aten::amax(%t, %dimsm1, %false)
  %kn : int[] = prim::ListConstruct(%k, %n)
  %v : Tensor = aten::view(%m, %kn)
  return (%s, %v)
)IR");
  auto ref = g->copy();
  PassRun r = runPass(g, tsfuse::SinkReshapes);
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) {
    fc.check("aten::reshape")->check("aten::sum")->check("aten::amax")->check("aten::reshape")->check("aten::view");
  })) << r.dump();
  EXPECT_TRUE(r.rejectedWith("are not provably those of")) << r.dump();
  EXPECT_TRUE(sameOutputs(ref, g, points(7, 4, 4, 3)));
}

}  // namespace

}  // namespace ir_sink_reshapes_test
