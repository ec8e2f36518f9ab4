// IR-string tests of the operand forms public libraries write (issue 16): views of values unpacked
// from chunk/unbind, in-place writes that all happen before a region, repeat of size-1 dims read
// as a broadcast, and matmul-expanded distances. Each form has a negative twin that must stay
// unfused (or stored) for its stated reason.
#include "ir_util.h"

#include <ATen/core/dispatch/Dispatcher.h>

namespace ir_operand_forms_test {

namespace {

using namespace tsfuse_test;

std::shared_ptr<Graph> graphOf(const std::string& sig, const std::string& body) {
  return graphWithConstants(sig, body, "", /*named=*/true);
}

at::Tensor boxes(int64_t n, uint64_t seed, at::ScalarType t = at::kFloat) {
  Gen g(seed);
  at::Tensor xy = g.tensor({n, 2}, at::kDouble).abs() * 30;
  at::Tensor wh = g.tensor({n, 2}, at::kDouble).abs() * 10 + 0.5;
  return at::cat({xy, xy + wh}, 1).to(t);
}

// --- views of values unpacked from chunk ------------------------------------------------------

// (a1, a2), (b1, b2) = box1.unsqueeze(1).chunk(2, 2), box2.unsqueeze(0).chunk(2, 2)
// wh = (min(a2, b2) - max(a1, b1)).clamp(0); inter = wh[..., 0] * wh[..., 1]; d1 = a2 - a1; ...
const char* kChunkIou = R"IR(
  %au : Tensor = aten::unsqueeze(%a, %one)
  %ac : Tensor[] = aten::chunk(%au, %two, %two)
  %bu : Tensor = aten::unsqueeze(%b, %zero)
  %bc : Tensor[] = aten::chunk(%bu, %two, %two)
  %a1 : Tensor, %a2 : Tensor = prim::ListUnpack(%ac)
  %b1 : Tensor = aten::__getitem__(%bc, %zero)
  %b2 : Tensor = aten::__getitem__(%bc, %one)
  %rb : Tensor = aten::min(%a2, %b2)
  %lt : Tensor = aten::max(%a1, %b1)
  %d : Tensor = aten::sub(%rb, %lt, %one)
  %wh : Tensor = aten::clamp(%d, %zero, %none)
  %w : Tensor = aten::select(%wh, %m1, %zero)
  %h : Tensor = aten::select(%wh, %m1, %one)
  %inter : Tensor = aten::mul(%w, %h)
  %d1 : Tensor = aten::sub(%a2, %a1, %one)
  %d2 : Tensor = aten::sub(%b2, %b1, %one)
  %d10 : Tensor = aten::select(%d1, %m1, %zero)
  %d11 : Tensor = aten::select(%d1, %m1, %one)
  %area1 : Tensor = aten::mul(%d10, %d11)
  %d20 : Tensor = aten::select(%d2, %m1, %zero)
  %d21 : Tensor = aten::select(%d2, %m1, %one)
  %area2 : Tensor = aten::mul(%d20, %d21)
  %s : Tensor = aten::add(%area1, %area2, %one)
  %union : Tensor = aten::sub(%s, %inter, %one)
  %iou : Tensor = aten::div(%inter, %union)
  return (%iou)
)IR";

TEST(OperandFormsIR, ChunkUnpackedIouBecomesOnePairwise) {
  auto g = graphOf("%a : Tensor, %b : Tensor", kChunkIou);
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  // chunk(2, dim=2) of unsqueeze(1) proves rank >= 3, so every select is sunk.
  EXPECT_FALSE(r.rejectedWith("rank >= 2")) << r.dump();
  EXPECT_EQ(findNodes(g, "tsfuse::pairwise").size(), 1u) << r.dump();
  EXPECT_TRUE(fileCheck(
      r.ir, [](FileCheck& fc) { fc.check_not("aten::clamp")->check_not("aten::div")->check_not("aten::select"); }));
  for (auto [n, m] : std::vector<std::pair<int64_t, int64_t>>{{7, 5}, {1, 4}, {3, 1}, {0, 3}})
    for (auto t : {at::kFloat, at::kDouble, at::kLong}) {
      SCOPED_TRACE(std::to_string(n) + "x" + std::to_string(m));
      EXPECT_TRUE(sameOutputs(ref, g, {boxes(n, 1, t), boxes(m, 2, t)}));
    }
}

TEST(OperandFormsIR, ConstantChunkIouBecomesOnePairwiseAsTheChunkListDoes) {
  // The executor's CanonicalizeOps writes chunk + ListUnpack as prim::ConstantChunk before the
  // load-time pass runs: the same function must fuse to the same op both ways.
  std::string ir = kChunkIou;
  auto replace = [&](const std::string& from, const std::string& to) { ir.replace(ir.find(from), from.size(), to); };
  replace("  %ac : Tensor[] = aten::chunk(%au, %two, %two)\n", "");
  replace("  %bc : Tensor[] = aten::chunk(%bu, %two, %two)\n", "");
  replace("%a1 : Tensor, %a2 : Tensor = prim::ListUnpack(%ac)",
          "%a1 : Tensor, %a2 : Tensor = prim::ConstantChunk[chunks=2, dim=2](%au)");
  replace("  %b1 : Tensor = aten::__getitem__(%bc, %zero)\n  %b2 : Tensor = aten::__getitem__(%bc, %one)",
          "  %b1 : Tensor, %b2 : Tensor = prim::ConstantChunk[chunks=2, dim=2](%bu)");
  auto g = graphOf("%a : Tensor, %b : Tensor", ir);
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  EXPECT_FALSE(r.rejectedWith("rank >= 2")) << r.dump();
  EXPECT_EQ(findNodes(g, "tsfuse::pairwise").size(), 1u) << r.dump();
  for (auto [n, m] : std::vector<std::pair<int64_t, int64_t>>{{7, 5}, {0, 3}})
    EXPECT_TRUE(sameOutputs(ref, g, {boxes(n, 1), boxes(m, 2)}));
}

TEST(OperandFormsIR, UnbindAndTransposeBoundTheRank) {
  // unbind(2) needs rank >= 3, so its elements have rank >= 2; transpose(0, 2) needs rank >= 3.
  auto g = graphOf("%a : Tensor, %b : Tensor, %c : Tensor", R"IR(
  %au : Tensor = aten::unsqueeze(%a, %one)
  %u : Tensor[] = aten::unbind(%au, %two)
  %x : Tensor, %y : Tensor, %z : Tensor, %w : Tensor = prim::ListUnpack(%u)
  %d : Tensor = aten::sub(%x, %b, %one)
  %s0 : Tensor = aten::select(%d, %m1, %zero)
  %p : Tensor = aten::mul(%s0, %z)
  %ct : Tensor = aten::transpose(%c, %zero, %two)
  %e : Tensor = aten::mul(%ct, %b)
  %s1 : Tensor = aten::select(%e, %m1, %zero)
  %q : Tensor = aten::add(%s1, %one, %one)
  return (%p, %q)
)IR");
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  EXPECT_FALSE(r.rejectedWith("rank >= 2")) << r.dump();
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) { fc.check_count("tsfuse::broadcast_select", 2, true); }));
  Gen gen(11);
  EXPECT_TRUE(sameOutputs(
      ref, g, {gen.tensor({5, 4}, at::kFloat), gen.tensor({3}, at::kFloat), gen.tensor({3, 2, 5}, at::kFloat)}));
}

