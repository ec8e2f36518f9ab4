// A cheap broadcast value read by several fusible ops (d = x[:, None] - y[None] summed as |d| and
// as d * d) is recomputed in each fused op rather than stored: the [N, M] value never exists.
// Each rewrite says so ("recomputed here rather than stored"); unsqueezes, sink_views' views and
// expands show the broadcast. Where a reader does not fuse (the
// value is returned), the value is costly (exp, many ops) or nothing shows that it broadcasts, it
// stays an operand, as before; the cheap values beside it are still recomputed.
#include "ir_util.h"

namespace ir_shared_value_test {

namespace {

using namespace tsfuse_test;

// %d = x[:, None] - y[None] over two vectors (or as `difference` computes it), then `body`.
std::shared_ptr<Graph> pairwiseGraph(const std::string& body,
                                     const std::string& difference = "%d : Tensor = aten::sub(%xu, %yu, %one)") {
  return graphWithConstants("%x : Tensor, %y : Tensor", R"IR(
  %xu : Tensor = aten::unsqueeze(%x, %one)
  %yu : Tensor = aten::unsqueeze(%y, %zero)
  )IR" + difference + "\n" + body);
}

// |d| and d * d summed along dim 1: two reductions reading d.
const char* const kTwoSums = R"IR(
  %a : Tensor = aten::abs(%d)
  %s1 : Tensor = aten::sum(%a, %dims1, %false, %none)
  %m : Tensor = aten::mul(%d, %d)
  %s2 : Tensor = aten::sum(%m, %dims1, %false, %none)
  return (%s1, %s2)
)IR";

std::vector<c10::IValue> vectors(uint64_t seed) {
  Gen gen(seed);
  return {gen.tensor({7}, at::kFloat, kNaNInf), gen.tensor({9}, at::kFloat, kNaNInf)};
}

bool anyRewriteSays(const PassRun& r, const std::string& text) {
  for (const auto& e : r.events)
    if (e.kind == tsfuse::FusionEvent::Kind::Rewrite && e.reason.find(text) != std::string::npos) return true;
  return false;
}

TEST(SharedValueIR, ADifferenceTwoReductionsReadIsRecomputedInEach) {
  auto g = pairwiseGraph(kTwoSums);
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  EXPECT_EQ(findNodes(g, "tsfuse::reduce").size(), 2u) << r.ir;
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) { fc.check_not("aten::sub")->check_not("aten::abs"); }));
  EXPECT_TRUE(
      anyRewriteSays(r, "(aten::sub) is also read by 1 other fusible op(s): recomputed here rather than stored"))
      << r.dump();
  EXPECT_TRUE(sameOutputs(ref, g, vectors(1)));
}

TEST(SharedValueIR, AReducedValueAlsoReadElementwiseIsRecomputedForEachReader) {
  auto g = pairwiseGraph(R"IR(
  %s1 : Tensor = aten::sum(%d, %dims1, %false, %none)
  %a : Tensor = aten::abs(%d)
  %s2 : Tensor = aten::sum(%a, %dims1, %false, %none)
  return (%s1, %s2)
)IR");
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  EXPECT_EQ(findNodes(g, "tsfuse::reduce").size(), 2u) << r.ir;
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) { fc.check_not("aten::sub"); }));
  EXPECT_TRUE(anyRewriteSays(r, "the elementwise region is recomputed for each of the 2 readers of %")) << r.dump();
  EXPECT_TRUE(sameOutputs(ref, g, vectors(2)));
}

TEST(SharedValueIR, TwoMapsOfOneDifferenceAreTwoOpsWithoutIt) {
  auto g = pairwiseGraph(R"IR(
  %a : Tensor = aten::abs(%d)
  %b : Tensor = aten::mul(%d, %two)
  return (%a, %b)
)IR");
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  EXPECT_EQ(findNodes(g, "tsfuse::pairwise").size(), 2u) << r.ir;
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) { fc.check_not("aten::sub"); }));
  EXPECT_TRUE(sameOutputs(ref, g, vectors(3)));
}

