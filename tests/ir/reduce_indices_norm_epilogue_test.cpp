// IR-string tests of FuseBroadcastReduce for max/min with indices (tsfuse::reduce_with_indices),
// logsumexp, norm (aten::norm.*, aten::linalg_vector_norm), var/std (unbiased or correction) and the elementwise epilogue of a
// reduction; with named negative cases. Each rewritten graph computes what the original does.
#include "ir_util.h"
#include "passes/analysis/op_table.h"

namespace ir_reduce_indices_norm_epilogue_test {

namespace {

using namespace tsfuse_test;

// graph(%a, %b, %w) with the common constants and these.
std::shared_ptr<Graph> graphOf(const std::string& body, bool named = false) {
  return graphWithConstants("%a : Tensor, %b : Tensor, %w : Tensor", body, R"IR(
  %half : float = prim::Constant[value=0.5]()
  %three : float = prim::Constant[value=3.]()
  %inf : float = prim::Constant[value=inf]()
  %dimsm1 : int[] = prim::Constant[value=[-1]]()
)IR",
                            named);
}

struct Fused {
  std::shared_ptr<Graph> g, ref;
  PassRun r;
};

Fused fuse(const std::string& body) {
  Fused f;
  f.g = graphOf(body);
  f.ref = f.g->copy();
  f.r = runReduce(f.g);
  return f;
}

std::vector<c10::IValue> inputs(uint64_t seed, at::ScalarType t = at::kFloat) {
  Gen g(seed);
  return {g.tensor({3, 1, 4}, t), g.tensor({5, 4}, t), (g.tensor({5}, at::kFloat).abs() + 0.5)};
}

TEST(ReduceIndicesNormEpilogueIR, MaxDimValuesAndIndices) {
  Fused f = fuse(R"IR(
  %s : Tensor = aten::sub(%a, %b, %one)
  %d : Tensor = aten::abs(%s)
  %v : Tensor, %i : Tensor = aten::max(%d, %one, %false)
  return (%v, %i)
)IR");
  ASSERT_EQ(f.r.rewrites(), 1) << f.r.dump();
  EXPECT_EQ(f.r.firstRewrite()->fusedOp, "tsfuse::reduce_with_indices");
  EXPECT_TRUE(fileCheck(f.r.ir, [](FileCheck& fc) {
    fc.check_count("tsfuse::reduce_with_indices", 1, true)->check_not("aten::max")->check_not("aten::abs");
  }));
  auto n = findNodes(f.g, "tsfuse::reduce_with_indices");
  ASSERT_EQ(n.size(), 1u);
  EXPECT_EQ(exprOf(n[0]), "v1: sub($0, $1); abs(%0)");
  EXPECT_EQ(constInput(n[0], 2).toStringRef(), "max");
  EXPECT_EQ(constInput(n[0], 3).toInt(), 1);
  EXPECT_FALSE(constInput(n[0], 4).toBool());
  EXPECT_TRUE(sameOutputs(f.ref, f.g, inputs(1)));
  EXPECT_TRUE(sameOutputs(f.ref, f.g, inputs(2, at::kInt)));  // ties: the first index, as eager
}

TEST(ReduceIndicesNormEpilogueIR, MinDimKeepdimOnlyIndicesUsed) {
  Fused f = fuse(R"IR(
  %s : Tensor = aten::mul(%a, %b)
  %v : Tensor, %i : Tensor = aten::min(%s, %m1, %true)
  return (%i)
)IR");
  ASSERT_EQ(f.r.rewrites(), 1) << f.r.dump();
  EXPECT_TRUE(
      fileCheck(f.r.ir, [](FileCheck& fc) { fc.check("tsfuse::reduce_with_indices")->check_not("aten::min"); }));
  EXPECT_TRUE(sameOutputs(f.ref, f.g, inputs(3)));
}

TEST(ReduceIndicesNormEpilogueIR, LogsumexpKeepdim) {
  Fused f = fuse(R"IR(
  %s : Tensor = aten::sub(%a, %b, %one)
  %q : Tensor = aten::mul(%s, %s)
  %n : Tensor = aten::neg(%q)
  %l : Tensor = aten::logsumexp(%n, %dims1, %true)
  return (%l)
)IR");
  ASSERT_EQ(f.r.rewrites(), 1) << f.r.dump();
  EXPECT_TRUE(fileCheck(
      f.r.ir, [](FileCheck& fc) { fc.check("\"logsumexp\"")->check("tsfuse::reduce")->check_not("aten::logsumexp"); }));
  EXPECT_TRUE(sameOutputs(f.ref, f.g, inputs(4), /*exact=*/false));
}

TEST(ReduceIndicesNormEpilogueIR, NormSchemasCarryTheirOrder) {
  struct Case {
    std::string node, reduction;
  };
  for (const Case& c : std::vector<Case>{
           {"aten::linalg_vector_norm(%s, %three, %dimsm1, %false, %none)", "norm:3.0"},
           {"aten::linalg_vector_norm(%s, %inf, %dims1, %true, %none)", "norm:inf"},
           {"aten::norm(%s, %two, %dimsm1, %false)", "norm:2.0"},
           {"aten::norm(%s, %none, %dimsm1, %true)", "norm:2.0"},
           {"aten::norm(%s, %two)", "norm:2.0"},
       }) {
    SCOPED_TRACE(c.node);
    Fused f = fuse(R"IR(
  %s : Tensor = aten::sub(%a, %b, %one)
  %r : Tensor = )IR" +
                   c.node + R"IR(
  return (%r)
)IR");
    ASSERT_EQ(f.r.rewrites(), 1) << f.r.dump();
    auto n = findNodes(f.g, "tsfuse::reduce");
    ASSERT_EQ(n.size(), 1u);
    EXPECT_EQ(constInput(n[0], 2).toStringRef(), c.reduction);
    EXPECT_TRUE(
        fileCheck(f.r.ir, [](FileCheck& fc) { fc.check_not("aten::norm")->check_not("aten::linalg_vector_norm"); }));
    EXPECT_TRUE(sameOutputs(f.ref, f.g, inputs(5), /*exact=*/false));
  }
}

