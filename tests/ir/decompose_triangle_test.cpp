// triu/tril's entries of the decomposition table (passes/analysis/decompositions.h): triu(x, k) read
// by elementwise ops or reductions becomes where(j - i >= k, x, 0) over two aranges (tril: <=),
// whose values, dtype and errors are the op's for every diagonal, batch, empty, wide and tall
// shape, integer, bool, NaN and -0.0 values, and a rank below 2 (the op's own message); it fuses
// with its readers (the [n, m] triangle never stored), an in-place triu_ on a fresh value is the
// op, and a triangle read by an op that could see its strides stays whole.
#include "ir_util.h"

#include "passes/analysis/decompositions.h"
#include "passes/canonicalize.h"
#include "passes/decompose.h"
#include "registration/pipeline.h"

namespace ir_decompose_triangle_test {

namespace {

using namespace tsfuse_test;

// graph(%x, %y): op(x * y, k) + 1 (a triangle of a broadcast value, read elementwise).
std::shared_ptr<Graph> triangleOfAProduct(const std::string& op, int64_t k) {
  return graphWithConstants("%x : Tensor, %y : Tensor",
                            "  %p : Tensor = aten::mul(%x, %y)\n"
                            "  %t : Tensor = aten::" +
                                op + "(%p, %k)\n  %r : Tensor = aten::add(%t, %one, %one)\n  return (%r)\n",
                            "  %k : int = prim::Constant[value=" + std::to_string(k) + "]()\n");
}

TEST(DecomposeTriangle, IsTheOpBitForBitAndErrorForError) {
  Gen g(17);
  const std::vector<std::pair<at::Tensor, at::Tensor>> operands = {
      {g.tensor({5, 1}, at::kFloat, kNaNInf), g.tensor({1, 7}, at::kFloat, kSignedZero)},  // wide
      {g.tensor({3, 6, 1}, at::kDouble), g.tensor({1, 4}, at::kDouble)},                   // batch, tall
      {g.tensor({4, 4}, at::kLong), g.tensor({4, 4}, at::kLong)},
      {g.tensor({0, 3}, at::kFloat), g.tensor({1, 3}, at::kFloat)},
      {g.tensor({3, 1}, at::kBool), g.tensor({1, 3}, at::kBool)},
      {g.tensor({5}, at::kFloat), g.tensor({5}, at::kFloat)},  // rank 1: the op's error
      {g.tensor({}, at::kFloat), g.tensor({}, at::kFloat)},
  };
  int compared = 0, raised = 0;
  for (const char* op : {"triu", "tril"})
    for (int64_t k : {0, 1, -2, 9}) {
      auto original = triangleOfAProduct(op, k), d = original->copy();
      PassRun r = runPass(d, tsfuse::Decompose);
      ASSERT_TRUE(r.changed) << op << "\n" << r.dump();
      ASSERT_TRUE(findNodes(d, std::string("aten::") + op).empty()) << r.ir;
      for (const auto& [x, y] : operands) {
        const std::vector<c10::IValue> in{x, y};
        const std::string want = errorOf(original, in);
        EXPECT_EQ(want, errorOf(d, in)) << op << " " << k << " " << x.sizes();
        if (!want.empty()) {
          ++raised;
          continue;
        }
        const at::Tensor a = runGraph(original, in)[0].toTensor(), b = runGraph(d, in)[0].toTensor();
        EXPECT_EQ(a.scalar_type(), b.scalar_type()) << op;
        EXPECT_EQ(a.sizes(), b.sizes()) << op;
        EXPECT_TRUE(at::equal(a.isnan(), b.isnan()) && at::equal(a.nan_to_num(0, 1, -1), b.nan_to_num(0, 1, -1)) &&
                    at::equal(a.signbit(), b.signbit()))
            << op << " " << k << " " << x.sizes() << "\n"
            << a << "\n"
            << b;
        ++compared;
      }
    }
  EXPECT_EQ(compared, 8 * 5);  // (bool + 1 is an integer sum: compared too)
  EXPECT_EQ(raised, 8 * 2);
}

TEST(DecomposeTriangle, ColumnsPastFloatsExactRangeUseDoubleIndices) {
  // 2^24 + 2 columns: float indices would round (2^24 + 1 is no float); the graph takes doubles.
  auto original = triangleOfAProduct("triu", (int64_t(1) << 24) + 1), d = original->copy();
  ASSERT_TRUE(runPass(d, tsfuse::Decompose).changed);
  const int64_t m = (int64_t(1) << 24) + 2;
  const at::Tensor x = at::ones({2, 1}), y = at::arange(m, at::kFloat).view({1, m});
  const at::Tensor want = runGraph(original, {x, y})[0].toTensor(), got = runGraph(d, {x, y})[0].toTensor();
  EXPECT_TRUE(at::equal(want, got));
  EXPECT_EQ(got.index({0, m - 2}).item<float>(), 1.0f);  // j - i = 2^24: below k, zeroed (+ 1)
  EXPECT_NE(got.index({0, m - 1}).item<float>(), 1.0f);  // j - i = 2^24 + 1: kept
}

TEST(DecomposeTriangle, FusesSoTheTriangleIsNeverStored) {
  // YOLACT's fast NMS: iou.triu_(diagonal=1) on a fresh value, then its max over dim 1.
  auto g = graphWithConstants("%x : Tensor, %y : Tensor", R"IR(
  %iou : Tensor = aten::mul(%x, %y)
  %t : Tensor = aten::triu_(%iou, %one)
  %v : Tensor, %i : Tensor = aten::max(%iou, %one, %false)
  return (%v)
)IR");
  Gen gen(19);
  const at::Tensor x = gen.tensor({3, 7, 1}, at::kFloat), y = gen.tensor({3, 1, 7}, at::kFloat);
  const at::Tensor want = runGraph(g, {x, y})[0].toTensor();
  tsfuse::runPipeline(g, tsfuse::PipelineOptions{}, nullptr, "test");
  EXPECT_TRUE(findNodes(g, "aten::triu_").empty() && findNodes(g, "aten::triu").empty()) << *g;
  EXPECT_TRUE(findNodes(g, "aten::where").empty() && findNodes(g, "aten::mul").empty()) << *g;
  EXPECT_EQ(findNodes(g, "tsfuse::reduce").size(), 1u) << *g;
  EXPECT_TRUE(at::equal(want, runGraph(g, {x, y})[0].toTensor()));
}

TEST(DecomposeTriangle, StaysWholeWhereItsStridesCouldBeSeen) {
  // Returned (its strides are the caller's to see) or read by a matmul: no candidate.
  for (const char* use : {"  return (%t)\n", "  %r : Tensor = aten::matmul(%t, %x)\n  return (%r)\n"}) {
    auto g = graphWithConstants("%x : Tensor", std::string("  %t : Tensor = aten::triu(%x, %one)\n") + use);
    PassRun r = runPass(g, tsfuse::Decompose);
    EXPECT_FALSE(r.changed) << use;
    EXPECT_EQ(r.rejects(), 0) << r.dump();
  }
}

}  // namespace

}  // namespace ir_decompose_triangle_test