TEST(OperandFormsIR, NegativeChunkOfUnknownRankStillRejected) {
  // chunk(2, dim=0) of an input of unknown rank proves rank >= 1 only: %d may be 1-D.
  auto g = graphOf("%a : Tensor, %b : Tensor", R"IR(
  %c : Tensor[] = aten::chunk(%a, %two, %zero)
  %x : Tensor, %y : Tensor = prim::ListUnpack(%c)
  %d : Tensor = aten::sub(%x, %y, %one)
  %s0 : Tensor = aten::select(%d, %m1, %zero)
  %s1 : Tensor = aten::select(%d, %m1, %one)
  %m : Tensor = aten::mul(%s0, %s1)
  return (%m)
)IR");
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  EXPECT_TRUE(r.rejectedWith("cannot prove %d has rank >= 2")) << r.dump();
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) { fc.check_not("tsfuse::broadcast_select"); }));
  Gen gen(12);
  EXPECT_TRUE(sameOutputs(ref, g, {gen.tensor({4, 3}, at::kFloat), gen.tensor({1}, at::kFloat)}));
}

// --- in-place writes before the region -------------------------------------------------------

// y = torch.empty_like(x); y[..., :2] = x[..., :2] - x[..., 2:] / 2; y[..., 2:] = ... + ...
// (and, when %flag, y *= 2 in a branch), then a pairwise region over views of y.
std::string xywhToXyxyThen(const std::string& region) {
  return std::string(R"IR(
  %y : Tensor = aten::empty_like(%x, %none, %none, %none, %none, %none)
  %xlo : Tensor = aten::slice(%x, %m1, %none, %two, %one)
  %xhi : Tensor = aten::slice(%x, %m1, %two, %none, %one)
  %h : Tensor = aten::div(%xhi, %two)
  %lo : Tensor = aten::sub(%xlo, %h, %one)
  %ylo : Tensor = aten::slice(%y, %m1, %none, %two, %one)
  %c0 : Tensor = aten::copy_(%ylo, %lo, %false)
  %hi : Tensor = aten::add(%xlo, %h, %one)
  %yhi : Tensor = aten::slice(%y, %m1, %two, %none, %one)
  %c1 : Tensor = aten::copy_(%yhi, %hi, %false)
  %yy : Tensor = prim::If(%flag)
    block0():
      %z : Tensor = aten::mul_(%y, %two)
      -> (%z)
    block1():
      -> (%y)
  %yu : Tensor = aten::unsqueeze(%y, %one)
  %p : Tensor = aten::slice(%yu, %m1, %none, %two, %one)
  %q : Tensor = aten::slice(%b, %m1, %two, %none, %one)
)IR") + region;
}

