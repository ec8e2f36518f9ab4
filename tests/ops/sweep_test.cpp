// tsfuse::reduce_sweep (kernels/runtime/sweep.h): several reductions of one fused reduction's value in one
// sweep. Against the branches run as separate chains and against eager ATen, over many slabs:
// a branch that keeps the slab dim gives the chain's bits; one that reduces it folds its slab
// partials (amax, amin, any, all), equal in value to eager's (a tie between -0.0 and 0.0 may pick
// the other zero); a branch that can do neither makes every branch run as its own chain. Then
// epilogues, NaN, empty inputs, eager's errors, autograd and Meta.
#include "test_util.h"

#include "kernels/runtime/sweep.h"
#include "tsfuse/ops.h"

namespace ops_sweep_test {

namespace {

using tsfuse_test::Gen;
using tsfuse_test::sameTensor;

class Sweep : public tsfuse_test::ManySlabs {};

const std::string kSq = "v1: sub($0, $1); mul(%0, %0)";

// Equal values: NaN where eager has NaN, and -0.0 == 0.0.
::testing::AssertionResult sameValues(const at::Tensor& want, const at::Tensor& got) {
  return sameTensor(want, got, /*exact=*/false, /*rtol=*/0.0, /*atol=*/0.0);
}

std::vector<at::Tensor> separately(const std::vector<at::Tensor>& ops, const std::vector<std::string>& stages) {
  auto s = tsfuse::cachedSweep(kSq, stages);
  std::vector<at::Tensor> out;
  for (size_t j = 0; j < s->branches.size(); ++j)
    out.push_back(tsfuse::reduceChain(s->branchOperands(ops, j), kSq, {stages[0], stages[j + 1]}));
  return out;
}

struct Case {
  const char* name;
  std::vector<std::string> stages;
  int extras;  // epilogue operands [1] after stage 0's
};

const std::vector<Case> kCases = {
    {"Chamfer minima",
     {"sum(dim=[2], keepdim=False)", "amin(dim=[1], keepdim=False)", "amin(dim=[0], keepdim=False)"},
     0},
    {"maxima, keepdim",
     {"amax(dim=[2], keepdim=True)", "amax(dim=[0], keepdim=True)", "amax(dim=[1], keepdim=True)"},
     0},
    {"any and all",
     {"sum(dim=[2], keepdim=False) |> v1: gt($0, 4.0)", "any(dim=[0], keepdim=False)", "all(dim=[1], keepdim=False)"},
     0},
    {"epilogues on both branches",
     {"sum(dim=[2], keepdim=False)", "amin(dim=[1], keepdim=False) |> v1: mul($0, $1)",
      "amin(dim=[0], keepdim=False) |> v1: sqrt($0); add(%0, $1)"},
     2},
    {"a sum over the slab dim: separate chains",
     {"sum(dim=[2], keepdim=False)", "amin(dim=[1], keepdim=False)", "sum(dim=[0], keepdim=False)"},
     0},
    {"three branches",
     {"sum(dim=[2], keepdim=False)", "amin(dim=[1], keepdim=False)", "amin(dim=[0], keepdim=False)",
      "sum(dim=[1], keepdim=False)"},
     0},
};

TEST_F(Sweep, ManySlabsAgainstSeparateChainsAndEager) {
  Gen g(21);
  for (int i = 0; i < 36; ++i) {
    const Case& c = kCases[i % kCases.size()];
    const int64_t n = 1 + g.randint(0, 30), m = 1 + g.randint(0, 25), d = 1 + g.randint(0, 5);
    const at::ScalarType dt = i % 4 == 3 ? at::kDouble : at::kFloat;
    at::Tensor x = g.tensor({n, 1, d}, dt, i % 5 == 4 ? tsfuse_test::kNaN | tsfuse_test::kSignedZero : 0);
    at::Tensor y = g.tensor({m, d}, dt);
    std::vector<at::Tensor> ops{x, y};
    for (int k = 0; k < c.extras; ++k) ops.push_back(g.tensor({1}, dt).abs());
    const std::string what = std::string(c.name) + " #" + std::to_string(i);
    std::vector<at::Tensor> got = tsfuse::reduceSweep(ops, kSq, c.stages);
    std::vector<at::Tensor> chains = separately(ops, c.stages);
    std::vector<at::Tensor> eager = tsfuse::evalSweep(*tsfuse::cachedSweep(kSq, c.stages), ops);
    ASSERT_EQ(got.size(), c.stages.size() - 1) << what;
    for (size_t j = 0; j < got.size(); ++j) {
      ASSERT_TRUE(sameValues(chains[j], got[j])) << what << " branch " << j;
      ASSERT_TRUE(sameTensor(eager[j], got[j], /*exact=*/false)) << what << " branch " << j;
    }
  }
}

// One branch over every dim (an MMD term, exp(-2 d).mean()): its slab partials fold. Extrema and
// integer sums are eager's values exactly; float sums and means add the slab sums in double,
// within the float sum tolerance, and only where stage 0's value is larger than every operand.
TEST_F(Sweep, OneBranchOverEveryDimFoldsItsSlabs) {
  Gen g(24);
  const std::string mmd = "sum(dim=[2], keepdim=False) |> v1: mul($0, -2.0); exp(%0)";
  const std::vector<std::pair<std::vector<std::string>, bool>> cases = {
      // (stages, exact)
      {{mmd, "mean(dim=None, keepdim=False)"}, false},
      {{mmd, "sum(dim=[0, 1], keepdim=True) |> v1: sqrt($0)"}, false},
      {{mmd, "sum(dim=None, keepdim=False, dtype=float64)"}, false},
      {{"amax(dim=[2], keepdim=False)", "amin(dim=None, keepdim=False)"}, true},
      {{"sum(dim=[2], keepdim=False) |> v1: gt($0, 3.0)", "any(dim=None, keepdim=False)"}, true},
  };
  for (int i = 0; i < 20; ++i) {
    const auto& [stages, exact] = cases[i % cases.size()];
    const int64_t n = 2 + g.randint(0, 40), m = 2 + g.randint(0, 30);
    const at::ScalarType dt = std::vector<at::ScalarType>{at::kFloat, at::kDouble, at::kHalf}[i % 3];
    const std::vector<at::Tensor> ops{g.tensor({n, 1, 3}, dt), g.tensor({m, 3}, dt)};
    const std::string what = stages[1] + " #" + std::to_string(i);
    std::vector<at::Tensor> got = tsfuse::reduceSweep(ops, kSq, stages);
    if (dt != at::kHalf) EXPECT_STREQ(tsfuse::lastPath(), "native") << what;  // (float16: the chunked path)
    std::vector<at::Tensor> want = tsfuse::evalSweep(*tsfuse::cachedSweep(kSq, stages), ops);
    ASSERT_EQ(got.size(), 1u);
    // float16: eager and tsfuse each round the (float, double) total once: one float16 ulp apart.
    const double tol = dt == at::kHalf ? 1e-3 : 1e-5;
    ASSERT_TRUE(exact ? sameValues(want[0], got[0]) : sameTensor(want[0], got[0], /*exact=*/false, tol, tol)) << what;
  }
  // Integer sums wrap alike in any order: exact.
  const std::vector<std::string> intSum{"sum(dim=[2], keepdim=False)", "sum(dim=None, keepdim=False)"};
  const std::vector<at::Tensor> ints{g.tensor({37, 1, 3}, at::kInt), g.tensor({29, 3}, at::kInt)};
  EXPECT_TRUE(sameTensor(tsfuse::evalSweep(*tsfuse::cachedSweep(kSq, intSum), ints)[0],
                         tsfuse::reduceSweep(ints, kSq, intSum)[0], true));
  // A value no larger than its operand (x [N, D] squared, summed over D): not worth reordering the
  // sum, so the value is stored and ATen sums it: eager's bits.
  const std::string rowNorms = "v1: mul($0, $0)";
  const std::vector<std::string> overRows{"sum(dim=[1], keepdim=False)", "sum(dim=None, keepdim=False)"};
  const std::vector<at::Tensor> x{g.tensor({300, 5}, at::kFloat)};
  EXPECT_TRUE(sameTensor(tsfuse::evalSweep(*tsfuse::cachedSweep(rowNorms, overRows), x)[0],
                         tsfuse::reduceSweep(x, rowNorms, overRows)[0], true));
}

TEST_F(Sweep, IntegerValuesAreExactAgainstEager) {
  Gen g(22);
  const auto& stages = kCases[0].stages;
  at::Tensor x = g.tensor({41, 1, 3}, at::kInt), y = g.tensor({33, 3}, at::kInt);
  std::vector<at::Tensor> got = tsfuse::reduceSweep({x, y}, kSq, stages);
  std::vector<at::Tensor> want = tsfuse::evalSweep(*tsfuse::cachedSweep(kSq, stages), {x, y});
  for (size_t j = 0; j < got.size(); ++j) EXPECT_TRUE(sameTensor(want[j], got[j], true)) << j;
  EXPECT_STREQ(tsfuse::lastPath(), "native");
}

TEST_F(Sweep, EmptyInputsErrorsAutogradMeta) {
  using tsfuse_test::errorOf;
  const auto& stages = kCases[0].stages;
  for (auto [n, m] : {std::pair<int64_t, int64_t>{0, 4}, {5, 0}}) {
    at::Tensor x = at::randn({n, 1, 3}), y = at::randn({m, 3});
    EXPECT_EQ(errorOf([&] {
                tsfuse::reduceSweep({x, y}, kSq, stages);
              }),
              errorOf([&] {
                tsfuse::evalSweep(*tsfuse::cachedSweep(kSq, stages), {x, y});
              }))
        << n << " " << m;
  }
  at::Tensor x = at::randn({40, 1, 3}), y = at::randn({30, 3});
  at::Tensor bad = at::randn({30, 4});
  EXPECT_EQ(errorOf([&] { tsfuse::reduceSweep({x, bad}, kSq, stages); }), errorOf([&] { at::sub(x, bad); }));
  const std::vector<std::string> far{"sum(dim=[2], keepdim=False)", "amin(dim=[1], keepdim=False)",
                                     "amin(dim=[4], keepdim=False)"};
  EXPECT_EQ(errorOf([&] {
              tsfuse::reduceSweep({x, y}, kSq, far);
            }),
            errorOf([&] {
              at::amin(at::randn({40, 30}), {4});
            }));
  EXPECT_NE(errorOf([&] {
              tsfuse::reduceSweep({x, y}, kSq, {stages[0]});
            }).find("at least one branch"),
            std::string::npos);

  // With a gradient the sweep runs fused too, and so does its backward (chain_autograd_test.cpp).
  at::Tensor xg = x.clone().requires_grad_(), xe = x.clone().requires_grad_();
  std::vector<at::Tensor> r = tsfuse::reduceSweep({xg, y}, kSq, stages);
  EXPECT_STREQ(tsfuse::lastPath(), "native");
  (r[0].sum() + r[1].sum()).backward();
  std::vector<at::Tensor> e = tsfuse::evalSweep(*tsfuse::cachedSweep(kSq, stages), {xe, y});
  (e[0].sum() + e[1].sum()).backward();
  EXPECT_TRUE(at::allclose(xg.grad(), xe.grad(), 1e-5, 1e-6));

  std::vector<at::Tensor> meta =
      tsfuse::reduceSweep({at::empty({40, 1, 3}, at::kMeta), at::empty({30, 3}, at::kMeta)}, kSq, stages);
  EXPECT_EQ(meta[0].sizes(), at::IntArrayRef({40}));
  EXPECT_EQ(meta[1].sizes(), at::IntArrayRef({30}));
}

// Branches fused over stage 0's value (kernel regression: (k[:, :, None] * v[None]).sum(1) beside
// k.sum(1, keepdim=True)) run per slab where they keep the slab dim: their separate chains' bits.
// The slab dim is one every fused branch keeps (column sums are sliced along the columns); a
// fused branch that keeps none makes every branch run as its own chain. With a gradient the
// sweep runs ATen's autograd through the reference.
TEST_F(Sweep, FusedBranchesAreTheirChainsBits) {
  Gen g(25);
  const std::string gauss = "sum(dim=[2], keepdim=False) |> v1: mul($0, -2.0); exp(%0)";
  const std::string numerator = "fused(v1: mul($0, $1); $0 = value.unsqueeze(2)) |> sum(dim=[1], keepdim=False)";
  const std::string weighted = "fused(v1: mul($0, $1); $0 = value) |> amax(dim=[1], keepdim=False) |> v1: add($0, $1)";
  const std::string overSlabs = "fused(v1: mul($0, $1); $0 = value) |> amin(dim=[0], keepdim=False)";
  // Column sums (the sweep's slabs then run along the value's columns, which every branch keeps).
  const std::string columns = "fused(v1: mul($0, $1); $0 = value.unsqueeze(2)) |> sum(dim=[0], keepdim=False)";
  struct FusedCase {
    std::vector<std::string> stages;
    std::vector<std::vector<int64_t>> extras;  // each branch's operands' sizes (m: the value's columns)
  };
  for (int i = 0; i < 18; ++i) {
    const int64_t n = 2 + g.randint(0, 40), m = 1 + g.randint(0, 30), c = 1 + g.randint(0, 3);
    const std::vector<FusedCase> cases = {
        {{gauss, numerator, "sum(dim=[1], keepdim=True)"}, {{m, c}}},
        {{gauss, "amin(dim=[1], keepdim=False)", weighted, numerator}, {{m}, {1}, {m, c}}},
        {{gauss, numerator, overSlabs}, {{m, c}, {m}}},
        {{gauss, columns, "sum(dim=[0], keepdim=False)", "amax(dim=[0], keepdim=True)"}, {{n, 1, c}}},
    };
    const FusedCase& fc = cases[i % cases.size()];
    const at::ScalarType dt = i % 4 == 3 ? at::kDouble : at::kFloat;
    std::vector<at::Tensor> ops{g.tensor({n, 1, 3}, dt), g.tensor({m, 3}, dt)};
    for (const auto& sizes : fc.extras) ops.push_back(g.tensor(sizes, dt));
    const std::string what = fc.stages[2] + " #" + std::to_string(i);
    std::vector<at::Tensor> got = tsfuse::reduceSweep(ops, kSq, fc.stages);
    std::vector<at::Tensor> eager = tsfuse::evalSweep(*tsfuse::cachedSweep(kSq, fc.stages), ops);
    auto s = tsfuse::cachedSweep(kSq, fc.stages);
    ASSERT_EQ(got.size(), fc.stages.size() - 1) << what;
    for (size_t j = 0; j < got.size(); ++j) {
      at::Tensor chain = tsfuse::reduceChain(s->branchOperands(ops, j), kSq, {fc.stages[0], fc.stages[j + 1]});
      ASSERT_TRUE(sameValues(chain, got[j])) << what << " branch " << j;
      ASSERT_TRUE(sameTensor(eager[j], got[j], /*exact=*/false)) << what << " branch " << j;
    }
  }
  // Gradients: a branch reading the value unsqueezed, and one reading it as it is (a fused chain
  // backward where one applies), against ATen's autograd through the reference.
  at::Tensor x = g.tensor({40, 1, 3}, at::kFloat), y = g.tensor({30, 3}, at::kFloat), v = g.tensor({30, 2}, at::kFloat);
  at::Tensor b = g.tensor({30}, at::kFloat);
  const std::string rowWeighted = "fused(v1: mul($0, $1); $0 = value) |> sum(dim=[1], keepdim=False)";
  for (const auto& [stages, ops] : std::vector<std::pair<std::vector<std::string>, std::vector<at::Tensor>>>{
           {{gauss, numerator, "sum(dim=[1], keepdim=True)"}, {x, y, v}},
           {{gauss, rowWeighted, "amin(dim=[1], keepdim=False)"}, {x, y, b}}}) {
    at::Tensor xg = x.clone().requires_grad_(), xe = x.clone().requires_grad_();
    std::vector<at::Tensor> fusedOps = ops, eagerOps = ops;
    fusedOps[0] = xg;
    eagerOps[0] = xe;
    std::vector<at::Tensor> r = tsfuse::reduceSweep(fusedOps, kSq, stages);
    (r[0].sum() + r[1].sum()).backward();
    std::vector<at::Tensor> e = tsfuse::evalSweep(*tsfuse::cachedSweep(kSq, stages), eagerOps);
    (e[0].sum() + e[1].sum()).backward();
    EXPECT_TRUE(at::allclose(xg.grad(), xe.grad(), 1e-5, 1e-6)) << stages[1];
  }
}

}  // namespace

}  // namespace ops_sweep_test
