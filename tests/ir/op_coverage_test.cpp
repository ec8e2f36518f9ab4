// IR-string tests of what the passes carry into the expression: scalar literals (int vs float vs
// bool), rsub, where, comparisons and logical ops, to(dtype), clamp_min/clamp_max/clamp(Tensor),
// rounding division, unary ops, and the reductions mean/amax/argmax/any with keepdim.
#include "ir_util.h"

namespace ir_op_coverage_test {

namespace {

using namespace tsfuse_test;

// Parses `body` as the body of graph(%a : Tensor, %b : Tensor) with common constants, runs
// FusePairwise, expects exactly one rewrite to tsfuse::pairwise with expression `expr`, no
// aten:: op of `gone` left, and the same outputs as before on [4,1] x [1,5] inputs of `dtype`.
void expectPairwise(const std::string& body, const std::string& expr, std::vector<std::string> gone,
                    at::ScalarType dtype = at::kFloat) {
  SCOPED_TRACE(body);
  auto g = graphWithConstants("%a : Tensor, %b : Tensor", body, R"IR(
  %three : int = prim::Constant[value=3]()
  %f1 : float = prim::Constant[value=1.]()
  %f05 : float = prim::Constant[value=0.5]()
  %f25 : float = prim::Constant[value=2.5]()
)IR");
  auto ref = g->copy();
  PassRun r = runPairwise(g);
  EXPECT_TRUE(r.changed) << r.dump();
  ASSERT_EQ(r.rewrites(), 1) << r.dump();
  EXPECT_EQ(r.rejects(), 0) << r.dump();
  EXPECT_EQ(r.firstRewrite()->expr, expr);
  auto fused = findNodes(g, "tsfuse::pairwise");
  ASSERT_EQ(fused.size(), 1u) << r.ir;
  EXPECT_EQ(exprOf(fused[0]), expr);
  EXPECT_TRUE(fileCheck(r.ir, [&](FileCheck& fc) {
    fc.check_count("tsfuse::pairwise", 1, true);
    for (const auto& op : gone) fc.check_not(op);
  }));
  EXPECT_TRUE(fileCheck(r.ir, [&](FileCheck& fc) {
    for (const auto& op : gone) fc.check_not(op);
  }));
  Gen gen(std::hash<std::string>()(body));
  EXPECT_TRUE(sameOutputs(ref, g, {gen.tensor({4, 1}, dtype, kNaNInf), gen.tensor({1, 5}, dtype, kNaNInf)}));
  EXPECT_TRUE(sameOutputs(ref, g, {gen.tensor({3, 1, 2}, dtype), gen.tensor({4, 2}, dtype)}));
}

TEST(OpCoverageIR, ScalarOperandsBecomeLiteralsInTheExpr) {
  expectPairwise(R"IR(
  %eps : float = prim::Constant[value=1e-07]()
  %s : Tensor = aten::sub(%a, %b, %one)
  %m : Tensor = aten::mul(%s, %f25)
  %p : Tensor = aten::pow(%m, %two)
  %d : Tensor = aten::div(%p, %three)
  %q : Tensor = aten::add(%d, %eps, %one)
  %r : Tensor = aten::add(%q, %a, %two)
  return (%r)
)IR",
                 "v1: sub($0, $1); mul(%0, 2.5); pow(%1, 2); div(%2, 3); add(%3, 1e-07); add_alpha(%4, $0, 2)",
                 {"aten::sub", "aten::mul", "aten::pow", "aten::div", "aten::add"});
}

// A Python int and a Python float literal differ in type promotion: int * 1 stays int,
// int * 1.0 becomes float. The expression keeps the distinction.
TEST(OpCoverageIR, IntAndFloatLiteralsStayDistinct) {
  const std::string floatBody = R"IR(
  %s : Tensor = aten::sub(%a, %b, %one)
  %m : Tensor = aten::mul(%s, %f1)
  return (%m)
)IR";
  const std::string intBody = R"IR(
  %s : Tensor = aten::sub(%a, %b, %one)
  %m : Tensor = aten::mul(%s, %one)
  return (%m)
)IR";
  expectPairwise(floatBody, "v1: sub($0, $1); mul(%0, 1.0)", {"aten::mul"}, at::kInt);
  expectPairwise(intBody, "v1: sub($0, $1); mul(%0, 1)", {"aten::mul"}, at::kInt);
  for (const auto& [body, dtype] : {std::pair{floatBody, at::kFloat}, std::pair{intBody, at::kInt}}) {
    auto g = parseGraph(
        "graph(%a : Tensor, %b : Tensor):\n  %one : int = prim::Constant[value=1]()\n"
        "  %f1 : float = prim::Constant[value=1.]()\n" +
        body);
    runPairwise(g);
    auto out = runGraph(g, {at::ones({2, 1}, at::kInt), at::ones({1, 3}, at::kInt)});
    EXPECT_EQ(out[0].toTensor().scalar_type(), dtype);
  }
}

TEST(OpCoverageIR, RsubScalarAndTensor) {
  expectPairwise(R"IR(
  %s : Tensor = aten::mul(%a, %b)
  %r : Tensor = aten::rsub(%s, %one, %one)
  %t : Tensor = aten::rsub(%r, %b, %two)
  return (%t)
)IR",
                 "v1: mul($0, $1); sub(1, %0); sub_alpha($1, %1, 2)", {"aten::rsub", "aten::mul"});
}