// reduce |> sqrt |> mul(w) |> exp(-x / 0.5): one tsfuse::reduce with the epilogue.
TEST(ReduceIndicesNormEpilogueIR, EpilogueChainIsAbsorbed) {
  Fused f = fuse(R"IR(
  %s : Tensor = aten::sub(%a, %b, %one)
  %q : Tensor = aten::pow(%s, %two)
  %r : Tensor = aten::sum(%q, %dimsm1, %false, %none)
  %d : Tensor = aten::sqrt(%r)
  %n : Tensor = aten::neg(%d)
  %x : Tensor = aten::div(%n, %half)
  %e : Tensor = aten::exp(%x)
  %y : Tensor = aten::mul(%e, %w)
  return (%y)
)IR");
  ASSERT_EQ(f.r.rewrites(), 1) << f.r.dump();
  EXPECT_NE(f.r.firstRewrite()->reason.find("epilogue of 5 elementwise ops"), std::string::npos) << f.r.dump();
  EXPECT_TRUE(fileCheck(f.r.ir, [](FileCheck& fc) {
    fc.check_count("tsfuse::reduce", 1, true)->check_not("aten::sqrt")->check_not("aten::exp")->check_not("aten::mul");
  }));
  auto n = findNodes(f.g, "tsfuse::reduce");
  ASSERT_EQ(n.size(), 1u);
  EXPECT_EQ(constInput(n[0], 6).toStringRef(), "v1: sqrt($0); neg(%0); div(%1, 0.5); exp(%2); mul(%3, $1)");
  EXPECT_TRUE(sameOutputs(f.ref, f.g, inputs(6), /*exact=*/false));
}

