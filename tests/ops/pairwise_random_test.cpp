// Randomized (seeded) numerics of tsfuse::pairwise against eager: a table of expressions, each
// with its eager reference written with ATen ops, over every dtype, broadcasting shape pattern
// ([N,1] x [1,M], [N,1,K] x [M,K], 0-dim, size-0, size-1, tile-crossing sizes) and operand layout
// (contiguous, transposed, step-sliced, expanded). Where eager raises, tsfuse must raise the same
// message; otherwise dtype, sizes, strides and values must match, and the path must be "native"
// for float32/float64/integer/bool, "chunked" for float16/bfloat16, "empty" for empty outputs.
#include "test_util.h"

namespace ops_pairwise_random_test {

namespace {

using namespace tsfuse_test;
using T = std::vector<at::Tensor>;

struct Case {
  std::string expr;
  EagerFn eager;
  bool loose = false;  // transcendental ops: allclose instead of bit-identical (see special tests)
};

std::optional<at::Tensor> opt(const at::Tensor& t) { return t; }

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"v1: add($0, $1)", [](const T& x) { return at::add(x[0], x[1]); }},
      {"v1: sub($0, $1); abs(%0); lt(%1, 1)", [](const T& x) { return at::lt(at::abs(at::sub(x[0], x[1])), 1); }},
      {"v1: mul($0, $1); add_alpha(%0, $0, 2)", [](const T& x) { return at::add(at::mul(x[0], x[1]), x[0], 2); }},
      {"v1: minimum($0, $1); maximum(%0, $0)", [](const T& x) { return at::maximum(at::minimum(x[0], x[1]), x[0]); }},
      {"v1: clamp($0, -1, 2); sub(%0, $1)", [](const T& x) { return at::sub(at::clamp(x[0], -1, 2), x[1]); }},
      {"v1: clamp($0, $1, None); mul(%0, 3)",
       [](const T& x) { return at::mul(at::clamp(x[0], opt(x[1]), std::nullopt), 3); }},
      {"v1: clamp($0, None, $1); mul(%0, 0.5)",
       [](const T& x) { return at::mul(at::clamp(x[0], std::nullopt, opt(x[1])), 0.5); }},
      {"v1: gt($0, $1); where(%0, $0, $1)", [](const T& x) { return at::where(at::gt(x[0], x[1]), x[0], x[1]); }},
      {"v1: eq($0, $1); logical_not(%0); logical_or(%1, $0)",
       [](const T& x) { return at::logical_or(at::logical_not(at::eq(x[0], x[1])), x[0]); }},
      {"v1: div($0, $1)", [](const T& x) { return at::div(x[0], x[1]); }},
      {"v1: div_floor($0, $1)", [](const T& x) { return at::div(x[0], x[1], "floor"); }},
      {"v1: div_trunc($0, $1); mul(%0, $1)", [](const T& x) { return at::mul(at::div(x[0], x[1], "trunc"), x[1]); }},
      {"v1: neg($0); relu(%0); add(%1, $1)", [](const T& x) { return at::add(at::relu(at::neg(x[0])), x[1]); }},
      {"v1: sqrt($0); mul(%0, $1)", [](const T& x) { return at::mul(at::sqrt(x[0]), x[1]); }, true},
      {"v1: exp($0); add(%0, $1)", [](const T& x) { return at::add(at::exp(x[0]), x[1]); }, true},
      {"v1: log($0); sub(%0, $1)", [](const T& x) { return at::sub(at::log(x[0]), x[1]); }, true},
      {"v1: sigmoid($0); mul(%0, $1)", [](const T& x) { return at::mul(at::sigmoid(x[0]), x[1]); }, true},
      {"v1: pow($0, 2); sub(%0, $1)", [](const T& x) { return at::sub(at::pow(x[0], 2), x[1]); }, true},
      {"v1: pow($0, $1)", [](const T& x) { return at::pow(x[0], x[1]); }, true},
      {"v1: sub_alpha($0, $1, 2); mul(%0, $1)", [](const T& x) { return at::mul(at::sub(x[0], x[1], 2), x[1]); }},
      {"v1: logical_xor($0, $1); logical_and(%0, $0)",
       [](const T& x) { return at::logical_and(at::logical_xor(x[0], x[1]), x[0]); }},
      {"v1: ge($0, $1); le($0, $1); logical_and(%0, %1); ne(%2, True)",
       [](const T& x) { return at::ne(at::logical_and(at::ge(x[0], x[1]), at::le(x[0], x[1])), true); }},
      {"v1: to($0, float64); div(%0, $1)", [](const T& x) { return at::div(x[0].to(at::kDouble), x[1]); }},
      {"v1: abs($0); neg(%0); maximum(%1, $1)", [](const T& x) { return at::maximum(at::neg(at::abs(x[0])), x[1]); }},
      {"v1: mul($0, 2.5); add(%0, 1); sub(%1, $1)",
       [](const T& x) { return at::sub(at::add(at::mul(x[0], 2.5), 1), x[1]); }},
      {"v1: sub(1, $0); mul(%0, $1)", [](const T& x) { return at::mul(at::rsub(x[0], 1), x[1]); }},
      {"v1: where($0, 3, $1)", [](const T& x) { return at::where(x[0], 3, x[1]); }},
  };
  return c;
}