TEST(OpCoverageIR, WhereTensorAndScalarBranches) {
  expectPairwise(R"IR(
  %c : Tensor = aten::gt(%a, %b)
  %w : Tensor = aten::where(%c, %a, %b)
  %x : Tensor = aten::where(%c, %w, %f05)
  return (%x)
)IR",
                 "v1: gt($0, $1); where(%0, $0, $1); where(%0, %1, 0.5)", {"aten::gt", "aten::where"});
}

TEST(OpCoverageIR, ComparisonsAndLogicalOps) {
  expectPairwise(R"IR(
  %1 : Tensor = aten::ge(%a, %zero)
  %2 : Tensor = aten::le(%b, %f05)
  %3 : Tensor = aten::logical_and(%1, %2)
  %4 : Tensor = aten::ne(%a, %b)
  %5 : Tensor = aten::logical_or(%3, %4)
  %6 : Tensor = aten::eq(%a, %b)
  %7 : Tensor = aten::logical_xor(%5, %6)
  %8 : Tensor = aten::lt(%a, %b)
  %9 : Tensor = aten::logical_not(%8)
  %10 : Tensor = aten::logical_and(%7, %9)
  return (%10)
)IR",
                 "v1: ge($0, 0); le($1, 0.5); logical_and(%0, %1); ne($0, $1); logical_or(%2, %3); "
                 "eq($0, $1); logical_xor(%4, %5); lt($0, $1); logical_not(%7); logical_and(%6, %8)",
                 {"aten::ge", "aten::le", "aten::logical", "aten::ne", "aten::eq", "aten::lt"});
}

TEST(OpCoverageIR, ToDtypeInsideARegion) {
  expectPairwise(R"IR(
  %f64 : int = prim::Constant[value=7]()
  %s : Tensor = aten::sub(%a, %b, %one)
  %z : Tensor = aten::to(%s, %f64, %false, %false, %none)
  %m : Tensor = aten::mul(%z, %a)
  return (%m)
)IR",
                 "v1: sub($0, $1); to(%0, float64); mul(%1, $0)", {"aten::sub", "aten::to", "aten::mul"});
}

// A trace records x.type(y.type()), x.to(y) and x.to(device, dtype) as to(x, device, dtype, ...).
TEST(OpCoverageIR, ToADeviceAndDtypeInsideARegion) {
  expectPairwise(R"IR(
  %f32 : int = prim::Constant[value=6]()
  %cpu : Device = prim::Constant[value="cpu"]()
  %l : Tensor = aten::lt(%a, %b)
  %z : Tensor = aten::to(%l, %cpu, %f32, %false, %false, %none)
  %m : Tensor = aten::mul(%z, %a)
  return (%m)
)IR",
                 "v1: lt($0, $1); to_device(%0, cpu, float32); mul(%1, $0)", {"aten::lt", "aten::to", "aten::mul"});
}

TEST(OpCoverageIR, ClampMinClampMaxAndTensorClamp) {
  expectPairwise(R"IR(
  %s : Tensor = aten::sub(%a, %b, %one)
  %c : Tensor = aten::clamp_min(%s, %f05)
  %d : Tensor = aten::clamp_max(%c, %two)
  %e : Tensor = aten::clamp(%d, %a, %none)
  return (%e)
)IR",
                 "v1: sub($0, $1); clamp_min(%0, 0.5); clamp_max(%1, 2); clamp(%2, $0, None)",
                 {"aten::sub", "aten::clamp_min", "aten::clamp_max", "aten::clamp"});
}

TEST(OpCoverageIR, MinimumMaximumAndRoundingDivision) {
  expectPairwise(R"IR(
  %floor : str = prim::Constant[value="floor"]()
  %trunc : str = prim::Constant[value="trunc"]()
  %m : Tensor = aten::minimum(%a, %b)
  %n : Tensor = aten::maximum(%a, %b)
  %d : Tensor = aten::div(%m, %b, %floor)
  %e : Tensor = aten::div(%d, %three, %trunc)
  %f : Tensor = aten::add(%e, %n, %one)
  return (%f)
)IR",
                 "v1: minimum($0, $1); maximum($0, $1); div_floor(%0, $1); div_trunc(%2, 3); add(%3, %1)",
                 {"aten::minimum", "aten::maximum", "aten::div", "aten::add"});
}

}  // namespace

namespace {

using namespace tsfuse_test;

TEST(OpCoverageIR, UnaryOps) {
  expectPairwise(R"IR(
  %s : Tensor = aten::sub(%a, %b, %one)
  %n : Tensor = aten::neg(%s)
  %e : Tensor = aten::exp(%n)
  %r : Tensor = aten::relu(%s)
  %q : Tensor = aten::sqrt(%r)
  %l : Tensor = aten::log(%q)
  %g : Tensor = aten::sigmoid(%l)
  %ab : Tensor = aten::abs(%e)
  %o : Tensor = aten::add(%g, %ab, %one)
  return (%o)
)IR",
                 "v1: sub($0, $1); neg(%0); exp(%1); relu(%0); sqrt(%3); log(%4); sigmoid(%5); abs(%2); "
                 "add(%6, %7)",
                 {"aten::sub", "aten::neg", "aten::exp", "aten::relu", "aten::sqrt", "aten::log", "aten::sigmoid",
                  "aten::abs", "aten::add"});
}

}  // namespace

}  // namespace ir_op_coverage_test
