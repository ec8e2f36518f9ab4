// triplet_margin_loss's entries of the decomposition table (passes/analysis/decompositions.h): the
// ATen calls its kernel makes (the rank check and its message, pairwise distances, the swap's
// minimum, clamp_min, the reduction), run unfused, are the op bit for bit and error for error
// over every constant swap and reduction, several orders and margins, broadcast, same-shape,
// empty, float64 and NaN operands; over a broadcast (a[:, None] against p[None], n[None]) the
// distances fuse; a run-time swap or reduction keeps the op whole, named.
#include "ir_util.h"

#include "passes/decompose.h"
#include "registration/pipeline.h"

namespace ir_decompose_triplet_test {

namespace {

using namespace tsfuse_test;

std::shared_ptr<Graph> tripletGraph(const std::string& margin, const std::string& p, bool swap, int reduction) {
  return graphWithConstants("%a : Tensor, %b : Tensor, %c : Tensor",
                            "  %r : Tensor = aten::triplet_margin_loss(%a, %b, %c, %margin, %p, %eps, %swap, %red)\n"
                            "  return (%r)\n",
                            "  %margin : float = prim::Constant[value=" + margin +
                                "]()\n"
                                "  %p : float = prim::Constant[value=" +
                                p +
                                "]()\n"
                                "  %eps : float = prim::Constant[value=1e-06]()\n"
                                "  %swap : bool = prim::Constant[value=" +
                                (swap ? "1" : "0") +
                                "]()\n"
                                "  %red : int = prim::Constant[value=" +
                                std::to_string(reduction) + "]()\n");
}

TEST(DecomposeTriplet, IsTheOpBitForBitAndErrorForError) {
  Gen g(23);
  const std::vector<std::vector<at::Tensor>> operands = {
      {g.tensor({6, 5}, at::kFloat), g.tensor({6, 5}, at::kFloat), g.tensor({6, 5}, at::kFloat, kNaNInf)},
      {g.tensor({4, 1, 3}, at::kFloat), g.tensor({1, 7, 3}, at::kFloat), g.tensor({1, 7, 3}, at::kFloat)},
      {g.tensor({5, 8}, at::kDouble), g.tensor({5, 8}, at::kDouble), g.tensor({1, 8}, at::kDouble)},
      {g.tensor({0, 3}, at::kFloat), g.tensor({0, 3}, at::kFloat), g.tensor({0, 3}, at::kFloat)},
      {g.tensor({4}, at::kFloat), g.tensor({4}, at::kFloat), g.tensor({4}, at::kFloat)},
      {g.tensor({5, 3}, at::kFloat), g.tensor({5, 3}, at::kFloat), g.tensor({3}, at::kFloat)},     // ranks differ
      {g.tensor({5, 3}, at::kFloat), g.tensor({4, 3}, at::kFloat), g.tensor({5, 3}, at::kFloat)},  // no broadcast
  };
  int compared = 0, raised = 0;
  for (bool swap : {false, true})
    for (int reduction : {0, 1, 2})
      for (const char* p : {"2.", "1.", "3."})
        for (const char* margin : {"1.", "0.25"}) {
          auto original = tripletGraph(margin, p, swap, reduction), d = original->copy();
          PassRun r = runPass(d, tsfuse::Decompose);
          ASSERT_TRUE(r.changed) << r.dump();
          ASSERT_TRUE(findNodes(d, "aten::triplet_margin_loss").empty()) << r.ir;
          for (const auto& ops : operands) {
            const std::vector<c10::IValue> in{ops[0], ops[1], ops[2]};
            const std::string want = errorOf(original, in);
            EXPECT_EQ(want, errorOf(d, in)) << swap << reduction << p << " " << ops[0].sizes() << ops[2].sizes();
            if (!want.empty()) {
              ++raised;
              continue;
            }
            const at::Tensor x = runGraph(original, in)[0].toTensor(), y = runGraph(d, in)[0].toTensor();
            EXPECT_EQ(x.scalar_type(), y.scalar_type());
            EXPECT_EQ(x.sizes(), y.sizes());
            EXPECT_TRUE(at::equal(x.isnan(), y.isnan()) && at::equal(x.nan_to_num(0, 1, -1), y.nan_to_num(0, 1, -1)))
                << swap << reduction << p << " " << ops[0].sizes() << "\n"
                << x << "\n"
                << y;
            ++compared;
          }
        }
  EXPECT_EQ(compared, 36 * 5);
  EXPECT_EQ(raised, 36 * 2);
}

TEST(DecomposeTriplet, OverABroadcastTheDistancesFuse) {
  // F.triplet_margin_loss(a[:, None], p[None], n[None], reduction='none'): the [N, M, D] differences
  // never stored.
  auto g = graphWithConstants("%a : Tensor, %b : Tensor, %c : Tensor", R"IR(
  %a1 : Tensor = aten::unsqueeze(%a, %one)
  %b0 : Tensor = aten::unsqueeze(%b, %zero)
  %c0 : Tensor = aten::unsqueeze(%c, %zero)
  %r : Tensor = aten::triplet_margin_loss(%a1, %b0, %c0, %margin, %p, %eps, %false, %zero)
  return (%r))IR",
                              "  %margin : float = prim::Constant[value=1.]()\n"
                              "  %p : float = prim::Constant[value=2.]()\n"
                              "  %eps : float = prim::Constant[value=1e-06]()\n");
  Gen gen(29);
  const std::vector<c10::IValue> in{gen.tensor({9, 4}, at::kFloat), gen.tensor({7, 4}, at::kFloat),
                                    gen.tensor({7, 4}, at::kFloat)};
  const at::Tensor want = runGraph(g, in)[0].toTensor();
  tsfuse::runPipeline(g, tsfuse::PipelineOptions{}, nullptr, "test");
  EXPECT_TRUE(findNodes(g, "aten::triplet_margin_loss").empty() && findNodes(g, "aten::sub").empty()) << *g;
  EXPECT_EQ(findNodes(g, "tsfuse::reduce").size(), 2u) << *g;
  EXPECT_TRUE(at::allclose(want, runGraph(g, in)[0].toTensor(), 1e-5, 1e-6));  // reordered norms
}

TEST(DecomposeTriplet, ARunTimeSwapOrReductionKeepsTheOpWhole) {
  auto g = graphWithConstants("%a : Tensor, %b : Tensor, %c : Tensor, %swap : bool", R"IR(
  %r : Tensor = aten::triplet_margin_loss(%a, %b, %c, %margin, %p, %eps, %swap, %zero)
  return (%r))IR",
                              "  %margin : float = prim::Constant[value=1.]()\n"
                              "  %p : float = prim::Constant[value=2.]()\n"
                              "  %eps : float = prim::Constant[value=1e-06]()\n");
  PassRun r = runPass(g, tsfuse::Decompose);
  EXPECT_FALSE(r.changed);
  EXPECT_NE(r.dump().find("swap or reduction is not a constant"), std::string::npos) << r.dump();
}

}  // namespace

}  // namespace ir_decompose_triplet_test