// Two broadcast-compatible shapes of pattern p.
std::pair<std::vector<int64_t>, std::vector<int64_t>> shapes(Gen& g, int p) {
  const int64_t N = g.randint(1, 6), M = g.randint(1, 6), K = g.randint(1, 4);
  switch (p % 10) {
    case 0:
      return {{N, 1}, {1, M}};
    case 1:
      return {{N, 1, K}, {M, K}};
    case 2:
      return {{}, {N, M}};
    case 3:
      return {{N, 1, M}, {}};
    case 4:
      return {{0, 1}, {1, M}};
    case 5:
      return {{N, 0, K}, {1, K}};
    case 6:
      return {{1, 1}, {1}};
    case 7:
      return {{N, M}, {M}};
    case 8:
      return {{37, 1}, {1, 29}};  // > one 512-element tile, odd tails
    default:
      return {{3, 1, 40}, {17, 40}};
  }
}

const char* expectedPath(at::ScalarType t, const at::Tensor& out) {
  if (out.numel() == 0) return "empty";
  return (t == at::kHalf || t == at::kBFloat16) ? "chunked" : "native";
}

void runRandom(uint64_t seed, int rounds) {
  Gen g(seed);
  FailureLog log;
  for (int round = 0; round < rounds; ++round) {
    for (size_t ci = 0; ci < cases().size(); ++ci) {
      const Case& c = cases()[ci];
      for (at::ScalarType dt : allDtypes()) {
        auto [s0, s1] = shapes(g, g.randint(0, 9));
        T ops = {g.layout(g.tensor(s0, dt), g.randint(0, 3)), g.layout(g.tensor(s1, dt), g.randint(0, 3))};
        if (c.expr.rfind("v1: where($0", 0) == 0) ops[0] = ops[0].to(at::kBool);
        CheckOpts o;
        o.exact = !c.loose;
        if (dt == at::kHalf || dt == at::kBFloat16) o.rtol = 1e-2;
        // Values only here; which path ran is checked by PairwisePath.* (one failure cause per test).
        log.add(checkPairwise(c.expr, ops, c.eager, o));
      }
    }
  }
  EXPECT_TRUE(log.result());
  EXPECT_GT(log.cases, 150);
}

TEST(PairwiseRandom, AllDtypesShapesAndLayoutsSeed1) { runRandom(1, 2); }
TEST(PairwiseRandom, AllDtypesShapesAndLayoutsSeed2) { runRandom(2, 2); }

// One expression, every shape pattern and layout, float32 only: separates layout problems from
// dtype problems when the wide sweep above fails.
TEST(PairwiseRandom, EveryShapePatternAndLayoutFloat32) {
  Gen g(3);
  FailureLog log;
  const Case& c = cases()[1];  // sub/abs/lt
  const Case& d = cases()[2];  // mul/add_alpha
  for (int p = 0; p < 10; ++p)
    for (int l0 = 0; l0 < 4; ++l0)
      for (int l1 = 0; l1 < 4; ++l1) {
        auto [s0, s1] = shapes(g, p);
        T ops = {g.layout(g.tensor(s0, at::kFloat), l0), g.layout(g.tensor(s1, at::kFloat), l1)};
        CheckOpts o;
        log.add(checkPairwise(c.expr, ops, c.eager, o), "p=" + std::to_string(p) + " ");
        log.add(checkPairwise(d.expr, ops, d.eager, o), "p=" + std::to_string(p) + " ");
      }
  EXPECT_TRUE(log.result());
}

// Operands that are genuinely expanded (stride 0 along a dim of size > 1) and a permuted 3-d view.
TEST(PairwiseRandom, ExpandedAndPermutedOperands) {
  Gen g(4);
  for (at::ScalarType dt : {at::kFloat, at::kInt, at::kDouble}) {
    at::Tensor a = g.tensor({5, 1}, dt).expand({5, 6});         // strides [1, 0]
    at::Tensor b = g.tensor({6}, dt).expand({5, 6});            // strides [0, 1]
    at::Tensor c = g.tensor({6, 2, 5}, dt).permute({2, 0, 1});  // [5, 6, 2], non-contiguous
    const Case& k = cases()[2];
    EXPECT_TRUE(checkPairwise(k.expr, {a, b}, k.eager, {}));
    EXPECT_TRUE(checkPairwise(k.expr, {c, a.unsqueeze(-1)}, k.eager, {}));
    EXPECT_TRUE(checkPairwise(k.expr, {c.select(2, 1), b}, k.eager, {}));
  }
}

// Output layout follows eager's rules for permuted inputs (channels-last-like): same strides.
TEST(PairwiseRandom, OutputStridesFollowPermutedInputs) {
  Gen g(5);
  at::Tensor x = g.tensor({2, 4, 5, 3}, at::kFloat).permute({0, 3, 1, 2});  // [2,3,4,5], channels last
  at::Tensor y = g.tensor({3, 1, 1}, at::kFloat);
  const Case& k = cases()[2];
  EXPECT_TRUE(checkPairwise(k.expr, {x, y}, k.eager, {}));
  EXPECT_TRUE(checkPairwise(k.expr, {y, x}, k.eager, {}));
  at::Tensor t = g.tensor({7, 6}, at::kDouble).t();
  EXPECT_TRUE(checkPairwise(k.expr, {t, t}, k.eager, {}));
}

}  // namespace

}  // namespace ops_pairwise_random_test
