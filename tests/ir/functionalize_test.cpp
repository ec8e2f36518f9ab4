// IR-string tests of in-place accumulation: in-place ops with tensor arguments on fresh tensors
// (factories included) become functional through tsfuse::inplace_result (canonicalize), and
// for-range loops of a constant trip count that accumulate in place into a tensor made before
// them become their iterations (unroll_accumulations), so a per-coordinate accumulation is one
// fused op. Each case runs before/after through the interpreter: the same values, dtypes and
// errors (arguments broadcasting beyond the accumulator, a dtype it cannot hold).
#include "ir_util.h"

#include "passes/canonicalize.h"
#include "passes/unroll_accumulations.h"

namespace ir_functionalize_test {

namespace {

using namespace tsfuse_test;

// d = zeros([x.size(0), y.size(0)], dtype), then d += |x[:, None, k] - y[None, :, k]| for
// k = 0, 1, 2: unrolled (as a trace records it) when `loop` is empty, else inside a prim::Loop
// whose trip count is `loop` (a constant name or a graph input). %w is the accumulator's dtype
// (None: the default dtype).
std::shared_ptr<Graph> accumulation(const std::string& loop, const std::string& dtype = "%none",
                                    const std::string& extraInput = "") {
  std::string body = R"IR(
  %n0 : int = aten::size(%x, %zero)
  %n1 : int = aten::size(%y, %zero)
  %sz : int[] = prim::ListConstruct(%n0, %n1)
  %d : Tensor = aten::zeros(%sz, )IR" +
                     dtype +
                     R"IR(, %none, %none, %none)
  %xu : Tensor = aten::unsqueeze(%x, %one)
  %yu : Tensor = aten::unsqueeze(%y, %zero)
)IR";
  auto term = [](const std::string& k, const std::string& acc, const std::string& out, const std::string& at = "  ") {
    return at + "%xk" + out + " : Tensor = aten::select(%xu, %two, " + k + ")\n" + at + "%yk" + out +
           " : Tensor = aten::select(%yu, %two, " + k + ")\n" + at + "%t" + out + " : Tensor = aten::sub(%xk" + out +
           ", %yk" + out + ", %one)\n" + at + "%a" + out + " : Tensor = aten::abs(%t" + out + ")\n" + at + "%" + out +
           " : Tensor = aten::add_(" + acc + ", %a" + out + ", %one)\n";
  };
  if (loop.empty()) {
    body += term("%zero", "%d", "w0") + term("%one", "%w0", "w1") + term("%two", "%w1", "w2") + "  return (%w2)\n";
  } else {
    body += "  %acc : Tensor = prim::Loop(" + loop + ", %true, %d)\n    block0(%k : int, %dk : Tensor):\n" +
            term("%k", "%dk", "w", "      ") + "      -> (%true, %w)\n  return (%acc)\n";
  }
  return graphWithConstants("%x : Tensor, %y : Tensor" + extraInput, body,
                            "  %three : int = prim::Constant[value=3]()\n"
                            "  %big : int = prim::Constant[value=1000]()\n"
                            "  %f64 : int = prim::Constant[value=7]()\n"
                            "  %i64 : int = prim::Constant[value=4]()\n");
}

std::vector<c10::IValue> points(uint64_t seed, int64_t n, int64_t m, at::ScalarType t = at::kFloat) {
  Gen g(seed);
  return {g.tensor({n, 3}, t, kNaNInf), g.tensor({m, 3}, t, kNaNInf)};
}

TEST(FunctionalizeIR, TracedAccumulationIntoZerosIsOneFusedOp) {
  auto g = accumulation("");
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  EXPECT_EQ(computingFusedOps(g), 1) << r.dump();
  EXPECT_EQ(findNodes(g, "tsfuse::pairwise").size(), 1u) << r.dump();
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) { fc.check_not("aten::add_")->check_not("aten::abs"); }));
  EXPECT_TRUE(sameOutputs(ref, g, points(1, 7, 5)));
  EXPECT_TRUE(sameOutputs(ref, g, points(2, 0, 5)));
  // float64 points into the default-dtype (float32) accumulator: each add_ rounds to float32.
  EXPECT_TRUE(sameOutputs(ref, g, points(3, 6, 4, at::kDouble)));
}