TEST(OperandFormsIR, WritesBeforeTheRegionDoNotBlockIt) {
  auto g = graphOf("%x : Tensor, %b : Tensor, %flag : bool", xywhToXyxyThen(R"IR(
  %d : Tensor = aten::sub(%p, %q, %one)
  %e : Tensor = aten::abs(%d)
  %f : Tensor = aten::mul(%e, %two)
  return (%f)
)IR"));
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  EXPECT_FALSE(r.rejectedWith("is written by an in-place op")) << r.dump();
  ASSERT_EQ(findNodes(g, "tsfuse::pairwise").size(), 1u) << r.dump();
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) {
    fc.check("aten::copy_")
        ->check("aten::copy_")
        ->check("aten::mul_")
        ->check("tsfuse::pairwise")
        ->check_not("aten::abs");
  }));
  for (bool flag : {false, true}) EXPECT_TRUE(sameOutputs(ref, g, {boxes(6, 3), boxes(4, 4), c10::IValue(flag)}));
}

TEST(OperandFormsIR, NegativeWriteBetweenTheRegionsReads) {
  // The same writes, then one more between sub and mul: the fused op would read the new values.
  auto g = graphOf("%x : Tensor, %b : Tensor, %flag : bool", xywhToXyxyThen(R"IR(
  %d : Tensor = aten::sub(%p, %q, %one)
  %e : Tensor = aten::abs(%d)
  %yz : Tensor = prim::If(%flag)
    block0():
      %z2 : Tensor = aten::add_(%y, %one, %one)
      -> (%z2)
    block1():
      -> (%y)
  %f : Tensor = aten::mul(%e, %p)
  return (%f)
)IR"));
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  EXPECT_TRUE(r.rejectedWith("is written by an in-place op (prim::If")) << r.dump();
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) { fc.check("aten::abs")->check("aten::add_")->check("aten::mul("); }));
  for (bool flag : {false, true}) EXPECT_TRUE(sameOutputs(ref, g, {boxes(6, 3), boxes(4, 4), c10::IValue(flag)}));
}

