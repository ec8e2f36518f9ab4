// IR-string tests of the two seed forms the passes were written for, as torch.jit.script emits
// them: the IoU intersection (-> one tsfuse::pairwise) and the pairwise-distance similarity count
// (-> one tsfuse::reduce). Each test also runs the graph before and after and compares outputs.
#include "ir_util.h"

namespace ir_seed_forms_test {

namespace {

using namespace tsfuse_test;

// IoU intersection area, as scripted from
//   x1a, y1a, x2a, y2a = boxes1.chunk(4, dim=1); ... boxes2 likewise
//   (torch.min(x2a, x2b.t()) - torch.max(x1a, x1b.t())).clamp(min=0) * (... y ...).clamp(min=0)
const char* kIoU = R"IR(
graph(%boxes1.1 : Tensor,
      %boxes2.1 : Tensor):
  %37 : NoneType = prim::Constant()
  %3 : int = prim::Constant[value=4]()
  %4 : int = prim::Constant[value=1]()
  %36 : int = prim::Constant[value=0]()
  %5 : Tensor[] = aten::chunk(%boxes1.1, %3, %4)
  %x1a.1 : Tensor, %y1a.1 : Tensor, %x2a.1 : Tensor, %y2a.1 : Tensor = prim::ListUnpack(%5)
  %11 : Tensor[] = aten::chunk(%boxes2.1, %3, %4)
  %x1b.1 : Tensor, %y1b.1 : Tensor, %x2b.1 : Tensor, %y2b.1 : Tensor = prim::ListUnpack(%11)
  %18 : Tensor = aten::t(%x1b.1)
  %ix1.1 : Tensor = aten::max(%x1a.1, %18)
  %22 : Tensor = aten::t(%y1b.1)
  %iy1.1 : Tensor = aten::max(%y1a.1, %22)
  %26 : Tensor = aten::t(%x2b.1)
  %ix2.1 : Tensor = aten::min(%x2a.1, %26)
  %30 : Tensor = aten::t(%y2b.1)
  %iy2.1 : Tensor = aten::min(%y2a.1, %30)
  %35 : Tensor = aten::sub(%ix2.1, %ix1.1, %4)
  %38 : Tensor = aten::clamp(%35, %36, %37)
  %42 : Tensor = aten::sub(%iy2.1, %iy1.1, %4)
  %44 : Tensor = aten::clamp(%42, %36, %37)
  %45 : Tensor = aten::mul(%38, %44)
  return (%45)
)IR";

std::vector<c10::IValue> boxes(int64_t n, int64_t m, uint64_t seed) {
  Gen g(seed);
  auto mk = [&](int64_t k) {
    at::Tensor lo = g.tensor({k, 2}, at::kFloat), wh = g.tensor({k, 2}, at::kFloat).abs();
    return at::cat({lo, lo + wh}, 1);
  };
  return {mk(n), mk(m)};
}

TEST(SeedFormsIR, IoUIntersectionFusesIntoOnePairwise) {
  auto g = parseGraph(kIoU);
  auto ref = g->copy();
  PassRun r = runPairwise(g);
  EXPECT_TRUE(r.changed) << r.dump();
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) {
    fc.check_count("aten::chunk", 2, true)
        ->check_count("tsfuse::pairwise", 1, /*exactly=*/true)
        ->check_not("aten::min")
        ->check_not("aten::max")
        ->check_not("aten::sub")
        ->check_not("aten::clamp")
        ->check_not("aten::mul");
  }));
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) {
    for (const char* op : {"aten::min", "aten::max", "aten::sub", "aten::clamp", "aten::mul"}) fc.check_not(op);
  }));
  ASSERT_EQ(r.rewrites(), 1) << r.dump();
  EXPECT_EQ(r.rejects(), 0) << r.dump();
  EXPECT_EQ(r.firstRewrite()->fusedOp, "tsfuse::pairwise");
  EXPECT_EQ(r.firstRewrite()->pass, "fuse_pairwise");

  auto fused = findNodes(g, "tsfuse::pairwise");
  ASSERT_EQ(fused.size(), 1u);
  // Operands: the four chunks of boxes1 and the four transposed chunks of boxes2.
  torch::jit::Node* list = fused[0]->input(0)->node();
  ASSERT_EQ(list->kind(), c10::prim::ListConstruct);
  EXPECT_EQ(list->inputs().size(), 8u);
  for (torch::jit::Value* v : list->inputs()) {
    auto k = v->node()->kind();
    EXPECT_TRUE(k == c10::prim::ListUnpack || k == c10::aten::t) << k.toQualString();
  }
  tsfuse::Expr e = tsfuse::Expr::parse(exprOf(fused[0]));
  EXPECT_EQ(e.numInputs, 8);
  EXPECT_EQ(e.instrs.size(), 9u);
  EXPECT_EQ(exprOf(fused[0]), r.firstRewrite()->expr);
  // clamp(min=0, max=None) keeps its int literal and its None.
  EXPECT_NE(exprOf(fused[0]).find(", 0, None)"), std::string::npos) << exprOf(fused[0]);
  EXPECT_EQ(e.instrs.back().op, tsfuse::Op::Mul);

  EXPECT_TRUE(sameOutputs(ref, g, boxes(5, 7, 1)));
  EXPECT_TRUE(sameOutputs(ref, g, boxes(1, 3, 2)));
  EXPECT_TRUE(sameOutputs(ref, g, boxes(0, 3, 3)));
}

