// eye's entries of the decomposition table (passes/analysis/decompositions.h): eye(n[, m]) read by
// elementwise ops becomes the comparison of two aranges, whose values, dtype (None: the default
// dtype; given) and layout are eye's for empty, square and wide shapes; it fuses with its reader,
// so the [n, m] matrix is never stored; named negative cases keep it whole.
#include "ir_util.h"

#include "passes/analysis/decompositions.h"
#include "passes/decompose.h"
#include "registration/pipeline.h"

namespace ir_decompose_eye_test {

namespace {

using namespace tsfuse_test;

// graph(%x): x * eye(x.size(0)[, x.size(1)], dtype) with the dtype constant `dtype` ("%none" or
// an int constant's IR).
std::shared_ptr<Graph> xTimesEye(bool m, const std::string& dtype) {
  const std::string sizes = m ? "%n, %k" : "%n";
  return graphWithConstants("%x : Tensor",
                            "  %n : int = aten::size(%x, %zero)\n  %k : int = aten::size(%x, %one)\n"
                            "  %e : Tensor = aten::eye(" +
                                sizes + ", " + dtype +
                                ", %none, %cpu, %false)\n  %r : Tensor = aten::mul(%x, %e)\n  return (%r)\n",
                            "  %cpu : Device = prim::Constant[value=\"cpu\"]()\n"
                            "  %f64 : int = prim::Constant[value=7]()\n  %i64 : int = prim::Constant[value=4]()\n"
                            "  %b : int = prim::Constant[value=11]()\n");
}

TEST(DecomposeEye, IsTheComparisonOfTwoAranges) {
  // Each entry's graph against at::eye: values, dtype, sizes, strides.
  int compared = 0;
  for (const tsfuse::Decomposition& d : tsfuse::decompositions()) {
    const std::string schema = d.schema;
    if (schema.rfind("aten::eye", 0) != 0) continue;
    const bool m = schema.rfind("aten::eye.m", 0) == 0, given = d.graph->nodes().rbegin()->kind() == c10::aten::to;
    for (std::optional<at::ScalarType> dtype : {std::optional<at::ScalarType>{}, std::optional(at::kDouble),
                                                std::optional(at::kLong), std::optional(at::kBool)}) {
      if (given != dtype.has_value()) continue;
      for (auto [n, k] : std::vector<std::pair<int64_t, int64_t>>{{0, 3}, {4, 4}, {3, 7}, {1, 1}, {5, 0}}) {
        std::vector<c10::IValue> in{n};
        if (m) in.emplace_back(k);
        in.insert(in.end(), {dtype ? c10::IValue(static_cast<int64_t>(*dtype)) : c10::IValue(), c10::IValue(),
                             c10::IValue(c10::Device("cpu")), c10::IValue(false)});
        const at::Tensor got = runGraph(d.graph, in)[0].toTensor();
        const at::TensorOptions opts = dtype ? at::TensorOptions(*dtype) : at::TensorOptions();
        const at::Tensor want = m ? at::eye(n, k, opts) : at::eye(n, opts);
        EXPECT_EQ(want.scalar_type(), got.scalar_type()) << schema;
        EXPECT_EQ(want.sizes(), got.sizes()) << schema;
        EXPECT_EQ(want.strides(), got.strides()) << schema;
        EXPECT_TRUE(at::equal(want, got)) << schema << " " << n << "x" << k;
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 40);
  // and the pass rewrites every case, with the product's values and dtype unchanged
  for (bool m : {false, true})
    for (const char* dtype : {"%none", "%f64", "%i64", "%b"}) {
      auto original = xTimesEye(m, dtype), g = original->copy();
      PassRun r = runPass(g, tsfuse::Decompose);
      ASSERT_TRUE(r.changed) << dtype << "\n" << r.dump();
      ASSERT_TRUE(findNodes(g, "aten::eye").empty()) << r.ir;
      const at::Tensor x = Gen(3).tensor(m ? std::vector<int64_t>{3, 5} : std::vector<int64_t>{4, 4}, at::kFloat);
      const at::Tensor a = runGraph(original, {x})[0].toTensor(), b = runGraph(g, {x})[0].toTensor();
      EXPECT_EQ(a.scalar_type(), b.scalar_type()) << dtype;
      EXPECT_TRUE(at::equal(a, b)) << dtype;
    }
}

TEST(DecomposeEye, FusesWithItsReaderSoTheMatrixIsNeverStored) {
  // sum(x * eye(n), 1): the diagonal, read without the [n, n] matrix.
  auto g = graphWithConstants("%x : Tensor",
                              "  %n : int = aten::size(%x, %zero)\n"
                              "  %e : Tensor = aten::eye(%n, %none, %none, %cpu, %false)\n"
                              "  %p : Tensor = aten::mul(%x, %e)\n"
                              "  %r : Tensor = aten::sum(%p, %dims1, %false, %none)\n  return (%r)\n",
                              "  %cpu : Device = prim::Constant[value=\"cpu\"]()\n");
  const at::Tensor x = Gen(5).tensor({6, 6}, at::kFloat);
  const at::Tensor want = runGraph(g, {x})[0].toTensor();
  tsfuse::runPipeline(g, tsfuse::PipelineOptions{}, nullptr, "test");
  EXPECT_TRUE(findNodes(g, "aten::eye").empty()) << *g;
  EXPECT_TRUE(findNodes(g, "aten::eq").empty() && findNodes(g, "aten::mul").empty()) << *g;
  EXPECT_EQ(findNodes(g, "tsfuse::reduce").size(), 1u) << *g;
  EXPECT_TRUE(at::equal(want, runGraph(g, {x})[0].toTensor()));
}

TEST(DecomposeEye, StaysWholeWhereItsValueIsNotReadElementwiseOrItsSizeMayBeNegative) {
  // eye feeding a matmul: no candidate (a fill is cheaper than a comparison), not reported.
  auto matmul = graphWithConstants("%x : Tensor",
                                   "  %n : int = aten::size(%x, %one)\n"
                                   "  %e : Tensor = aten::eye(%n, %none, %none, %none, %none)\n"
                                   "  %r : Tensor = aten::matmul(%x, %e)\n  return (%r)\n");
  PassRun r = runPass(matmul, tsfuse::Decompose);
  EXPECT_FALSE(r.changed);
  EXPECT_EQ(r.rejects(), 0) << r.dump();
  // a size from an int argument may be negative, where eye's error is not arange's: kept, named
  auto negative = graphWithConstants("%x : Tensor, %n : int",
                                     "  %e : Tensor = aten::eye(%n, %none, %none, %none, %none)\n"
                                     "  %r : Tensor = aten::mul(%x, %e)\n  return (%r)\n");
  r = runPass(negative, tsfuse::Decompose);
  EXPECT_FALSE(r.changed);
  ASSERT_EQ(r.rejects(), 1) << r.dump();
  EXPECT_NE(r.dump().find("not known to be >= 0"), std::string::npos) << r.dump();
  // a sparse layout: kept, named
  auto sparse = graphWithConstants("%x : Tensor",
                                   "  %n : int = aten::size(%x, %one)\n"
                                   "  %e : Tensor = aten::eye(%n, %none, %one, %none, %none)\n"
                                   "  %r : Tensor = aten::mul(%x, %e)\n  return (%r)\n");
  r = runPass(sparse, tsfuse::Decompose);
  EXPECT_FALSE(r.changed);
  EXPECT_NE(r.dump().find("layout is not strided"), std::string::npos) << r.dump();
}

}  // namespace

}  // namespace ir_decompose_eye_test