TEST(OperandFormsIR, NegativeWriteFoundAfterALaterRegionIsFused) {
  // The walk fuses the later region (p, h) first and keeps its alias answers; the earlier
  // region is still seen reading %y (or an input it may alias) written between its reads.
  auto g = graphOf("%x : Tensor, %y : Tensor, %v : Tensor", R"IR(
  %xu : Tensor = aten::unsqueeze(%x, %one)
  %d : Tensor = aten::sub(%xu, %y, %one)
  %e : Tensor = aten::abs(%d)
  %w : Tensor = aten::add_(%y, %one, %one)
  %f : Tensor = aten::mul(%e, %y)
  %p : Tensor = aten::sub(%xu, %v, %one)
  %h : Tensor = aten::exp(%p)
  return (%f, %h)
)IR");
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  EXPECT_TRUE(r.rejectedWith("is written by an in-place op (aten::add_) between the region's reads")) << r.dump();
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) {
    fc.check("aten::abs")->check("aten::add_")->check("aten::mul(")->check("tsfuse::pairwise")->check_not("aten::exp");
  })) << r.ir;
  Gen gen(3);
  EXPECT_TRUE(
      sameOutputs(ref, g, {gen.tensor({5}, at::kFloat), gen.tensor({3}, at::kFloat), gen.tensor({4}, at::kFloat)}));
}

// --- repeat of size-1 dims read as a broadcast ------------------------------------------------

// xr = x.unsqueeze(1).repeat(1, M, 1); yr = y.unsqueeze(0).repeat(N, 1, 1); ((xr - yr).abs() * 2)
const char* kRepeatDiff = R"IR(
  %n : int = aten::size(%x, %zero)
  %m : int = aten::size(%y, %zero)
  %xu : Tensor = aten::unsqueeze(%x, %one)
  %r1 : int[] = prim::ListConstruct(%one, %m, %one)
  %xr : Tensor = aten::repeat(%xu, %r1)
  %yu : Tensor = aten::unsqueeze(%y, %zero)
  %r2 : int[] = prim::ListConstruct(%n, %one, %one)
  %yr : Tensor = aten::repeat(%yu, %r2)
  %d : Tensor = aten::sub(%xr, %yr, %one)
  %a : Tensor = aten::abs(%d)
  %e : Tensor = aten::mul(%a, %two)
)IR";

TEST(OperandFormsIR, RepeatReadOnlyByTheRegionIsABroadcast) {
  auto g = graphOf("%x : Tensor, %y : Tensor", std::string(kRepeatDiff) + "  return (%e)\n");
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  ASSERT_EQ(findNodes(g, "tsfuse::pairwise").size(), 1u) << r.dump();
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) {
    fc.check_count("tsfuse::broadcast_repeat", 2, true)->check("tsfuse::pairwise")->check_not("aten::repeat");
  }));
  EXPECT_NE(r.firstRewrite()->reason.find("read as a broadcast"), std::string::npos) << r.dump();
  Gen gen(13);
  // Contiguous inputs (views), a transposed one (its repeat runs: a view would change the
  // output's layout), mixed dtypes, an empty one.
  at::Tensor xt = gen.tensor({3, 5}, at::kFloat).t();
  for (auto& in :
       std::vector<std::vector<c10::IValue>>{{gen.tensor({5, 3}, at::kFloat), gen.tensor({4, 3}, at::kFloat)},
                                             {xt, gen.tensor({4, 3}, at::kFloat)},
                                             {gen.tensor({5, 3}, at::kDouble), gen.tensor({1, 3}, at::kLong)},
                                             {gen.tensor({0, 3}, at::kFloat), gen.tensor({4, 3}, at::kFloat)}})
    EXPECT_TRUE(sameOutputs(ref, g, in));
}