// YOLOX's box IoU: the corners' max and min read a, b's coordinate pairs through slices of
// a[:, None] (a[:, None, :2]); both products over the pair read them, so they broadcast to [N, M, 2]
// there as much as through a bare unsqueeze, and are recomputed in each product's fused op.
TEST(SharedValueIR, CornersReadThroughSlicesOfAnUnsqueezeAreRecomputedInEachProduct) {
  auto g = graphWithConstants("%a : Tensor, %b : Tensor", R"IR(
  %big : int = prim::Constant[value=9223372036854775807]()
  %six : int = prim::Constant[value=6]()
  %au : Tensor = aten::unsqueeze(%a, %one)
  %a1 : Tensor = aten::slice(%au, %two, %zero, %two, %one)
  %b1 : Tensor = aten::slice(%b, %one, %zero, %two, %one)
  %tl : Tensor = aten::max(%a1, %b1)
  %a2 : Tensor = aten::slice(%au, %two, %two, %big, %one)
  %b2 : Tensor = aten::slice(%b, %one, %two, %big, %one)
  %br : Tensor = aten::min(%a2, %b2)
  %lt : Tensor = aten::lt(%tl, %br)
  %f : Tensor = aten::to(%lt, %six, %false, %false, %none)
  %en : Tensor = aten::prod(%f, %two, %false, %none)
  %wh : Tensor = aten::sub(%br, %tl, %one)
  %area : Tensor = aten::prod(%wh, %two, %false, %none)
  %r : Tensor = aten::mul(%area, %en)
  return (%r)
)IR");
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) { fc.check_not("aten::max")->check_not("aten::min"); })) << r.ir;
  EXPECT_TRUE(anyRewriteSays(r, "(aten::max) is also read by 1 other fusible op(s): recomputed here")) << r.dump();
  Gen gen(11);
  EXPECT_TRUE(sameOutputs(ref, g, {gen.tensor({5, 4}, at::kFloat, kNaNInf), gen.tensor({6, 4}, at::kFloat, kNaNInf)}));
}

TEST(SharedValueIR, ACheapSharedValueIsRecomputedBesideACostlyOneStored) {
  // The product sums read two shared broadcast values: d (a sub) and e (an add over an exp in the
  // region). Recomputing both means an exp more; e is then read stored and d still recomputed
  // (triplet losses' label compare beside their stored distances, a sqrt among their ops).
  auto g = pairwiseGraph(R"IR(
  %p : Tensor = aten::mul(%xu, %yu)
  %x1 : Tensor = aten::exp(%p)
  %e : Tensor = aten::add(%x1, %one, %one)
  %m : Tensor = aten::mul(%d, %e)
  %s1 : Tensor = aten::sum(%m, %dims1, %false, %none)
  %a : Tensor = aten::abs(%d)
  %s2 : Tensor = aten::sum(%a, %dims1, %false, %none)
  %n : Tensor = aten::neg(%e)
  %s3 : Tensor = aten::sum(%n, %dims1, %false, %none)
  return (%s1, %s2, %s3)
)IR");
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) { fc.check_not("aten::sub"); })) << r.dump();
  EXPECT_TRUE(anyRewriteSays(r, "(aten::sub) is also read by 1 other fusible op(s): recomputed here")) << r.dump();
  EXPECT_TRUE(anyRewriteSays(r, "(aten::add) is also used outside the region; it stays an operand")) << r.dump();
  EXPECT_TRUE(sameOutputs(ref, g, vectors(4)));
}