TEST(FunctionalizeIR, ScriptedConstantLoopIsUnrolledThenFused) {
  auto g = accumulation("%three");
  auto ref = g->copy();
  PassRun u = runPass(g, tsfuse::UnrollAccumulations);
  EXPECT_EQ(u.rewrites(), 1) << u.dump();
  EXPECT_TRUE(fileCheck(u.ir, [](FileCheck& fc) { fc.check_not("prim::Loop")->check_count("aten::add_", 3, true); }));
  EXPECT_TRUE(sameOutputs(ref, g, points(4, 7, 5)));
  PassRun r = runPipelineOn(g);
  EXPECT_EQ(computingFusedOps(g), 1) << r.dump();
  EXPECT_TRUE(sameOutputs(ref, g, points(5, 7, 5)));
  EXPECT_TRUE(sameOutputs(ref, g, points(6, 3, 8, at::kDouble)));
}

TEST(FunctionalizeIR, AnInt64AccumulatorKeepsTheInPlaceError) {
  // |x - y| of float points cannot be added in place into int64 zeros: the same error fused.
  auto g = accumulation("", "%i64");
  auto ref = g->copy();
  runPipelineOn(g);
  EXPECT_EQ(computingFusedOps(g), 1);
  auto in = points(7, 4, 5);
  EXPECT_EQ(errorOf(g, in), "RuntimeError: result type Float can't be cast to the desired output type Long");
  EXPECT_EQ(errorOf(g, in), errorOf(ref, in));
  EXPECT_TRUE(sameOutputs(ref, g, points(8, 4, 5, at::kLong)));  // int64 points: it runs
}

TEST(FunctionalizeIR, ArgumentsBroadcastingBeyondTheAccumulatorKeepTheShapeError) {
  // d has one column; d += (an [N, M] value) raises in place, where add would broadcast.
  auto g = graphWithConstants("%x : Tensor, %y : Tensor", R"IR(
  %d : Tensor = aten::zeros_like(%x, %none, %none, %none, %none, %none)
  %t : Tensor = aten::sub(%x, %y, %one)
  %w : Tensor = aten::add_(%d, %t, %one)
  %m : Tensor = aten::mul(%w, %two)
  return (%m)
)IR");
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  EXPECT_EQ(findNodes(g, "tsfuse::pairwise").size(), 1u) << r.dump();
  Gen gen(9);
  std::vector<c10::IValue> wider{gen.tensor({6, 1}, at::kFloat), gen.tensor({1, 5}, at::kFloat)};
  EXPECT_EQ(errorOf(g, wider), "RuntimeError: output with shape [6, 1] doesn't match the broadcast shape [6, 5]");
  EXPECT_EQ(errorOf(g, wider), errorOf(ref, wider));
  EXPECT_TRUE(sameOutputs(ref, g, {gen.tensor({6, 5}, at::kFloat), gen.tensor({1, 5}, at::kFloat)}));
}

TEST(FunctionalizeIR, InPlaceTailOfAMatmulIsOneFusedOp) {
  // gpytorch's RBF kernel: the matmul-expanded squared distances, then clamp_min_, div_, exp_ in
  // place. A matmul's result is a new tensor: the tail is one elementwise op over it.
  auto g = graphWithConstants("%x : Tensor, %y : Tensor", R"IR(
  %yt : Tensor = aten::t(%y)
  %p : Tensor = aten::matmul(%x, %yt)
  %tiny : float = prim::Constant[value=1.0000000000000001e-30]()
  %c : Tensor = aten::clamp_min_(%p, %tiny)
  %d : Tensor = aten::div_(%p, %two)
  %e : Tensor = aten::exp_(%p)
  return (%e)
)IR");
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  EXPECT_EQ(findNodes(g, "tsfuse::pairwise").size(), 1u) << r.dump();
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) {
    fc.check("aten::matmul")->check_not("aten::clamp_min_")->check_not("aten::div_")->check_not("aten::exp_");
  }));
  Gen gen(11);
  EXPECT_TRUE(sameOutputs(ref, g, {gen.tensor({6, 3}, at::kFloat, kNaNInf), gen.tensor({5, 3}, at::kFloat)}));
  EXPECT_TRUE(sameOutputs(ref, g, {gen.tensor({4, 2}, at::kDouble), gen.tensor({7, 2}, at::kDouble)}));
}