TEST(OperandFormsIR, NegativeRepeatWhoseResultEscapes) {
  // %xr is also returned: it is stored anyway, so it stays a repeat (and an operand).
  auto g = graphOf("%x : Tensor, %y : Tensor", std::string(kRepeatDiff) + "  return (%e, %xr)\n");
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  ASSERT_EQ(findNodes(g, "tsfuse::pairwise").size(), 1u) << r.dump();
  EXPECT_EQ(findNodes(g, "aten::repeat").size(), 1u) << r.dump();
  EXPECT_EQ(findNodes(g, "tsfuse::broadcast_repeat").size(), 1u) << r.dump();  // %yr's still is
  Gen gen(14);
  EXPECT_TRUE(sameOutputs(ref, g, {gen.tensor({5, 3}, at::kFloat), gen.tensor({4, 3}, at::kFloat)}));
}

// Found by the fuzzer (seed 331129, program 3732): the region reads a repeat as a broadcast and
// recomputes an intermediate (%c) that a node it could not fuse (%q: its operand %v is written in
// place, and a view of %v taken before the write keeps the write) still reads; the kept nodes still read the repeat, which then stays (erasing it failed an
// assert and left the whole pipeline undone).
TEST(OperandFormsIR, ARepeatAKeptNodeStillReadsStays) {
  auto g = graphOf("%x : Tensor, %y : Tensor", R"IR(
  %m1 : int = prim::Constant[value=-1]()
  %k : float = prim::Constant[value=-2.5]()
  %ys : Tensor = aten::slice(%y, %zero, %none, %none, %one)
  %yc : Tensor = aten::unsqueeze(%ys, %one)
  %yu : Tensor = aten::unsqueeze(%y, %one)
  %r : int[] = prim::ListConstruct(%one, %two)
  %yr : Tensor = aten::repeat(%yu, %r)
  %a : Tensor = aten::clamp_min(%yr, %m1)
  %b : Tensor = aten::ne(%a, %yc)
  %h : Tensor = aten::add(%a, %one, %one)
  %c : Tensor = aten::clamp(%b, %a, %h)
  %n : Tensor = aten::neg(%c)
  %v : Tensor = aten::add(%n, %k, %one)
  %vt : Tensor = aten::unsqueeze(%v, %zero)
  %w : Tensor = aten::relu_(%v)
  %q : Tensor = aten::eq(%v, %c)
  return (%q, %vt)
)IR");
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  ASSERT_EQ(findNodes(g, "tsfuse::pairwise").size(), 1u) << r.dump();
  EXPECT_EQ(findNodes(g, "aten::repeat").size(), 1u) << r.dump();  // the kept %a reads it
  Gen gen(15);
  EXPECT_TRUE(sameOutputs(ref, g, {gen.tensor({7}, at::kFloat), gen.tensor({6}, at::kFloat)}));
}