TEST(SharedValueIR, AManyOpMaskAndLossThreeSumsReadAreNeverStored) {
  // A triplet loss's form: a mask of several compares and ands (more than 4 ops from the
  // broadcast), counted by one sum and applied to the loss, whose sum and count of positives read
  // it too. Each sum computes the mask and the loss itself: no [N, M] value is stored.
  auto g = pairwiseGraph(R"IR(
  %c1 : Tensor = aten::gt(%xu, %zero)
  %c2 : Tensor = aten::lt(%yu, %one)
  %c3 : Tensor = aten::ne(%xu, %yu)
  %n1 : Tensor = aten::bitwise_not(%c1)
  %a1 : Tensor = aten::__and__(%n1, %c2)
  %a2 : Tensor = aten::__and__(%a1, %c3)
  %n2 : Tensor = aten::bitwise_not(%c2)
  %o1 : Tensor = aten::__or__(%a2, %n2)
  %mask : Tensor = aten::__and__(%o1, %c3)
  %count : Tensor = aten::sum(%mask, %none)
  %f32 : int = prim::Constant[value=6]()
  %f : Tensor = aten::to(%mask, %f32, %false, %false, %none)
  %l0 : Tensor = aten::add(%d, %one, %one)
  %l1 : Tensor = aten::mul(%f, %l0)
  %loss : Tensor = aten::relu(%l1)
  %pos : Tensor = aten::gt(%loss, %zero)
  %npos : Tensor = aten::sum(%pos, %none)
  %total : Tensor = aten::sum(%loss, %none)
  return (%count, %npos, %total)
)IR");
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  EXPECT_EQ(findNodes(g, "tsfuse::reduce").size(), 3u) << r.ir;
  EXPECT_TRUE(findNodes(g, "tsfuse::pairwise").empty()) << r.ir;
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) { fc.check_not("aten::relu")->check_not("aten::__and__"); }));
  EXPECT_TRUE(anyRewriteSays(r, "(aten::relu) is also read by 1 other fusible op(s): recomputed here")) << r.dump();
  EXPECT_TRUE(sameOutputs(ref, g, vectors(6)));
}

TEST(SharedValueIR, ACostlyOpOverOneViewIsRecomputed) {
  // sqrt reads x[:, None] alone: the CPU computes it once per call at x's shape (hoist.h), so the
  // difference two sums read is recomputed in each, sqrt and all.
  auto g = pairwiseGraph(kTwoSums, "%r : Tensor = aten::sqrt(%xu)\n  %d : Tensor = aten::sub(%r, %yu, %one)");
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  EXPECT_EQ(findNodes(g, "tsfuse::reduce").size(), 2u) << r.ir;
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) { fc.check_not("aten::sub")->check_not("aten::sqrt"); }));
  EXPECT_TRUE(anyRewriteSays(r, "(aten::sub) is also read by 1 other fusible op(s): recomputed here")) << r.dump();
  EXPECT_TRUE(sameOutputs(ref, g, vectors(7), /*exact=*/false));
}

TEST(SharedValueIR, AMaskOfExpandedLabelsTwoReductionsReadIsRecomputedInEach) {
  // fast-reid's hard mining: is_pos = t.view(n, 1).expand(n, n).eq(t.view(n, 1).expand(n, n).t())
  // .float(), read by a max and a min over the distances: the expands show the broadcast.
  auto g = graphWithConstants("%d : Tensor, %t : Tensor", R"IR(
  %n : int = aten::size(%d, %zero)
  %col : int[] = prim::ListConstruct(%n, %one)
  %sq : int[] = prim::ListConstruct(%n, %n)
  %tv : Tensor = aten::view(%t, %col)
  %te : Tensor = aten::expand(%tv, %sq, %false)
  %tt : Tensor = aten::t(%te)
  %eq : Tensor = aten::eq(%te, %tt)
  %six : int = prim::Constant[value=6]()
  %pos : Tensor = aten::to(%eq, %six, %false, %false, %none)
  %big : float = prim::Constant[value=1000000000.]()
  %ap : Tensor = aten::mul(%d, %pos)
  %mx : Tensor = aten::amax(%ap, %dims1, %false)
  %pb : Tensor = aten::mul(%pos, %big)
  %an : Tensor = aten::add(%d, %pb, %one)
  %mn : Tensor = aten::amin(%an, %dims1, %false)
  return (%mx, %mn)
)IR");
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  EXPECT_EQ(findNodes(g, "tsfuse::reduce").size(), 2u) << r.ir;
  EXPECT_TRUE(findNodes(g, "tsfuse::pairwise").empty()) << r.ir;
  EXPECT_TRUE(anyRewriteSays(r, "recomputed here rather than stored")) << r.dump();
  Gen gen(21);
  EXPECT_TRUE(sameOutputs(ref, g, {gen.tensor({37, 37}, at::kFloat, kNaNInf), gen.tensor({37}, at::kLong) % 5}));
  EXPECT_TRUE(sameOutputs(ref, g, {gen.tensor({1, 1}, at::kFloat), gen.tensor({1}, at::kLong)}));
}

