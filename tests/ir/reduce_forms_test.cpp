// IR-string tests of FuseBroadcastReduce over each supported reduction schema: the fused
// tsfuse::reduce carries the reduction name, dims, keepdim and dtype of the original node, and
// the graph computes the same values.
#include "ir_util.h"

namespace ir_reduce_forms_test {

namespace {

using namespace tsfuse_test;

struct ReduceCase {
  std::string body;  // uses %a, %b; returns the reduction's output
  std::string reduction;
  std::optional<std::vector<int64_t>> dims;
  bool keepdim;
  std::optional<int64_t> dtype;
  std::string expr;
  std::string gone;  // the reduction node's kind, e.g. "aten::mean"
  at::ScalarType inputType = at::kFloat;
};

void expectReduce(const ReduceCase& c) {
  SCOPED_TRACE(c.body);
  auto g = graphWithConstants("%a : Tensor, %b : Tensor", c.body, R"IR(
  %f64 : int = prim::Constant[value=7]()
  %dims0m1 : int[] = prim::Constant[value=[0, -1]]()
)IR");
  auto ref = g->copy();
  PassRun r = runReduce(g);
  EXPECT_TRUE(r.changed) << r.dump();
  ASSERT_EQ(r.rewrites(), 1) << r.dump();
  EXPECT_EQ(r.rejects(), 0) << r.dump();
  EXPECT_EQ(r.firstRewrite()->fusedOp, "tsfuse::reduce");
  EXPECT_EQ(r.firstRewrite()->expr.rfind(c.expr + " |> " + c.reduction + "(", 0), 0u) << r.firstRewrite()->expr;
  EXPECT_TRUE(fileCheck(r.ir, [&](FileCheck& fc) {
    fc.check_count("tsfuse::reduce", 1, true)->check_not(c.gone)->check_not("aten::sub");
  }));
  EXPECT_TRUE(fileCheck(r.ir, [&](FileCheck& fc) { fc.check_not(c.gone)->check_not("aten::sub"); }));
  auto fused = findNodes(g, "tsfuse::reduce");
  ASSERT_EQ(fused.size(), 1u);
  torch::jit::Node* n = fused[0];
  EXPECT_EQ(exprOf(n), c.expr);
  EXPECT_EQ(constInput(n, 2).toStringRef(), c.reduction);
  c10::IValue dims = constInput(n, 3);
  if (c.dims) {
    ASSERT_TRUE(dims.isIntList()) << dims;
    EXPECT_EQ(dims.toIntVector(), *c.dims);
  } else {
    EXPECT_TRUE(dims.isNone()) << dims;
  }
  EXPECT_EQ(constInput(n, 4).toBool(), c.keepdim);
  c10::IValue dt = constInput(n, 5);
  if (c.dtype) {
    ASSERT_TRUE(dt.isInt()) << dt;
    EXPECT_EQ(dt.toInt(), *c.dtype);
  } else {
    EXPECT_TRUE(dt.isNone()) << dt;
  }
  Gen gen(std::hash<std::string>()(c.body));
  bool exact = c.reduction != "sum" && c.reduction != "mean" && c.reduction != "prod";
  EXPECT_TRUE(sameOutputs(ref, g, {gen.tensor({3, 1, 4}, c.inputType), gen.tensor({5, 4}, c.inputType)}, exact));
  EXPECT_TRUE(sameOutputs(ref, g, {gen.tensor({2, 6, 1}, c.inputType), gen.tensor({6, 3}, c.inputType)}, exact));
}

TEST(ReduceFormsIR, MeanKeepdim) {
  expectReduce({R"IR(
  %s : Tensor = aten::sub(%a, %b, %one)
  %d : Tensor = aten::abs(%s)
  %m : Tensor = aten::mean(%d, %dims1, %true, %none)
  return (%m)
)IR",
                "mean", std::vector<int64_t>{1}, true, std::nullopt, "v1: sub($0, $1); abs(%0)", "aten::mean"});
}

TEST(ReduceFormsIR, MeanOverNegativeAndMultipleDimsWithDtype) {
  expectReduce({R"IR(
  %s : Tensor = aten::mul(%a, %b)
  %d : Tensor = aten::neg(%s)
  %m : Tensor = aten::mean(%d, %dims0m1, %false, %f64)
  return (%m)
)IR",
                "mean", std::vector<int64_t>{0, -1}, false, 7, "v1: mul($0, $1); neg(%0)", "aten::mean"});
}

TEST(ReduceFormsIR, AmaxKeepdim) {
  expectReduce({R"IR(
  %s : Tensor = aten::sub(%a, %b, %one)
  %d : Tensor = aten::abs(%s)
  %m : Tensor = aten::amax(%d, %dims1, %true)
  return (%m)
)IR",
                "amax", std::vector<int64_t>{1}, true, std::nullopt, "v1: sub($0, $1); abs(%0)", "aten::amax"});
}

TEST(ReduceFormsIR, ArgmaxKeepdim) {
  expectReduce({R"IR(
  %s : Tensor = aten::sub(%a, %b, %one)
  %d : Tensor = aten::abs(%s)
  %m : Tensor = aten::argmax(%d, %one, %true)
  return (%m)
)IR",
                "argmax", std::vector<int64_t>{1}, true, std::nullopt, "v1: sub($0, $1); abs(%0)", "aten::argmax"});
}