// The same for a max with indices (seed 8111, program 5841): the region under the max reads the
// repeat; the compare it recomputes is also read by a masked_fill outside, so the repeat stays
// until that one fuses too (and reads it as a broadcast).
TEST(OperandFormsIR, ARepeatAKeptNodeStillReadsStaysUnderAMaxWithIndices) {
  auto g = graphOf("%x : Tensor", R"IR(
  %m5 : int = prim::Constant[value=-5]()
  %f : bool = prim::Constant[value=0]()
  %three : int = prim::Constant[value=3]()
  %x1 : Tensor = aten::unsqueeze(%x, %one)
  %x3 : Tensor = aten::unsqueeze(%x, %zero)
  %x4 : Tensor = aten::unsqueeze(%x3, %one)
  %r : int[] = prim::ListConstruct(%one, %one, %one, %one, %one)
  %xr : Tensor = aten::repeat(%x4, %r)
  %d : Tensor = aten::sub(%xr, %x1, %one)
  %b : Tensor = aten::le(%d, %zero)
  %v : Tensor = aten::mul(%b, %two)
  %mx : Tensor, %ix : Tensor = aten::max(%v, %m5, %f)
  %o : Tensor = aten::masked_fill(%ix, %b, %three)
  return (%o)
)IR");
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  ASSERT_EQ(findNodes(g, "tsfuse::reduce_with_indices").size(), 1u) << r.dump();
  ASSERT_EQ(findNodes(g, "tsfuse::pairwise").size(), 1u) << r.dump();
  Gen gen(16);
  EXPECT_TRUE(sameOutputs(ref, g, {gen.tensor({1, 5, 1}, at::kDouble)}));
  EXPECT_TRUE(sameOutputs(ref, g, {gen.tensor({3, 5, 2}, at::kFloat)}));
}

TEST(OperandFormsIR, NegativeRepeatSourceWrittenBeforeTheRegion) {
  // x is written after the repeat copied it: a view would see the write.
  auto g = graphOf("%x : Tensor, %y : Tensor", R"IR(
  %xc : Tensor = aten::clone(%x, %none)
  %xu : Tensor = aten::unsqueeze(%xc, %zero)
  %r1 : int[] = prim::ListConstruct(%two, %one, %one)
  %xr : Tensor = aten::repeat(%xu, %r1)
  %w : Tensor = aten::mul_(%xc, %two)
  %d : Tensor = aten::sub(%xr, %y, %one)
  %a : Tensor = aten::abs(%d)
  return (%a, %w)
)IR");
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  ASSERT_EQ(findNodes(g, "tsfuse::pairwise").size(), 1u) << r.dump();
  EXPECT_EQ(findNodes(g, "tsfuse::broadcast_repeat").size(), 0u) << r.dump();
  EXPECT_EQ(findNodes(g, "aten::repeat").size(), 1u) << r.dump();
  Gen gen(15);
  EXPECT_TRUE(sameOutputs(ref, g, {gen.tensor({4, 3}, at::kFloat), gen.tensor({4, 3}, at::kFloat)}));
}

at::Tensor broadcastRepeat(const at::Tensor& self, std::vector<int64_t> reps, std::vector<at::Tensor> others) {
  static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("tsfuse::broadcast_repeat", "");
  return op.typed<at::Tensor(const at::Tensor&, at::IntArrayRef, at::TensorList)>().call(self, reps, others);
}

TEST(OperandFormsIR, BroadcastRepeatIsAViewOnlyWhereItEqualsTheRepeat) {
  Gen gen(16);
  at::Tensor x = gen.tensor({4, 1, 3}, at::kFloat);
  at::Tensor v = broadcastRepeat(x, {2, 1, 5, 1}, {});
  EXPECT_TRUE(v.is_alias_of(x));
  EXPECT_TRUE(at::equal(v, x.repeat({2, 1, 5, 1})));
  // A tiled dim of size 3 tiles: the repeat itself.
  at::Tensor t = broadcastRepeat(x, {1, 2, 2}, {});
  EXPECT_FALSE(t.is_alias_of(x));
  EXPECT_TRUE(at::equal(t, x.repeat({1, 2, 2})));
  // Another operand laid out otherwise than a contiguous tensor: the repeat (layout).
  EXPECT_FALSE(broadcastRepeat(x, {1, 5, 1}, {gen.tensor({3, 5}, at::kFloat).t()}).is_alias_of(x));
  EXPECT_FALSE(broadcastRepeat(x.transpose(0, 2), {1, 5, 1}, {}).is_alias_of(x));
  // A permuted [1, 1, 2]: its size-1 dims have larger strides than its size-2 dim, so the view
  // could let TensorIterator reorder the output's dims (found by the fuzzer): the repeat.
  at::Tensor p = gen.tensor({1, 1, 2}, at::kDouble).permute({2, 1, 0}).unsqueeze(1);
  EXPECT_FALSE(broadcastRepeat(p, {1, 5, 1, 1}, {}).is_alias_of(p));
  // Eager's errors: fewer repeats than dims.
  EXPECT_THROW(broadcastRepeat(x, {2, 2}, {}), c10::Error);
}