TEST(SeedFormsIR, IoUThroughThePipeline) {
  auto g = parseGraph(kIoU);
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  EXPECT_TRUE(r.changed);
  EXPECT_EQ(r.rewrites(), 1) << r.dump();
  EXPECT_EQ(findNodes(g, "tsfuse::pairwise").size(), 1u) << r.ir;
  EXPECT_EQ(findNodes(g, "tsfuse::reduce").size(), 0u) << r.ir;
  for (const auto& ev : r.events) EXPECT_EQ(ev.graph, "forward");
  EXPECT_TRUE(sameOutputs(ref, g, boxes(6, 4, 4)));
}

// ((x[:, :, None] - y[:, None, :]).abs() < 1).sum(dim=0), as torch.jit.script emits it: the dim
// list is a prim::ListConstruct of constants.
const char* kSimilarityScripted = R"IR(
graph(%x.1 : Tensor,
      %y.1 : Tensor):
  %39 : bool = prim::Constant[value=0]()
  %15 : int = prim::Constant[value=2]()
  %7 : NoneType = prim::Constant()
  %35 : int = prim::Constant[value=1]()
  %37 : int = prim::Constant[value=0]()
  %9 : Tensor = aten::slice(%x.1, %37, %7, %7, %35)
  %14 : Tensor = aten::slice(%9, %35, %7, %7, %35)
  %16 : Tensor = aten::unsqueeze(%14, %15)
  %24 : Tensor = aten::slice(%y.1, %37, %7, %7, %35)
  %26 : Tensor = aten::unsqueeze(%24, %35)
  %31 : Tensor = aten::slice(%26, %15, %7, %7, %35)
  %33 : Tensor = aten::sub(%16, %31, %35)
  %34 : Tensor = aten::abs(%33)
  %36 : Tensor = aten::lt(%34, %35)
  %38 : int[] = prim::ListConstruct(%37)
  %41 : Tensor = aten::sum(%36, %38, %39, %7)
  return (%41)
)IR";

// The same after constant propagation (e.g. torch.jit.freeze): dim is an int[] constant.
const char* kSimilarityFrozen = R"IR(
graph(%x.1 : Tensor,
      %y.1 : Tensor):
  %39 : bool = prim::Constant[value=0]()
  %15 : int = prim::Constant[value=2]()
  %7 : NoneType = prim::Constant()
  %35 : int = prim::Constant[value=1]()
  %37 : int = prim::Constant[value=0]()
  %38 : int[] = prim::Constant[value=[0]]()
  %9 : Tensor = aten::slice(%x.1, %37, %7, %7, %35)
  %14 : Tensor = aten::slice(%9, %35, %7, %7, %35)
  %16 : Tensor = aten::unsqueeze(%14, %15)
  %24 : Tensor = aten::slice(%y.1, %37, %7, %7, %35)
  %26 : Tensor = aten::unsqueeze(%24, %35)
  %31 : Tensor = aten::slice(%26, %15, %7, %7, %35)
  %33 : Tensor = aten::sub(%16, %31, %35)
  %34 : Tensor = aten::abs(%33)
  %36 : Tensor = aten::lt(%34, %35)
  %41 : Tensor = aten::sum(%36, %38, %39, %7)
  return (%41)
)IR";

std::vector<c10::IValue> simInputs(int64_t s, int64_t d, uint64_t seed) {
  Gen g(seed);
  return {g.tensor({s, d}, at::kFloat), g.tensor({s, d}, at::kFloat)};
}