// The rewrite's event names every node it replaced, the epilogue's included, with its id, so the
// HTML viewer links each of them to the fused op.
TEST(ReduceIndicesNormEpilogueIR, EpilogueNodesAreNamedInTheEvent) {
  auto g = graphOf(R"IR(
  %s : Tensor = aten::sub(%a, %b, %one)
  %q : Tensor = aten::mul(%s, %s)
  %r : Tensor = aten::sum(%q, %dimsm1, %false, %none)
  %d : Tensor = aten::sqrt(%r)
  %y : Tensor = aten::mul(%d, %w)
  return (%y)
)IR",
                   /*named=*/true);
  PassRun r = runReduce(g);
  ASSERT_EQ(r.rewrites(), 1) << r.dump();
  const tsfuse::FusionEvent& e = *r.firstRewrite();
  EXPECT_EQ(e.nodeIds, (std::vector<std::string>{"%s", "%q", "%r", "%d", "%y"}));
  ASSERT_EQ(e.nodes.size(), 5u);
  EXPECT_EQ(e.nodes[3].rfind("aten::sqrt", 0), 0u) << e.nodes[3];
  EXPECT_EQ(e.nodes[4].rfind("aten::mul", 0), 0u) << e.nodes[4];
  auto fused = findNodes(g, "tsfuse::reduce");
  ASSERT_EQ(fused.size(), 1u);
  EXPECT_EQ(e.fusedNode, tsfuse::nodeId(fused[0]));
}

// Negative: the reduced value is also returned, so it is materialised anyway; the epilogue
// stays unfused (and sqrt stays an aten op).
TEST(ReduceIndicesNormEpilogueIR, NegativeEpilogueWhenReducedValueEscapes) {
  Fused f = fuse(R"IR(
  %s : Tensor = aten::sub(%a, %b, %one)
  %q : Tensor = aten::mul(%s, %s)
  %r : Tensor = aten::sum(%q, %dimsm1, %false, %none)
  %d : Tensor = aten::sqrt(%r)
  return (%d, %r)
)IR");
  ASSERT_EQ(f.r.rewrites(), 1) << f.r.dump();
  EXPECT_TRUE(fileCheck(f.r.ir, [](FileCheck& fc) { fc.check("tsfuse::reduce")->check("aten::sqrt"); }));
  auto n = findNodes(f.g, "tsfuse::reduce");
  ASSERT_EQ(n.size(), 1u);
  EXPECT_TRUE(constInput(n[0], 6).isNone());
  EXPECT_TRUE(sameOutputs(f.ref, f.g, inputs(7), /*exact=*/false));
}

// Negative: a region operand is written in place after the reduction, before the epilogue;
// moving the computation to the chain's end would read the new values, so the epilogue is not
// absorbed (reason logged). A write after the chain's end is harmless (next test).
TEST(ReduceIndicesNormEpilogueIR, NegativeEpilogueOperandWrittenInPlace) {
  Fused f = fuse(R"IR(
  %ac : Tensor = aten::clone(%a, %none)
  %s : Tensor = aten::sub(%ac, %b, %one)
  %q : Tensor = aten::mul(%s, %s)
  %r : Tensor = aten::sum(%q, %dimsm1, %false, %none)
  %w2 : Tensor = aten::mul_(%ac, %two)
  %y : Tensor = aten::mul(%r, %w)
  return (%y, %w2)
)IR");
  ASSERT_EQ(f.r.rewrites(), 1) << f.r.dump();
  EXPECT_NE(f.r.firstRewrite()->reason.find("epilogue not fused"), std::string::npos) << f.r.dump();
  EXPECT_NE(f.r.firstRewrite()->reason.find("is written by an in-place op"), std::string::npos) << f.r.dump();
  EXPECT_TRUE(
      fileCheck(f.r.ir, [](FileCheck& fc) { fc.check("tsfuse::reduce")->check("aten::mul_")->check("aten::mul("); }));
  EXPECT_TRUE(sameOutputs(f.ref, f.g, inputs(8), /*exact=*/false));
}

TEST(ReduceIndicesNormEpilogueIR, EpilogueOperandWrittenAfterTheChainIsAbsorbed) {
  Fused f = fuse(R"IR(
  %s : Tensor = aten::sub(%a, %b, %one)
  %q : Tensor = aten::mul(%s, %s)
  %r : Tensor = aten::sum(%q, %dimsm1, %false, %none)
  %wc : Tensor = aten::clone(%w, %none)
  %y : Tensor = aten::mul(%r, %wc)
  %w2 : Tensor = aten::mul_(%wc, %two)
  return (%y, %w2)
)IR");
  ASSERT_EQ(f.r.rewrites(), 1) << f.r.dump();
  EXPECT_EQ(f.r.firstRewrite()->reason.find("epilogue not fused"), std::string::npos) << f.r.dump();
  EXPECT_TRUE(fileCheck(
      f.r.ir, [](FileCheck& fc) { fc.check("tsfuse::reduce")->check_not("aten::mul(")->check("aten::mul_"); }));
  EXPECT_TRUE(sameOutputs(f.ref, f.g, inputs(8), /*exact=*/false));
}