TEST(ReduceFormsIR, ArgmaxOverAllDims) {
  expectReduce({R"IR(
  %s : Tensor = aten::sub(%a, %b, %one)
  %d : Tensor = aten::abs(%s)
  %m : Tensor = aten::argmax(%d, %none, %false)
  return (%m)
)IR",
                "argmax", std::nullopt, false, std::nullopt, "v1: sub($0, $1); abs(%0)", "aten::argmax"});
}

TEST(ReduceFormsIR, AnyDimKeepdim) {
  expectReduce({R"IR(
  %s : Tensor = aten::sub(%a, %b, %one)
  %c : Tensor = aten::gt(%s, %zero)
  %m : Tensor = aten::any(%c, %one, %true)
  return (%m)
)IR",
                "any", std::vector<int64_t>{1}, true, std::nullopt, "v1: sub($0, $1); gt(%0, 0)", "aten::any"});
}

TEST(ReduceFormsIR, FullSumOfIntsWithDtype) {
  expectReduce({R"IR(
  %s : Tensor = aten::mul(%a, %b)
  %c : Tensor = aten::add(%s, %b, %one)
  %m : Tensor = aten::sum(%c, %f64)
  return (%m)
)IR",
                "sum", std::nullopt, false, 7, "v1: mul($0, $1); add(%0, $1)", "aten::sum", at::kInt});
}

TEST(ReduceFormsIR, ProdOverOneDim) {
  expectReduce({R"IR(
  %s : Tensor = aten::sub(%a, %b, %one)
  %c : Tensor = aten::sigmoid(%s)
  %m : Tensor = aten::prod(%c, %one, %false, %none)
  return (%m)
)IR",
                "prod", std::vector<int64_t>{1}, false, std::nullopt, "v1: sub($0, $1); sigmoid(%0)", "aten::prod"});
}

}  // namespace

// --- softmax / log_softmax of a broadcast region: one tsfuse::softmax -----------------------

const char* kSoftmaxHead = R"IR(
graph(%a : Tensor, %b : Tensor):
  %none : NoneType = prim::Constant()
  %one : int = prim::Constant[value=1]()
  %m1 : int = prim::Constant[value=-1]()
  %f64 : int = prim::Constant[value=7]()
  %two : int = prim::Constant[value=2]()
  %au : Tensor = aten::unsqueeze(%a, %one)
  %d : Tensor = aten::sub(%au, %b, %one)
  %e : Tensor = aten::mul(%d, %two)
)IR";

TEST(ReduceFormsIR, SoftmaxAndLogSoftmaxOfABroadcastRegion) {
  for (const char* kind : {"aten::softmax", "aten::log_softmax"}) {
    auto g = parseGraph(std::string(kSoftmaxHead) + "  %s : Tensor = " + kind + "(%e, %m1, %none)\n  return (%s)\n");
    auto ref = g->copy();
    PassRun r = runReduce(g);
    ASSERT_EQ(r.rewrites(), 1) << r.dump();
    EXPECT_EQ(r.firstRewrite()->fusedOp, "tsfuse::softmax");
    EXPECT_TRUE(fileCheck(r.ir, [&](FileCheck& fc) {
      fc.check("aten::unsqueeze")->check("tsfuse::softmax")->check_not(kind)->check_not("aten::mul");
    })) << r.ir;
    auto fused = findNodes(g, "tsfuse::softmax");
    ASSERT_EQ(fused.size(), 1u);
    EXPECT_EQ(exprOf(fused[0]), "v1: sub($0, $1); mul(%0, 2)");
    EXPECT_EQ(constInput(fused[0], 2).toInt(), -1);
    EXPECT_EQ(constInput(fused[0], 3).toBool(), std::string(kind) == "aten::log_softmax");
    Gen gen(5);
    EXPECT_TRUE(sameOutputs(ref, g, {gen.tensor({6, 4}, at::kFloat), gen.tensor({5, 4}, at::kFloat)}, /*exact=*/false));
  }
}

TEST(ReduceFormsIR, NegativeSoftmaxWithDtypeOrSharedValue) {
  // A dtype converts the value first; a value also used elsewhere is stored anyway.
  auto g = parseGraph(std::string(kSoftmaxHead) + "  %s : Tensor = aten::softmax(%e, %m1, %f64)\n  return (%s)\n");
  PassRun r = runReduce(g);
  EXPECT_EQ(r.rewrites(), 0) << r.dump();
  EXPECT_TRUE(r.rejectedWith(": a dtype argument (the value would be converted first)")) << r.dump();
  auto h = parseGraph(std::string(kSoftmaxHead) + "  %s : Tensor = aten::softmax(%e, %m1, %none)\n  return (%s, %e)\n");
  PassRun q = runReduce(h);
  EXPECT_EQ(q.rewrites(), 0) << q.dump();
  EXPECT_TRUE(q.rejectedWith("the value is also used elsewhere")) << q.dump();
  EXPECT_TRUE(fileCheck(q.ir, [](FileCheck& fc) { fc.check("aten::mul")->check("aten::softmax"); }));
}

}  // namespace ir_reduce_forms_test