TEST(FunctionalizeIR, AWriteAViewOfTheAccumulatorSeesIsKept) {
  // %v views %d before the write and is returned: it must see the sum, so add_ stays.
  auto g = graphWithConstants("%x : Tensor, %y : Tensor", R"IR(
  %d : Tensor = aten::zeros_like(%x, %none, %none, %none, %none, %none)
  %v : Tensor = aten::unsqueeze(%d, %zero)
  %t : Tensor = aten::sub(%x, %y, %one)
  %w : Tensor = aten::add_(%d, %t, %one)
  return (%w, %v)
)IR");
  auto ref = g->copy();
  PassRun c = runPass(g, tsfuse::Canonicalize);
  EXPECT_TRUE(fileCheck(c.ir, [](FileCheck& fc) { fc.check("aten::add_"); }));
  EXPECT_TRUE(c.rejectedWith("which may alias it")) << c.dump();
  Gen gen(10);
  EXPECT_TRUE(sameOutputs(ref, g, {gen.tensor({6, 5}, at::kFloat), gen.tensor({1, 5}, at::kFloat)}));
}

TEST(FunctionalizeIR, LoopsThatMayNotBeUnrolledAreKeptWithAReason) {
  struct Case {
    std::shared_ptr<Graph> g;
    const char* why;
  };
  std::vector<Case> cases;
  cases.push_back({accumulation("%n", "%none", ", %n : int"), "its trip count is not a constant"});
  cases.push_back({accumulation("%big"), "1000 iterations of 5 nodes exceed 512 unrolled nodes"});
  auto early = accumulation("%three");
  for (torch::jit::Node* n : early->nodes()) {
    if (n->kind() != c10::prim::Loop) continue;
    torch::jit::WithInsertPoint at(n);
    n->replaceInput(1, early->insertConstant(false));  // a while loop's condition, as it were
    break;
  }
  cases.push_back({early, "it may stop early"});
  for (auto& c : cases) {
    SCOPED_TRACE(c.why);
    PassRun u = runPass(c.g, tsfuse::UnrollAccumulations);
    EXPECT_EQ(u.rewrites(), 0) << u.dump();
    EXPECT_TRUE(u.rejectedWith(c.why)) << u.dump();
    EXPECT_TRUE(u.rejectedWith("accumulates into a tensor made before it")) << u.dump();
    EXPECT_EQ(findNodes(c.g, "prim::Loop").size(), 1u);
  }
}

TEST(FunctionalizeIR, LoopsThatAccumulateNothingAreLeftAlone) {
  // The body writes only a tensor it makes itself: nothing for unrolling to expose.
  auto g = graphWithConstants("%x : Tensor, %y : Tensor", R"IR(
  %three : int = prim::Constant[value=3]()
  %acc : Tensor = prim::Loop(%three, %true, %x)
    block0(%k : int, %c : Tensor):
      %t : Tensor = aten::sub(%c, %y, %one)
      %u : Tensor = aten::abs_(%t)
      -> (%true, %u)
  return (%acc)
)IR");
  PassRun u = runPass(g, tsfuse::UnrollAccumulations);
  EXPECT_FALSE(u.changed);
  EXPECT_EQ(u.rejects(), 0) << u.dump();
}

}  // namespace

}  // namespace ir_functionalize_test