void checkSimilarityFused(const char* ir) {
  auto g = parseGraph(ir);
  auto ref = g->copy();
  PassRun r = runReduce(g);
  EXPECT_TRUE(r.changed) << r.dump();
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) {
    fc.check("aten::unsqueeze")
        ->check_count("tsfuse::reduce", 1, /*exactly=*/true)
        ->check_not("aten::sum")
        ->check_not("aten::sub")
        ->check_not("aten::abs")
        ->check_not("aten::lt");
  }));
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) {
    fc.check_not("aten::sum")->check_not("aten::sub")->check_not("aten::abs")->check_not("aten::lt");
  }));
  // The expression text of expr.h's example: the scalar 1 is an int literal.
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) { fc.check("v1: sub($0, $1); abs(%0); lt(%1, 1)"); }));
  ASSERT_EQ(r.rewrites(), 1) << r.dump();
  EXPECT_EQ(r.rejects(), 0) << r.dump();
  const tsfuse::FusionEvent* ev = r.firstRewrite();
  EXPECT_EQ(ev->pass, "fuse_broadcast_reduce");
  EXPECT_EQ(ev->fusedOp, "tsfuse::reduce");
  EXPECT_NE(ev->expr.find("sum(dim=[0], keepdim=False)"), std::string::npos) << ev->expr;

  auto fused = findNodes(g, "tsfuse::reduce");
  ASSERT_EQ(fused.size(), 1u);
  torch::jit::Node* n = fused[0];
  EXPECT_EQ(exprOf(n), "v1: sub($0, $1); abs(%0); lt(%1, 1)");
  EXPECT_EQ(constInput(n, 2).toStringRef(), "sum");
  EXPECT_EQ(constInput(n, 3).toIntVector(), std::vector<int64_t>{0});
  EXPECT_FALSE(constInput(n, 4).toBool());
  EXPECT_TRUE(constInput(n, 5).isNone());
  // The operands are the two views (no [S, D, D] intermediate).
  torch::jit::Node* list = n->input(0)->node();
  ASSERT_EQ(list->inputs().size(), 2u);
  EXPECT_EQ(list->input(0)->node()->kind(), c10::aten::unsqueeze);
  EXPECT_EQ(list->input(1)->node()->kind(), c10::aten::slice);

  EXPECT_TRUE(sameOutputs(ref, g, simInputs(6, 5, 10)));
  EXPECT_TRUE(sameOutputs(ref, g, simInputs(1, 3, 11)));
  EXPECT_TRUE(sameOutputs(ref, g, simInputs(0, 3, 12)));
}

TEST(SeedFormsIR, SimilarityWithConstantDimFusesIntoOneReduce) { checkSimilarityFused(kSimilarityFrozen); }

TEST(SeedFormsIR, SimilarityAsScriptedWithListConstructDimFusesIntoOneReduce) {
  checkSimilarityFused(kSimilarityScripted);
}

TEST(SeedFormsIR, SimilarityThroughThePipelineLeavesNoPairwise) {
  auto g = parseGraph(kSimilarityFrozen);
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  EXPECT_TRUE(r.changed);
  // Reductions go first and claim the elementwise region whole.
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) {
    fc.check_count("tsfuse::reduce", 1, true)->check_not("tsfuse::pairwise")->check_not("aten::sum");
  }));
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) { fc.check_not("tsfuse::pairwise"); }));
  EXPECT_EQ(r.rewrites(), 1) << r.dump();
  EXPECT_TRUE(sameOutputs(ref, g, simInputs(4, 3, 13)));
}

TEST(SeedFormsIR, PipelineWithReducePassDisabledFusesTheElementwisePart) {
  auto g = parseGraph(kSimilarityFrozen);
  auto ref = g->copy();
  tsfuse::PipelineOptions opts;
  // (count_bool_sums would count the stored compare's sum in place: off too, the sum stays ATen's)
  opts.disabled = {"fuse_broadcast_reduce", "count_bool_sums"};
  PassRun r = runPipelineOn(g, opts);
  EXPECT_TRUE(r.changed);
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) { fc.check_count("tsfuse::pairwise", 1, true)->check("aten::sum"); }));
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) { fc.check_not("tsfuse::reduce"); }));
  EXPECT_TRUE(sameOutputs(ref, g, simInputs(4, 3, 14)));
}

}  // namespace

}  // namespace ir_seed_forms_test