TEST(SharedValueIR, NegativeAValueAlsoReturnedIsStored) {
  auto g = pairwiseGraph(R"IR(
  %a : Tensor = aten::abs(%d)
  %s1 : Tensor = aten::sum(%a, %dims1, %false, %none)
  %m : Tensor = aten::mul(%d, %d)
  %s2 : Tensor = aten::sum(%m, %dims1, %false, %none)
  return (%s1, %s2, %d)
)IR");
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) { fc.check("aten::sub"); }));
  EXPECT_TRUE(anyRewriteSays(r, "(aten::sub) is also used outside the region; it stays an operand")) << r.dump();
  EXPECT_FALSE(anyRewriteSays(r, "recomputed here")) << r.dump();
  EXPECT_TRUE(sameOutputs(ref, g, vectors(4)));
}

TEST(SharedValueIR, NegativeACostlyValueIsStored) {
  // exp runs MKL's routine on the CPU, not the compiled kernels' instructions: computing it twice
  // costs more than storing it.
  auto g = pairwiseGraph(R"IR(
  %e : Tensor = aten::exp(%d)
  %a : Tensor = aten::abs(%e)
  %s1 : Tensor = aten::sum(%a, %dims1, %false, %none)
  %m : Tensor = aten::mul(%e, %e)
  %s2 : Tensor = aten::sum(%m, %dims1, %false, %none)
  return (%s1, %s2)
)IR");
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) { fc.check("tsfuse::pairwise")->check("tsfuse::reduce"); }));
  EXPECT_FALSE(anyRewriteSays(r, "recomputed here")) << r.dump();
  EXPECT_TRUE(sameOutputs(ref, g, vectors(5), /*exact=*/false));
}

TEST(SharedValueIR, NegativeAValueOfMoreThan32OpsIsStored) {
  // d and 32 additions on it: 33 ops to compute once more per reader, past recompute.h's bound.
  std::string body;
  std::string v = "%d";
  for (int i = 0; i < 32; ++i) {
    body += "  %v" + std::to_string(i) + " : Tensor = aten::add(" + v + ", %one, %one)\n";
    v = "%v" + std::to_string(i);
  }
  body += "  %a : Tensor = aten::abs(" + v + ")\n  %s1 : Tensor = aten::sum(%a, %dims1, %false, %none)\n" +
          "  %s2 : Tensor = aten::sum(" + v + ", %dims1, %false, %none)\n  return (%s1, %s2)\n";
  auto g = pairwiseGraph(body);
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  EXPECT_FALSE(anyRewriteSays(r, "recomputed")) << r.dump();
  EXPECT_EQ(findNodes(g, "tsfuse::pairwise").size(), 1u) << r.ir;
  EXPECT_TRUE(sameOutputs(ref, g, vectors(8)));
}

TEST(SharedValueIR, NegativeNoVisibleBroadcastNoRecompute) {
  // Equal known shapes: the value is no larger than its operands, so storing it costs what
  // reading them twice would.
  auto g = graphWithConstants(
      "%x : Float(7, 9, strides=[9, 1], device=cpu), %y : Float(7, 9, strides=[9, 1], device=cpu)", R"IR(
  %d : Float(7, 9, strides=[9, 1], device=cpu) = aten::sub(%x, %y, %one)
  %a : Float(7, 9, strides=[9, 1], device=cpu) = aten::abs(%d)
  %s1 : Float(7, strides=[1], device=cpu) = aten::sum(%a, %dims1, %false, %none)
  %m : Float(7, 9, strides=[9, 1], device=cpu) = aten::mul(%d, %d)
  %s2 : Float(7, strides=[1], device=cpu) = aten::sum(%m, %dims1, %false, %none)
  return (%s1, %s2)
)IR");
  PassRun r = runPipelineOn(g);
  EXPECT_FALSE(anyRewriteSays(r, "recomputed here")) << r.dump();
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) { fc.check("aten::sub"); }));
}

}  // namespace

}  // namespace ir_shared_value_test