// Negative: a non-constant dim / norm order is not matched; the graph is left unchanged.
TEST(ReduceIndicesNormEpilogueIR, NegativeNonConstantDimOrOrder) {
  const std::string ir = R"IR(
graph(%a : Tensor, %b : Tensor, %k : int, %p : float):
  %false : bool = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %none : NoneType = prim::Constant()
  %dims1 : int[] = prim::Constant[value=[1]]()
  %s : Tensor = aten::sub(%a, %b, %one)
  %v : Tensor, %i : Tensor = aten::max(%s, %k, %false)
  %n : Tensor = aten::linalg_vector_norm(%s, %p, %dims1, %false, %none)
  return (%v, %i, %n)
)IR";
  auto g = parseGraph(ir);
  PassRun r = runReduce(g);
  EXPECT_FALSE(r.changed) << r.dump();
  EXPECT_TRUE(fileCheck(
      r.ir, [](FileCheck& fc) { fc.check("aten::max")->check("aten::linalg_vector_norm")->check_not("tsfuse::"); }));
  std::string why;
  tsfuse::ReductionMatch m;
  EXPECT_FALSE(tsfuse::matchReduction(findNodes(g, "aten::max")[0], m, &why));
  EXPECT_NE(why.find("dim is not a constant"), std::string::npos) << why;
  EXPECT_FALSE(tsfuse::matchReduction(findNodes(g, "aten::linalg_vector_norm")[0], m, &why));
  EXPECT_NE(why.find("the norm's order is not a constant"), std::string::npos) << why;
}

// var/std over the broadcast axis: every schema's correction lands in the reduction text.
TEST(ReduceIndicesNormEpilogueIR, VarStdSchemasCarryTheirCorrection) {
  struct Case {
    std::string node, reduction;
  };
  const std::vector<Case> cases = {
      {"aten::var(%s, %dims1, %true, %false)", "\"var:1.0\""},
      {"aten::std(%s, %dims1, %false, %true)", "\"std:0.0\""},
      {"aten::var(%s, %dimsm1, %two, %false)", "\"var:2.0\""},
      {"aten::std(%s, %dims1, %none, %false)", "\"std:1.0\""},
  };
  for (const Case& c : cases) {
    Fused f = fuse("  %s : Tensor = aten::sub(%a, %b, %one)\n  %v : Tensor = " + c.node + "\n  return (%v)\n");
    ASSERT_EQ(f.r.rewrites(), 1) << c.node << "\n" << f.r.dump();
    EXPECT_TRUE(fileCheck(f.r.ir, [&](FileCheck& fc) {
      fc.check(c.reduction)->check("tsfuse::reduce")->check_not("aten::var")->check_not("aten::std");
    })) << c.node;
    EXPECT_TRUE(sameOutputs(f.ref, f.g, inputs(9), /*exact=*/false)) << c.node;
  }
}

// Negative: a correction that is not a constant is not matched.
TEST(ReduceIndicesNormEpilogueIR, NegativeNonConstantCorrection) {
  const std::string ir = R"IR(
graph(%a : Tensor, %b : Tensor, %c : int):
  %false : bool = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %dims1 : int[] = prim::Constant[value=[1]]()
  %s : Tensor = aten::sub(%a, %b, %one)
  %v : Tensor = aten::var(%s, %dims1, %c, %false)
  return (%v)
)IR";
  auto g = parseGraph(ir);
  PassRun r = runReduce(g);
  EXPECT_FALSE(r.changed) << r.dump();
  std::string why;
  tsfuse::ReductionMatch m;
  EXPECT_FALSE(tsfuse::matchReduction(findNodes(g, "aten::var")[0], m, &why));
  EXPECT_NE(why.find("correction"), std::string::npos) << why;
}

}  // namespace

}  // namespace ir_reduce_indices_norm_epilogue_test
