// Errors of the fused ops (malformed expression text, wrong operand counts, unknown reductions,
// and every error eager raises, with eager's own message), and autograd through
// tsfuse::pairwise / tsfuse::reduce (gradients equal eager's).
#include "test_util.h"

#include <torch/csrc/autograd/autograd.h>

#include <c10/core/GradMode.h>

namespace ops_errors_autograd_test {

namespace {

using namespace tsfuse_test;
using T = std::vector<at::Tensor>;

TEST(OpErrors, MalformedExpressionTextThrowsC10Error) {
  const std::vector<std::string> bad = {
      "",                               // empty
      "v2: add($0, $1)",                // unknown version
      "v1 add($0, $1)",                 // missing ':'
      "v1:",                            // no instructions
      "v1: add($0 $1)",                 // missing ','
      "v1: add($0, $1",                 // unclosed
      "v1: frobnicate($0)",             // unknown op
      "v1: add($0)",                    // arity
      "v1: add($0, $1, $0)",            // arity
      "v1: abs(%0)",                    // used before defined
      "v1: abs($0); add(%1, $0)",       // used before defined
      "v1: add($0, $-1)",               // negative reference
      "v1: add($0, 1.2.3)",             // malformed float
      "v1: add($0, 12abc)",             // malformed int
      "v1: add(1, 2)",                  // no tensor argument
      "v1: add($0, None)",              // None outside clamp
      "v1: clamp($0, None, None)",      // clamp without bounds
      "v1: neg($0); clamp($0, %0, 2)",  // mixed tensor / scalar bounds
      "v1: to($0, float99)",            // unknown dtype
      "v1: to($0, 1)",                  // to() needs a dtype
      "v1: add($0, float32)",           // dtype outside to()
      "v1: add($0, $1) junk",           // trailing text
  };
  T ops = {at::ones({2, 1}), at::ones({1, 3})};
  for (const std::string& e : bad) {
    SCOPED_TRACE("expr: '" + e + "'");
    EXPECT_THROW(tsfuse::Expr::parse(e), c10::Error);
    std::string err = errorOf([&] { tsfuse::pairwise(ops, e); });
    EXPECT_NE(err.find("tsfuse"), std::string::npos) << err;
    EXPECT_EQ(err.find("<non-c10"), std::string::npos) << err;
    err = errorOf([&] { tsfuse::reduce(ops, e, "sum"); });
    EXPECT_NE(err.find("tsfuse"), std::string::npos) << err;
  }
}

TEST(OpErrors, WellFormedTextRoundTrips) {
  for (std::string e : {"v1: sub($0, $1); abs(%0); lt(%1, 1)", "v1: add($0, 1e-07); mul(%0, -2.5)",
                        "v1: clamp($0, None, 0.0); where($1, %0, inf)", "v1: to($0, bfloat16); eq(%0, True)",
                        "v1: sub_alpha($0, $1, 2); clamp(%0, $1, $2)", "v1: mul($0, nan); add(%0, -inf)"}) {
    EXPECT_EQ(tsfuse::Expr::parse(e).str(), e);
  }
  EXPECT_EQ(tsfuse::Expr::parse("  v1:sub( $0 ,$1 ) ;abs(%0)").str(), "v1: sub($0, $1); abs(%0)");
}

TEST(OpErrors, WrongOperandCount) {
  at::Tensor a = at::ones({2, 1}), b = at::ones({1, 3});
  EXPECT_THROW(tsfuse::pairwise({a}, "v1: add($0, $1)"), c10::Error);
  EXPECT_THROW(tsfuse::pairwise({a, b, a}, "v1: add($0, $1)"), c10::Error);
  EXPECT_THROW(tsfuse::pairwise({}, "v1: abs($0)"), c10::Error);
  EXPECT_THROW(tsfuse::reduce({a}, "v1: add($0, $1)", "sum"), c10::Error);
  EXPECT_THROW(tsfuse::reduce({a, b, b}, "v1: add($0, $1)", "amax"), c10::Error);
  // The same with autograd recording.
  at::Tensor ag = a.clone().requires_grad_(true);
  EXPECT_THROW(tsfuse::pairwise({ag}, "v1: add($0, $1)"), c10::Error);
  EXPECT_THROW(tsfuse::pairwise({ag, b, b}, "v1: add($0, $1)"), c10::Error);
  EXPECT_THROW(tsfuse::reduce({ag, b, b}, "v1: add($0, $1)", "sum"), c10::Error);
  // An undefined operand.
  EXPECT_THROW(tsfuse::pairwise({a, at::Tensor()}, "v1: add($0, $1)"), c10::Error);
}

TEST(OpErrors, UnknownReductionAndBadDims) {
  at::Tensor a = at::rand({3, 1}), b = at::rand({1, 4});
  std::string err = errorOf([&] { tsfuse::reduce({a, b}, "v1: add($0, $1)", "median"); });
  EXPECT_NE(err.find("median"), std::string::npos) << err;
  EagerFn add = [](const T& x) { return at::add(x[0], x[1]); };
  // Errors eager raises: the same message.
  EXPECT_TRUE(checkReduce("v1: add($0, $1)", {a, b}, add, {"sum", std::vector<int64_t>{2}, false, std::nullopt}));
  EXPECT_TRUE(checkReduce("v1: add($0, $1)", {a, b}, add, {"amax", std::vector<int64_t>{-3}, false, std::nullopt}));
  EXPECT_TRUE(checkReduce("v1: add($0, $1)", {a, b}, add, {"sum", std::vector<int64_t>{0, 0}, false, std::nullopt}));
  EXPECT_TRUE(checkReduce("v1: add($0, $1)", {a, b}, add, {"argmax", std::vector<int64_t>{5}, false, std::nullopt}));
  EXPECT_TRUE(checkReduce("v1: add($0, $1)", {a, b}, add, {"mean", std::nullopt, false, at::kInt}));
  T ints = {at::ones({3, 1}, at::kInt), at::ones({1, 4}, at::kInt)};
  EXPECT_TRUE(checkReduce("v1: add($0, $1)", ints, add, {"mean", std::vector<int64_t>{1}, false, std::nullopt}));
  // Arg reductions and prod take one dim (or all): tsfuse's own error.
  EXPECT_THROW(tsfuse::reduce({a, b}, "v1: add($0, $1)", "argmax", std::vector<int64_t>{0, 1}), c10::Error);
  EXPECT_THROW(tsfuse::reduce({a, b}, "v1: add($0, $1)", "prod", std::vector<int64_t>{0, 1}), c10::Error);
}

TEST(OpErrors, ShapesThatDoNotBroadcastRaiseEagersMessage) {
  Gen g(300);
  T ops = {g.tensor({3, 4}, at::kFloat), g.tensor({5, 4}, at::kFloat)};
  EagerFn f = [](const T& x) { return at::mul(at::sub(x[0], x[1]), 2); };
  EXPECT_TRUE(checkPairwise("v1: sub($0, $1); mul(%0, 2)", ops, f));
  EXPECT_TRUE(
      checkReduce("v1: sub($0, $1); mul(%0, 2)", ops, f, {"sum", std::vector<int64_t>{0}, false, std::nullopt}));
  // The error comes from a later instruction, after a valid broadcast.
  T three = {g.tensor({3, 1}, at::kFloat), g.tensor({1, 4}, at::kFloat), g.tensor({2, 4}, at::kFloat)};
  EagerFn h = [](const T& x) { return at::add(at::sub(x[0], x[1]), x[2]); };
  EXPECT_TRUE(checkPairwise("v1: sub($0, $1); add(%0, $2)", three, h));
  EXPECT_TRUE(checkReduce("v1: sub($0, $1); add(%0, $2)", three, h, {"amax", std::nullopt, false, std::nullopt}));
  // With autograd.
  T grad = {ops[0].clone().requires_grad_(true), ops[1]};
  EXPECT_TRUE(checkPairwise("v1: sub($0, $1); mul(%0, 2)", grad, f));
  EXPECT_NE(errorOf([&] { tsfuse::pairwise(grad, "v1: sub($0, $1); mul(%0, 2)"); }).find("must match"),
            std::string::npos);
}

TEST(OpErrors, BoolSubtractionAndNegationRaiseEagersMessage) {
  Gen g(301);
  T ops = {g.tensor({3, 1}, at::kBool), g.tensor({1, 4}, at::kBool)};
  EXPECT_TRUE(checkPairwise("v1: sub($0, $1)", ops, [](const T& x) { return at::sub(x[0], x[1]); }));
  EXPECT_TRUE(checkPairwise("v1: logical_not($0); sub(%0, $1)", ops,
                            [](const T& x) { return at::sub(at::logical_not(x[0]), x[1]); }));
  EXPECT_TRUE(checkPairwise("v1: sub($0, True)", {ops[0]}, [](const T& x) { return at::sub(x[0], true); }));
  EXPECT_TRUE(checkPairwise("v1: neg($0); add(%0, $1)", ops, [](const T& x) { return at::add(at::neg(x[0]), x[1]); }));
  EXPECT_TRUE(checkReduce("v1: sub($0, $1)", ops, [](const T& x) { return at::sub(x[0], x[1]); },
                          {"sum", std::nullopt, false, std::nullopt}));
  std::string err = errorOf([&] { tsfuse::pairwise(ops, "v1: sub($0, $1)"); });
  EXPECT_NE(err.find("bool"), std::string::npos) << err;
}

// Errors that eager's kernels (not its shape checks) raise.
TEST(OpErrors, KernelLevelErrorsRaiseEagersMessage) {
  Gen g(302);
  // A Python int out of uint8's range as a clamp bound: "value cannot be converted ... without overflow".
  T u = {g.tensor({3, 1}, at::kByte), g.tensor({1, 4}, at::kByte)};
  EXPECT_TRUE(checkPairwise("v1: add($0, $1); clamp(%0, 300, None)", u,
                            [](const T& x) { return at::clamp(at::add(x[0], x[1]), 300, std::nullopt); }));
  EXPECT_TRUE(checkPairwise("v1: add($0, $1); clamp(%0, None, -1)", u,
                            [](const T& x) { return at::clamp(at::add(x[0], x[1]), std::nullopt, -1); }));
  // A float alpha with integer tensors.
  T i = {g.tensor({3, 1}, at::kInt), g.tensor({1, 4}, at::kInt)};
  EXPECT_TRUE(checkPairwise("v1: add_alpha($0, $1, 0.5)", i, [](const T& x) { return at::add(x[0], x[1], 0.5); }));
  // Integer floor division by zero.
  T z = {at::tensor({1, 2, 3}, at::kLong).view({3, 1}), at::tensor({1, 0}, at::kLong).view({1, 2})};
  EXPECT_TRUE(checkPairwise("v1: div_floor($0, $1); add(%0, 1)", z,
                            [](const T& x) { return at::add(at::div(x[0], x[1], "floor"), 1); }));
  // An op without a kernel for the dtype raises even when the output is empty.
  T emptyBool = {at::zeros({0, 1}, at::kBool), at::ones({1, 5}, at::kBool)};
  EXPECT_TRUE(
      checkPairwise("v1: div_floor($0, $1)", emptyBool, [](const T& x) { return at::div(x[0], x[1], "floor"); }));
  EXPECT_TRUE(checkPairwise("v1: div_floor($0, $1)", {emptyBool[1], emptyBool[1]},
                            [](const T& x) { return at::div(x[0], x[1], "floor"); }));
}

// --- autograd --------------------------------------------------------------------------------

// Runs f on fresh leaf copies of `inputs` (those flagged in `grad` require grad), backpropagates
// a fixed random cotangent and returns the output and the gradients.
std::pair<at::Tensor, T> gradsOf(const std::function<at::Tensor(const T&)>& f, const T& inputs,
                                 const std::vector<bool>& grad, uint64_t seed) {
  T leaves;
  for (size_t k = 0; k < inputs.size(); ++k) leaves.push_back(inputs[k].detach().clone().requires_grad_(grad[k]));
  at::Tensor out = f(leaves);
  Gen g(seed);
  at::Tensor w = g.tensor(out.sizes(), out.scalar_type());
  (out * w).sum().backward();
  T grads;
  for (const auto& l : leaves) grads.push_back(l.grad());
  return {out.detach(), grads};
}

void expectSameGrads(const std::string& expr, const EagerFn& eager, const T& in, const std::vector<bool>& grad,
                     const std::optional<ReduceArgs>& red = std::nullopt) {
  SCOPED_TRACE(expr + (red ? " |> " + describeReduce(*red) : ""));
  auto eagerF = [&](const T& x) {
    at::Tensor v = eager(x);
    return red ? eagerReduce(v, red->reduction, red->dim, red->keepdim, red->dtype) : v;
  };
  auto fusedF = [&](const T& x) {
    at::Tensor r =
        red ? tsfuse::reduce(x, expr, red->reduction, red->dim, red->keepdim, red->dtype) : tsfuse::pairwise(x, expr);
    EXPECT_TRUE(r.requires_grad());
    EXPECT_TRUE(r.grad_fn() != nullptr);
    return r;
  };
  auto [ev, eg] = gradsOf(eagerF, in, grad, 7);
  auto [fv, fg] = gradsOf(fusedF, in, grad, 7);
  EXPECT_TRUE(sameTensor(ev, fv, false, 1e-6, 1e-8));
  for (size_t k = 0; k < in.size(); ++k) {
    EXPECT_EQ(eg[k].defined(), fg[k].defined()) << "operand " << k;
    if (eg[k].defined() && fg[k].defined())
      EXPECT_TRUE(sameTensor(eg[k], fg[k], false, 1e-6, 1e-8)) << "grad of $" << k;
  }
}

TEST(OpAutograd, PairwiseGradientsEqualEagers) {
  Gen g(310);
  for (at::ScalarType dt : {at::kDouble, at::kFloat}) {
    T in = {g.tensor({4, 1}, dt), g.tensor({1, 5}, dt)};
    expectSameGrads("v1: sub($0, $1); mul(%0, %0); sigmoid(%1)",
                    [](const T& x) { return at::sigmoid(at::mul(at::sub(x[0], x[1]), at::sub(x[0], x[1]))); }, in,
                    {true, true});
    expectSameGrads("v1: minimum($0, $1); maximum($0, $1); sub(%0, %1); clamp(%2, 0, None)",
                    [](const T& x) {
                      return at::clamp(at::sub(at::minimum(x[0], x[1]), at::maximum(x[0], x[1])), 0, std::nullopt);
                    },
                    in, {true, false});
    expectSameGrads("v1: gt($0, $1); mul($0, 2.5); exp($1); where(%0, %1, %2)",
                    [](const T& x) { return at::where(at::gt(x[0], x[1]), at::mul(x[0], 2.5), at::exp(x[1])); }, in,
                    {false, true});
    expectSameGrads("v1: div($0, $1); pow(%0, 2); add_alpha(%1, $0, 0.5)",
                    [](const T& x) { return at::add(at::pow(at::div(x[0], x[1]), 2), x[0], 0.5); }, in, {true, true});
  }
}

// A derivative's arithmetic on numbers (pow's `exponent - 1`) is ATen's Scalar arithmetic, in
// double: the gradient of pow(x, 1.7) has eager's bits in float64 and float32 alike (an exponent
// rounded to float32 first, 0.70000005, is 3e-8 off).
TEST(OpAutograd, ANumberExponentsGradientHasEagersBits) {
  Gen g(314);
  for (at::ScalarType dt : {at::kDouble, at::kFloat}) {
    const at::Tensor x0 = g.tensor({64}, dt).abs().add(0.1);
    const at::Tensor w = g.tensor({64}, dt);
    auto gradient = [&](bool fused) {
      at::Tensor x = x0.clone().requires_grad_(true);
      at::Tensor v = fused ? tsfuse::pairwise({x}, "v1: pow($0, 1.7)") : at::pow(x, 1.7);
      return torch::autograd::grad({v}, {x}, {w})[0];
    };
    EXPECT_TRUE(at::equal(gradient(false), gradient(true))) << dt;
  }
}

// pow(x, e)'s gradients where x or e is 0, for infinite and NaN incoming gradients: eager masks the
// base's after the gradient's product (0 where e == 0) and the exponent's before it (NaN there).
TEST(OpAutograd, PowGradientsOfNonFiniteIncomingGradientsAreEagers) {
  const double inf = std::numeric_limits<double>::infinity();
  const at::Tensor x0 = at::tensor({0.0, 0.0, 2.0, 0.0, 3.0}), e0 = at::tensor({2.0, 0.0, 0.0, -1.0, 1.5});
  const at::Tensor w = at::tensor({inf, inf, inf, std::nan(""), -inf});
  auto gradients = [&](bool fused) {
    at::Tensor x = x0.clone().requires_grad_(true), e = e0.clone().requires_grad_(true);
    at::Tensor v = fused ? tsfuse::pairwise({x, e}, "v1: pow($0, $1)") : at::pow(x, e);
    return torch::autograd::grad({v}, {x, e}, {w});
  };
  const auto want = gradients(false), got = gradients(true);
  for (size_t k = 0; k < 2; ++k) EXPECT_TRUE(sameTensor(want[k], got[k], true)) << "gradient " << k;
}

// A double backward (create_graph) runs ATen's autograd through the region's reference, so the
// gradient is differentiable again: the second derivative equals eager's.
TEST(OpAutograd, PairwiseSecondDerivativeEqualsEagers) {
  Gen g(313);
  at::Tensor x0 = g.tensor({4, 1}, at::kDouble), y = g.tensor({1, 5}, at::kDouble);
  auto second = [&](bool fused) {
    at::Tensor x = x0.clone().requires_grad_(true);
    at::Tensor v = fused ? tsfuse::pairwise({x, y}, "v1: sub($0, $1); mul(%0, %0); neg(%1); exp(%2)")
                         : at::exp(at::neg(at::mul(at::sub(x, y), at::sub(x, y))));
    at::Tensor gx = torch::autograd::grad({v.sum()}, {x}, {}, true, /*create_graph=*/true)[0];
    return torch::autograd::grad({gx.sum()}, {x})[0];
  };
  EXPECT_TRUE(sameTensor(second(false), second(true), false, 1e-12, 1e-12));
}

// A sum and a mean train fused: forward and backward take the native path, and the gradients are
// eager's (the backward's sums over broadcast dims in another order: within 1e-12 in float64).
TEST(OpAutograd, SumAndMeanTrainFused) {
  Gen g(314);
  for (const char* reduction : {"sum", "mean"}) {
    SCOPED_TRACE(reduction);
    at::Tensor x = g.tensor({6, 1, 3}, at::kDouble).requires_grad_(true), y = g.tensor({5, 3}, at::kDouble);
    at::Tensor w = y.clone().requires_grad_(true);
    at::Tensor out = tsfuse::reduce({x, w}, "v1: sub($0, $1); mul(%0, %0); exp(%1)", reduction,
                                    std::vector<int64_t>{-1}, false, std::nullopt);
    EXPECT_STREQ(tsfuse::lastPath(), "native");
    out.backward(at::linspace(-1, 1, 30, at::kDouble).view({6, 5}));
    EXPECT_STREQ(tsfuse::lastPath(), "native");
    at::Tensor x2 = x.detach().clone().requires_grad_(true), w2 = y.clone().requires_grad_(true);
    at::Tensor v = at::exp(at::mul(at::sub(x2, w2), at::sub(x2, w2)));
    at::Tensor ref = std::string(reduction) == "sum" ? v.sum({-1}) : v.mean({-1});
    ref.backward(at::linspace(-1, 1, 30, at::kDouble).view({6, 5}));
    EXPECT_TRUE(sameTensor(x.grad(), x2.grad(), false, 1e-12, 1e-12));
    EXPECT_TRUE(sameTensor(w.grad(), w2.grad(), false, 1e-12, 1e-12));
  }
}

TEST(OpAutograd, ReduceGradientsEqualEagers) {
  Gen g(311);
  T in = {g.tensor({4, 1, 3}, at::kDouble), g.tensor({5, 3}, at::kDouble)};
  EagerFn sq = [](const T& x) { return at::mul(at::sub(x[0], x[1]), at::sub(x[0], x[1])); };
  for (const ReduceArgs& a : {ReduceArgs{"sum", std::vector<int64_t>{0}, false, std::nullopt},
                              ReduceArgs{"sum", std::nullopt, false, at::kFloat},
                              ReduceArgs{"mean", std::vector<int64_t>{-1, 1}, true, std::nullopt},
                              ReduceArgs{"prod", std::vector<int64_t>{2}, false, std::nullopt},
                              ReduceArgs{"amax", std::vector<int64_t>{1}, true, std::nullopt},
                              ReduceArgs{"amin", std::nullopt, false, std::nullopt},
                              ReduceArgs{"amin:index", std::vector<int64_t>{-1}, false, std::nullopt},
                              ReduceArgs{"logsumexp", std::vector<int64_t>{1, 2}, false, std::nullopt}})
    expectSameGrads("v1: sub($0, $1); mul(%0, %0)", sq, in, {true, true}, a);
  // Ties: amax shares the gradient among them, max(dim)'s values give it to the index max returns
  // (the first), as in eager; NaN propagates as eager's.
  T ties = {at::tensor({1.0, 2.0, 2.0}, at::kDouble).view({3, 1}),
            at::tensor({0.0, 0.0, NAN}, at::kDouble).view({1, 3})};
  for (const char* r : {"amax", "amax:index", "amin", "amin:index"})
    expectSameGrads(
        "v1: add($0, $1)", [](const T& x) { return at::add(x[0], x[1]); }, ties, {true, true},
        ReduceArgs{r, std::vector<int64_t>{0}, false, std::nullopt});
}

// amax, amin, max/min(dim)'s values and logsumexp train fused: the backward runs native tiles.
TEST(OpAutograd, ExtremaAndLogsumexpTrainFused) {
  Gen g(315);
  for (const char* reduction : {"amax", "amin:index", "logsumexp"}) {
    SCOPED_TRACE(reduction);
    at::Tensor x = g.tensor({6, 1, 3}, at::kFloat).requires_grad_(true), y = g.tensor({5, 3}, at::kFloat);
    at::Tensor out =
        tsfuse::reduce({x, y}, "v1: sub($0, $1); abs(%0)", reduction, std::vector<int64_t>{1}, false, std::nullopt);
    auto native = [] {
      const tsfuse::PathCounts c = tsfuse::pathCounts();
      return c.compiledTiles + c.compiledPieces + c.interpretedTiles;
    };
    const int64_t before = native();
    out.backward(at::ones_like(out));
    EXPECT_GT(native(), before);
  }
}

TEST(OpAutograd, NoGradModeRunsTheFusedKernel) {
  Gen g(312);
  at::Tensor a = g.tensor({4, 1}, at::kFloat).requires_grad_(true), b = g.tensor({1, 5}, at::kFloat);
  {
    c10::NoGradGuard guard;
    at::Tensor out = tsfuse::pairwise({a, b}, "v1: sub($0, $1); mul(%0, 2)");
    EXPECT_STREQ(tsfuse::lastPath(), "native");
    EXPECT_FALSE(out.requires_grad());
    EXPECT_TRUE(sameTensor(at::mul(at::sub(a, b), 2), out, true));
  }
  at::Tensor out = tsfuse::pairwise({a, b}, "v1: sub($0, $1); mul(%0, 2)");
  EXPECT_STREQ(tsfuse::lastPath(), "native");  // fused, with a fused backward (fused_grad.h)
  EXPECT_TRUE(out.requires_grad());
  out.sum().backward();
  EXPECT_STREQ(tsfuse::lastPath(), "native");  // a's gradient: its program summed over dim 1
  EXPECT_TRUE(sameTensor(a.grad(), at::full({4, 1}, 10.0, at::kFloat), true));
  at::Tensor plain = tsfuse::pairwise({a.detach(), b}, "v1: sub($0, $1); mul(%0, 2)");
  EXPECT_FALSE(plain.requires_grad());
}

}  // namespace

}  // namespace ops_errors_autograd_test
