// The gradient programs of fused elementwise programs (kernels/reference/backward.h): for programs
// of the forms the corpus fuses (a broadcast difference under exp, a clamped box overlap, a value
// read twice, a where over a comparison, a cast, a number exponent), each operand's gradient
// program, summed over the dims the operand was broadcast along, equals ATen's autograd through the
// program's reference evaluation, on values with ties and zeros.
#include "test_util.h"

#include "kernels/reference/aten_eval.h"
#include "kernels/reference/backward.h"

#include <ATen/ExpandUtils.h>
#include <torch/csrc/autograd/autograd.h>

namespace ops_gradient_program_test {

namespace {

using namespace tsfuse_test;
using tsfuse::Gradient;

struct Program {
  const char* text;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<at::ScalarType> dtypes;
};

at::Tensor valuesWithTies(Gen& gen, at::IntArrayRef shape, at::ScalarType t) {
  static const at::Tensor pool = at::tensor({-1.5, -1.0, 0.0, 0.5, 1.0, 2.0}, at::kDouble);
  return pool.index({at::randint(0, pool.numel(), shape, gen.gen, at::kLong)}).to(t);
}

// Checks every operand's gradient program against ATen's autograd; returns how many flowed.
int checkProgram(const Program& p, Gen& gen) {
  SCOPED_TRACE(p.text);
  tsfuse::Expr e = tsfuse::Expr::parse(p.text);
  std::vector<at::Tensor> leaves;
  for (size_t i = 0; i < p.shapes.size(); ++i) {
    at::Tensor x = valuesWithTies(gen, p.shapes[i], p.dtypes[i]);
    leaves.push_back(at::isFloatingType(x.scalar_type()) ? x.requires_grad_() : x);
  }
  at::Tensor r = tsfuse::evalAten(e, leaves);
  at::Tensor g = valuesWithTies(gen, r.sizes(), r.scalar_type());
  int flowed = 0;
  for (size_t i = 0; i < leaves.size(); ++i) {
    if (!leaves[i].requires_grad()) continue;
    SCOPED_TRACE("operand $" + std::to_string(i));
    Gradient grad = tsfuse::gradientOf(e, static_cast<int>(i), leaves);
    std::vector<at::Tensor> want;
    if (r.requires_grad())
      want = torch::autograd::grad({r}, {leaves[i]}, {g}, /*retain_graph=*/true, false, /*allow_unused=*/true);
    const bool atenFlows = !want.empty() && want[0].defined() && !at::equal(want[0], at::zeros_like(want[0]));
    if (grad.status != Gradient::Status::Flows) {
      EXPECT_EQ(grad.status, Gradient::Status::None) << grad.why;
      EXPECT_FALSE(atenFlows) << "ATen passes a gradient where the program says none";
      continue;
    }
    std::vector<at::Tensor> in;
    for (const at::Tensor& l : leaves) in.push_back(l.detach());
    in.push_back(g);
    at::Tensor got = at::sum_to(tsfuse::evalAten(grad.expr, in), leaves[i].sizes());
    if (want.empty()) {
      ADD_FAILURE() << "ATen passes no gradient where the program has one: " << grad.expr.str();
      continue;
    }
    at::Tensor ref = want[0].defined() ? want[0] : at::zeros_like(leaves[i]);
    EXPECT_EQ(got.scalar_type(), ref.scalar_type()) << grad.expr.str();
    EXPECT_TRUE(got.sizes().equals(ref.sizes()) && at::allclose(got, ref.to(got.scalar_type()), 1e-6, 1e-6, true))
        << grad.expr.str() << "\ngot " << got << "\nATen " << ref;
    ++flowed;
  }
  return flowed;
}

TEST(GradientProgram, EveryOperandsGradientIsAtensAutograd) {
  const auto f64 = at::kDouble, f32 = at::kFloat;
  const std::vector<Program> programs = {
      // a Gaussian kernel over an outer difference, divided by a 0-dim bandwidth
      {"v1: sub($0, $1); mul(%0, %0); neg(%1); div(%2, $2); exp(%3)", {{5, 1}, {1, 4}, {}}, {f64, f64, f64}},
      // a clamped box overlap (torchvision's inter), squared
      {"v1: minimum($0, $1); maximum($2, $3); sub(%0, %1); clamp(%2, 0, None); mul(%3, %3)",
       {{5, 1}, {1, 4}, {5, 1}, {1, 4}},
       {f64, f64, f64, f64}},
      // a value and an operand read twice
      {"v1: mul($0, $1); add(%0, $0); mul(%1, %0)", {{3, 1}, {1, 4}}, {f64, f64}},
      // a where over a comparison, then relu
      {"v1: gt($0, $1); where(%0, $0, $1); relu(%1)", {{3, 1}, {1, 4}}, {f64, f64}},
      // a cast: the float32 operand's gradient comes back as float32
      {"v1: to($0, float64); mul(%0, $1)", {{3, 1}, {1, 4}}, {f32, f64}},
      // a number exponent (its derivative's `2 - 1` folds to a number) and sqrt
      {"v1: sub($0, $1); pow(%0, 2); add(%1, 1); sqrt(%2)", {{3, 1}, {1, 4}}, {f64, f64}},
      // maximum with ties between the operands, and abs at zero
      {"v1: maximum($0, $1); abs(%0); mul(%1, $1)", {{6, 1}, {1, 6}}, {f64, f64}},
  };
  Gen gen(11);
  int flowed = 0;
  for (const Program& p : programs)
    for (int rep = 0; rep < 4; ++rep) flowed += checkProgram(p, gen);
  EXPECT_EQ(flowed, 4 * 17);  // every float operand of every program
}

TEST(GradientProgram, RecomputesTheForwardAndCastsToTheOperandsDtype) {
  tsfuse::Expr e = tsfuse::Expr::parse("v1: sub($0, $1); exp(%0)");
  Gradient g = tsfuse::gradientOf(e, 0, {at::ones({3, 1}), at::ones({1, 4})});
  ASSERT_EQ(g.status, Gradient::Status::Flows);
  EXPECT_EQ(g.expr.str(), "v1: sub($0, $1); exp(%0); mul($2, %1); to(%2, float32); to(%3, float32)");
}

TEST(GradientProgram, NoGradientThroughAComparison) {
  tsfuse::Expr e = tsfuse::Expr::parse("v1: gt($0, $1); to(%0, float64)");
  Gradient g = tsfuse::gradientOf(e, 0, {at::ones({3, 1}, at::kDouble), at::ones({1, 4}, at::kDouble)});
  EXPECT_EQ(g.status, Gradient::Status::None);
}

// An integral or bool value carries no gradient, as in autograd: through x.to(int64) only the
// float path reaches x (fuzzer seed 8118 programs 1140, 5622, 3143, 4329).
TEST(GradientProgram, NoGradientThroughAnIntegralCast) {
  const std::vector<at::Tensor> x{at::ones({3}, at::kDouble)};
  EXPECT_EQ(tsfuse::gradientOf(tsfuse::Expr::parse("v1: to($0, int64); reciprocal(%0)"), 0, x).status,
            Gradient::Status::None);
  EXPECT_EQ(tsfuse::gradientOf(tsfuse::Expr::parse("v1: to($0, bool); to(%0, float64); mul(%1, 2.0)"), 0, x).status,
            Gradient::Status::None);
  Gradient g = tsfuse::gradientOf(tsfuse::Expr::parse("v1: to($0, int64); mul(%0, $0)"), 0, x);
  ASSERT_EQ(g.status, Gradient::Status::Flows);  // the float factor's path: g * to($0, int64)
  EXPECT_EQ(g.expr.str(), "v1: to($0, int64); mul(%0, $0); mul($1, %0); to(%2, float64)");
}

}  // namespace
}  // namespace ops_gradient_program_test
