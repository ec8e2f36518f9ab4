// PyTorch type promotion through tsfuse::pairwise (mixed dtypes, Python int / float / bool
// literals, 0-dim tensor operands of a wider dtype, to(dtype)), and which implementation ran
// (tsfuse::lastPath()): "native" for the natively supported dtypes, "chunked" for float16 and
// bfloat16 (small and large), "empty" for empty outputs.
#include "test_util.h"

#include <map>

namespace ops_promotion_path_test {

namespace {

using namespace tsfuse_test;
using T = std::vector<at::Tensor>;

TEST(PairwisePromotion, MixedDtypePairs) {
  Gen g(20);
  FailureLog log;
  const std::vector<std::pair<std::string, EagerFn>> exprs = {
      {"v1: add($0, $1); mul(%0, $1)", [](const T& x) { return at::mul(at::add(x[0], x[1]), x[1]); }},
      {"v1: lt($0, $1)", [](const T& x) { return at::lt(x[0], x[1]); }},
      {"v1: maximum($0, $1)", [](const T& x) { return at::maximum(x[0], x[1]); }},
      {"v1: div($0, $1)", [](const T& x) { return at::div(x[0], x[1]); }},
  };
  for (at::ScalarType a : allDtypes())
    for (at::ScalarType b : allDtypes())
      for (const auto& [expr, f] : exprs) {
        T ops = {g.tensor({3, 1}, a), g.layout(g.tensor({1, 4}, b), g.randint(0, 3))};
        log.add(checkPairwise(expr, ops, f));
      }
  EXPECT_TRUE(log.result());
}

TEST(PairwisePromotion, PythonNumberLiterals) {
  Gen g(21);
  FailureLog log;
  const std::vector<std::pair<std::string, EagerFn>> exprs = {
      {"v1: add($0, 1)", [](const T& x) { return at::add(x[0], 1); }},
      {"v1: add($0, 1.0)", [](const T& x) { return at::add(x[0], 1.0); }},
      {"v1: mul($0, 1.5); sub(%0, $1)", [](const T& x) { return at::sub(at::mul(x[0], 1.5), x[1]); }},
      {"v1: lt($0, 1)", [](const T& x) { return at::lt(x[0], 1); }},
      {"v1: lt($0, 1.5)", [](const T& x) { return at::lt(x[0], 1.5); }},
      {"v1: eq($0, True)", [](const T& x) { return at::eq(x[0], true); }},
      {"v1: mul($0, True); add(%0, $1)", [](const T& x) { return at::add(at::mul(x[0], true), x[1]); }},
      {"v1: div($0, 2)", [](const T& x) { return at::div(x[0], 2); }},
      {"v1: sub($0, -2); mul(%0, $1)", [](const T& x) { return at::mul(at::sub(x[0], -2), x[1]); }},
      {"v1: pow($0, 2); add(%0, $1)", [](const T& x) { return at::add(at::pow(x[0], 2), x[1]); }},
      {"v1: maximum($0, $1); clamp(%0, 0, 1.5)", [](const T& x) { return at::clamp(at::maximum(x[0], x[1]), 0, 1.5); }},
      {"v1: where($0, 1, 1.5)", [](const T& x) { return at::where(x[0].to(at::kBool), 1, 1.5); }},
  };
  for (at::ScalarType dt : allDtypes())
    for (const auto& [expr, f] : exprs) {
      T ops = {g.tensor({4, 1}, dt), g.tensor({1, 5}, dt)};
      if (expr.find("where") != std::string::npos)
        ops = {ops[0].to(at::kBool)};
      else if (tsfuse::Expr::parse(expr).numInputs == 1)
        ops.resize(1);
      log.add(checkPairwise(expr, ops, f), std::string(c10::toString(dt)) + ": ");
    }
  EXPECT_TRUE(log.result());
}

// A 0-dim tensor does not widen a dimensioned operand of the same category (float32 + float64
// 0-dim -> float32) but does lift the category (int32 + float64 0-dim -> float64).
TEST(PairwisePromotion, ZeroDimTensorOperandsOfAWiderDtype) {
  Gen g(22);
  FailureLog log;
  const std::vector<std::pair<at::ScalarType, at::ScalarType>> pairs = {
      {at::kFloat, at::kDouble}, {at::kInt, at::kLong},    {at::kByte, at::kLong},  {at::kInt, at::kDouble},
      {at::kBool, at::kLong},    {at::kHalf, at::kDouble}, {at::kByte, at::kFloat}, {at::kBFloat16, at::kFloat},
      {at::kBool, at::kDouble},  {at::kLong, at::kHalf}};
  EagerFn f = [](const T& x) { return at::add(at::mul(x[0], x[1]), x[2]); };
  for (const auto& [wide, zero] : pairs) {
    T ops = {g.tensor({3, 1}, wide), g.tensor({}, zero), g.tensor({1, 4}, wide)};
    log.add(checkPairwise("v1: mul($0, $1); add(%0, $2)", ops, f));
    T rev = {ops[1], ops[0], ops[2]};
    log.add(checkPairwise("v1: mul($0, $1); add(%0, $2)", rev, f));
    T allZero = {g.tensor({}, wide), g.tensor({}, zero), g.tensor({}, wide)};
    log.add(checkPairwise("v1: mul($0, $1); add(%0, $2)", allZero, f));
  }
  EXPECT_TRUE(log.result());
}

TEST(PairwisePromotion, ToDtype) {
  Gen g(23);
  at::Tensor x = g.tensor({4, 1}, at::kFloat), y = g.tensor({1, 5}, at::kFloat);
  EXPECT_TRUE(checkPairwise("v1: mul($0, 3); to(%0, int32); add(%1, $1)", {x, y},
                            [](const T& v) { return at::add(at::mul(v[0], 3).to(at::kInt), v[1]); }));
  EXPECT_TRUE(checkPairwise("v1: to($0, bool); logical_and(%0, $1)", {x, y},
                            [](const T& v) { return at::logical_and(v[0].to(at::kBool), v[1]); }));
  EXPECT_TRUE(checkPairwise("v1: to($0, float16); mul(%0, $1)", {x, y.to(at::kHalf)},
                            [](const T& v) { return at::mul(v[0].to(at::kHalf), v[1]); }));
  EXPECT_TRUE(checkPairwise("v1: to($0, uint8); sub(%0, $1)", {x.abs().mul(40), y.abs().mul(40).to(at::kByte)},
                            [](const T& v) { return at::sub(v[0].to(at::kByte), v[1]); }));
  EXPECT_TRUE(checkPairwise("v1: to($0, float64); div(%0, $1)", {x, y},
                            [](const T& v) { return at::div(v[0].to(at::kDouble), v[1]); }));
}

// to_device (a traced x.to(device, dtype)): the cast where the operands are on that device, run
// natively; on another device the eager path moves the value as eager does, and raises eager's
// error where eager does (CUDA absent here, or mixing devices after the move where present).
TEST(PairwisePromotion, ToDeviceIsTheCastOnItsDeviceAndEagersMoveElsewhere) {
  Gen g(24);
  at::Tensor x = g.tensor({4, 1}, at::kFloat), y = g.tensor({1, 5}, at::kFloat);
  EXPECT_TRUE(checkPairwise("v1: lt($0, $1); to_device(%0, cpu, float32); mul(%1, $0)", {x, y},
                            [](const T& v) { return at::mul(at::lt(v[0], v[1]).to(c10::kCPU, at::kFloat), v[0]); }));
  EXPECT_STREQ(tsfuse::lastPath(), "native");
  const std::string moved = "v1: lt($0, $1); to_device(%0, cuda:0, float32); mul(%1, $0)";
  const std::string eager = errorOf([&] { tsfuse::evalAten(tsfuse::Expr::parse(moved), {x, y}); }, true);
  const std::string fused = errorOf([&] { pairwiseBoxed({x, y}, moved); }, true);
  EXPECT_FALSE(eager.empty());
  EXPECT_EQ(eager, fused);
  EXPECT_STREQ(tsfuse::lastPath(), "eager");
}

// to_other (passes/prototype_casts.cpp): the cast to a 0-dim prototype's dtype, run natively; a
// prototype of another rank (a caller's own) takes the eager path, which casts without broadcasting.
TEST(PairwisePromotion, ToOtherCastsToItsPrototypesTypeAndBroadcastsWithNothing) {
  Gen g(25);
  at::Tensor x = g.tensor({4, 1}, at::kFloat), y = g.tensor({1, 5}, at::kFloat);
  for (at::ScalarType t : {at::kDouble, at::kInt, at::kBool, at::kHalf}) {
    at::Tensor p = at::empty({}, at::TensorOptions().dtype(t));
    EXPECT_TRUE(checkPairwise("v1: sub($0, $1); to_other(%0, $2); mul(%1, %1)", {x, y, p}, [](const T& v) {
      const at::Tensor c = at::sub(v[0], v[1]).to(v[2]);
      return at::mul(c, c);
    })) << t;
  }
  at::Tensor wide = at::zeros({3, 1, 1}, at::kDouble);
  const at::Tensor got = pairwiseBoxed({x, y, wide}, "v1: sub($0, $1); to_other(%0, $2)");
  EXPECT_STREQ(tsfuse::lastPath(), "eager");
  EXPECT_TRUE(sameTensor(at::sub(x, y).to(wide), got, true));
}

// --- paths -----------------------------------------------------------------------------------

const std::vector<std::pair<std::string, EagerFn>>& singleOps() {
  static const std::vector<std::pair<std::string, EagerFn>> ops = {
      {"v1: add($0, $1)", [](const T& x) { return at::add(x[0], x[1]); }},
      {"v1: sub($0, $1)", [](const T& x) { return at::sub(x[0], x[1]); }},
      {"v1: mul($0, $1)", [](const T& x) { return at::mul(x[0], x[1]); }},
      {"v1: div($0, $1)", [](const T& x) { return at::div(x[0], x[1]); }},
      {"v1: minimum($0, $1)", [](const T& x) { return at::minimum(x[0], x[1]); }},
      {"v1: maximum($0, $1)", [](const T& x) { return at::maximum(x[0], x[1]); }},
      {"v1: lt($0, $1)", [](const T& x) { return at::lt(x[0], x[1]); }},
      {"v1: eq($0, 1)", [](const T& x) { return at::eq(x[0], 1); }},
      {"v1: logical_and($0, $1)", [](const T& x) { return at::logical_and(x[0], x[1]); }},
      {"v1: logical_or($0, $1)", [](const T& x) { return at::logical_or(x[0], x[1]); }},
      {"v1: logical_xor($0, $1)", [](const T& x) { return at::logical_xor(x[0], x[1]); }},
      {"v1: logical_not($0); logical_and(%0, $1)",
       [](const T& x) { return at::logical_and(at::logical_not(x[0]), x[1]); }},
      {"v1: neg($0); add(%0, $1)", [](const T& x) { return at::add(at::neg(x[0]), x[1]); }},
      {"v1: abs($0); add(%0, $1)", [](const T& x) { return at::add(at::abs(x[0]), x[1]); }},
      {"v1: relu($0); add(%0, $1)", [](const T& x) { return at::add(at::relu(x[0]), x[1]); }},
      {"v1: sqrt($0); add(%0, $1)", [](const T& x) { return at::add(at::sqrt(x[0]), x[1]); }},
      {"v1: exp($0); add(%0, $1)", [](const T& x) { return at::add(at::exp(x[0]), x[1]); }},
      {"v1: log($0); add(%0, $1)", [](const T& x) { return at::add(at::log(x[0]), x[1]); }},
      {"v1: sigmoid($0); add(%0, $1)", [](const T& x) { return at::add(at::sigmoid(x[0]), x[1]); }},
      {"v1: pow($0, 2); add(%0, $1)", [](const T& x) { return at::add(at::pow(x[0], 2), x[1]); }},
      {"v1: clamp($0, 0, 1); add(%0, $1)", [](const T& x) { return at::add(at::clamp(x[0], 0, 1), x[1]); }},
      {"v1: gt($0, $1); where(%0, $0, $1)", [](const T& x) { return at::where(at::gt(x[0], x[1]), x[0], x[1]); }},
      {"v1: to($0, float64); add(%0, $1)", [](const T& x) { return at::add(x[0].to(at::kDouble), x[1]); }},
      {"v1: div_floor($0, 2); add(%0, $1)", [](const T& x) { return at::add(at::div(x[0], 2, "floor"), x[1]); }},
  };
  return ops;
}

// Every op, in every natively supported dtype (where eager accepts it), runs on the native
// path. Failures are grouped by expression, listing the dtypes and the path taken.
TEST(PairwisePath, NativeForEveryOpOnNativeDtypes) {
  Gen g(24);
  std::map<std::string, std::string> wrong;
  int checked = 0;
  for (const auto& [expr, f] : singleOps())
    for (at::ScalarType dt : {at::kFloat, at::kDouble, at::kInt, at::kLong, at::kByte, at::kBool}) {
      T ops = {g.tensor({4, 1}, dt), g.tensor({1, 5}, dt)};
      if (tsfuse::Expr::parse(expr).numInputs == 1) ops.resize(1);
      CheckOpts o;
      o.path = "native";
      Outcome want = runSide([&] { return f(ops); }, false);
      if (!want.error.empty()) continue;  // eager rejects this dtype; errors are tested elsewhere
      Outcome got = runSide([&] { return tsfuse::pairwise(ops, expr); }, true);
      ++checked;
      EXPECT_TRUE(compareOutcomes(want, got, {})) << expr << " " << dt;  // values, whatever the path
      if (got.path != "native") wrong[expr] += std::string(" ") + c10::toString(dt) + "->" + got.path;
    }
  std::ostringstream os;
  for (const auto& [e, d] : wrong) os << "\n  " << e << ":" << d;
  EXPECT_TRUE(wrong.empty()) << wrong.size() << " expressions not on the native path:" << os.str();
  EXPECT_GT(checked, 100);
}

TEST(PairwisePath, ChunkedForHalfAndBFloat16SmallInputs) {
  Gen g(25);
  for (at::ScalarType dt : {at::kHalf, at::kBFloat16}) {
    T ops = {g.tensor({4, 1}, dt), g.tensor({1, 5}, dt)};
    EXPECT_TRUE(checkPairwise("v1: sub($0, $1); mul(%0, $0); lt(%1, 1)", ops,
                              [](const T& x) { return at::lt(at::mul(at::sub(x[0], x[1]), x[0]), 1); },
                              {true, 0, 0, "chunked"}));
    // A float32 expression with one float16 operand cannot run natively either.
    T mixed = {g.tensor({4, 1}, at::kFloat), g.tensor({1, 5}, dt)};
    EXPECT_TRUE(checkPairwise("v1: add($0, $1); mul(%0, 2)", mixed,
                              [](const T& x) { return at::mul(at::add(x[0], x[1]), 2); }, {true, 0, 0, "chunked"}));
  }
}

// Large enough (> 2^18 output elements) to be evaluated slab by slab.
TEST(PairwisePath, ChunkedForHalfAndBFloat16LargeInputs) {
  Gen g(26);
  for (at::ScalarType dt : {at::kHalf, at::kBFloat16}) {
    T ops = {g.tensor({700, 1}, dt), g.layout(g.tensor({1, 600}, dt), 2)};
    EXPECT_TRUE(checkPairwise("v1: sub($0, $1); mul(%0, $0); sigmoid(%1)", ops,
                              [](const T& x) { return at::sigmoid(at::mul(at::sub(x[0], x[1]), x[0])); },
                              {true, 0, 0, "chunked"}));
    T ops3 = {g.tensor({3, 300, 1}, dt), g.tensor({1, 1, 400}, dt)};
    EXPECT_TRUE(checkPairwise("v1: maximum($0, $1); add(%0, 1)", ops3,
                              [](const T& x) { return at::add(at::maximum(x[0], x[1]), 1); }, {true, 0, 0, "chunked"}));
  }
}

TEST(PairwisePath, EmptyOutputs) {
  Gen g(27);
  for (at::ScalarType dt : {at::kFloat, at::kInt, at::kHalf}) {
    for (const T& ops :
         {T{g.tensor({0, 1}, dt), g.tensor({1, 5}, dt)}, T{g.tensor({3, 1, 0}, dt), g.tensor({4, 1}, dt)}}) {
      EXPECT_TRUE(checkPairwise("v1: sub($0, $1); mul(%0, 2)", ops,
                                [](const T& x) { return at::mul(at::sub(x[0], x[1]), 2); }, {true, 0, 0, "empty"}));
    }
  }
}

}  // namespace

}  // namespace ops_promotion_path_test