// --- matmul-expanded distances --------------------------------------------------------------

// x_norm = (x ** 2).sum(1, keepdim=True); d = x_norm + y_norm.T - 2 * x @ y.T; d.clamp_min(0).sqrt()
std::string matmulDistance(const std::string& ret) {
  return std::string(R"IR(
  %d1 : int[] = prim::ListConstruct(%one)
  %x2 : Tensor = aten::pow(%x, %two)
  %xn : Tensor = aten::sum(%x2, %d1, %true, %none)
  %y2 : Tensor = aten::pow(%y, %two)
  %yn : Tensor = aten::sum(%y2, %d1, %true, %none)
  %ynt : Tensor = aten::numpy_T(%yn)
  %s : Tensor = aten::add(%xn, %ynt, %one)
  %x2s : Tensor = aten::mul(%x, %two)
  %yt : Tensor = aten::numpy_T(%y)
  %mm : Tensor = aten::matmul(%x2s, %yt)
  %d : Tensor = aten::sub(%s, %mm, %one)
  %c : Tensor = aten::clamp_min(%d, %zero)
  %r : Tensor = aten::sqrt(%c)
)IR") + ret;
}

TEST(OperandFormsIR, MatmulExpandedDistanceIsOneOpOverTheMatmul) {
  auto g = graphOf("%x : Tensor, %y : Tensor", matmulDistance("  return (%r)\n"));
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  // The matmul stays ATen's; the norms are reductions, the whole tail is x_norm's epilogue (run
  // as one fused elementwise call over the matmul output: kernels/runtime/fused_call.cpp).
  EXPECT_EQ(findNodes(g, "tsfuse::reduce").size(), 2u) << r.dump();
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) {
    fc.check("aten::matmul")
        ->check("tsfuse::reduce")
        ->check_not("aten::sub")
        ->check_not("aten::clamp_min")
        ->check_not("aten::sqrt");
  }));
  Gen gen(17);
  EXPECT_TRUE(sameOutputs(ref, g, {gen.tensor({6, 4}, at::kFloat), gen.tensor({5, 4}, at::kFloat)}, /*exact=*/false));
  EXPECT_TRUE(sameOutputs(ref, g, {gen.tensor({1, 4}, at::kDouble), gen.tensor({3, 4}, at::kDouble)}, /*exact=*/false));
}

TEST(OperandFormsIR, NegativeMatmulDistanceReturnedBeforeTheTail) {
  // d is returned too: it is stored, so the tail after it is a separate op reading it.
  auto g = graphOf("%x : Tensor, %y : Tensor", matmulDistance("  return (%r, %d)\n"));
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  EXPECT_EQ(findNodes(g, "tsfuse::pairwise").size(), 1u) << r.dump();
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) { fc.check("tsfuse::reduce")->check("tsfuse::pairwise"); }));
  Gen gen(18);
  EXPECT_TRUE(sameOutputs(ref, g, {gen.tensor({6, 4}, at::kFloat), gen.tensor({5, 4}, at::kFloat)}, /*exact=*/false));
}

}  // namespace

}  // namespace ir_operand_forms_test
