// Numerics of the reductions beyond the seed set against eager ATen: logsumexp, norm:<p>
// (torch.linalg.vector_norm), max/min with indices (tsfuse::reduce_with_indices) and the reduction
// epilogue, over dtypes, broadcast shapes (0- and 1-sized dims), layouts, NaN/inf, keepdim,
// negative and multiple dims, empty reductions and their errors, and the autograd fallback.
#include "test_util.h"

#include "kernels/runtime/fused_call.h"

#include <ATen/ATen.h>

namespace ops_reduce_indices_norm_epilogue_test {

namespace {

using namespace tsfuse_test;
using T = std::vector<at::Tensor>;
using Dims = std::optional<std::vector<int64_t>>;

const char* kDiff2 = "v1: sub($0, $1); mul(%0, %0)";
at::Tensor diff2(const T& x) { return at::mul(at::sub(x[0], x[1]), at::sub(x[0], x[1])); }
const char* kSum = "v1: add($0, $1)";
at::Tensor sum2(const T& x) { return at::add(x[0], x[1]); }

::testing::AssertionResult checkExtra(const std::string& expr, const EagerFn& eager, const T& ops,
                                      const std::string& red, const Dims& dim, bool keepdim,
                                      std::optional<c10::ScalarType> dtype, CheckOpts o) {
  Outcome want = runSide([&] { return eagerReduce(eager(ops), red, dim, keepdim, dtype); }, false);
  Outcome got = runSide([&] { return tsfuse::reduce(ops, expr, red, dim, keepdim, dtype); }, true);
  auto r = compareOutcomes(want, got, o);
  if (!r)
    r << "\n  reduce(" << expr << ") |> " << describeReduce({red, dim, keepdim, dtype}) << " on "
      << describeOperands(ops);
  return r;
}

std::pair<std::vector<int64_t>, std::vector<int64_t>> shapes(Gen& g) {
  const int64_t N = g.randint(0, 5), M = g.randint(1, 5), K = g.randint(1, 6);
  switch (g.randint(0, 4)) {
    case 0:
      return {{N, 1, K}, {M, K}};
    case 1:
      return {{N, 1, 1}, {1, M, K}};
    case 2:
      return {{3, 1, 20}, {17, 20}};  // vertical plan (innermost kept dim >= 16)
    case 3:
      return {{N, M, K}, {}};
    default:
      return {{1, 1, 700}, {2, 1, 1}};  // long reduction: split into merged parts
  }
}

std::vector<Dims> dimChoices() {
  return {std::vector<int64_t>{-1},
          std::vector<int64_t>{0},
          std::vector<int64_t>{1},
          std::vector<int64_t>{0, 2},
          std::vector<int64_t>{-1, -2},
          std::vector<int64_t>{0, 1, 2},
          std::nullopt};
}

TEST(ReduceIndicesNormEpilogue, LogsumexpAndNormRandom) {
  Gen g(7);
  FailureLog log;
  const std::vector<std::string> reds = {"logsumexp", "norm:2.0", "norm:1.0", "norm:inf",
                                         "norm:-inf", "norm:0.0", "norm:3.5", "norm:-1.5"};
  for (const auto& red : reds)
    for (at::ScalarType dt : allDtypes())
      for (const Dims& dim : dimChoices())
        for (int rep = 0; rep < 2; ++rep) {
          auto [s0, s1] = shapes(g);
          const int specials = at::isFloatingType(dt) && g.coin(0.4) ? kNaNInf : 0;
          T ops = {g.layout(g.tensor(s0, dt, specials), g.randint(0, 3)), g.layout(g.tensor(s1, dt), g.randint(0, 3))};
          std::optional<c10::ScalarType> dtype;
          if (red != "logsumexp" && g.coin(0.25)) dtype = at::kDouble;
          CheckOpts o;
          o.exact = false;
          o.atol = 1e-5;
          o.rtol = (dt == at::kHalf || dt == at::kBFloat16) ? 1e-2 : 1e-5;
          const bool diff = g.coin();
          log.add(checkExtra(diff ? kDiff2 : kSum, diff ? EagerFn(diff2) : EagerFn(sum2), ops, red, dim, g.coin(),
                             dtype, o));
        }
  EXPECT_TRUE(log.result());
  EXPECT_GT(log.cases, 800);
}

TEST(ReduceIndicesNormEpilogue, LogsumexpSpecialValuesNativeAndChunked) {
  AnyReduceOrder anyOrder;
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  // Rows: NaN wins, +inf, all -inf, +inf with -inf, large finite (max shift), plain.
  at::Tensor x = at::tensor({nan, 1.0, 2.0, inf, 1.0, 0.0, -inf, -inf, -inf, inf, -inf, 3.0, 1000.0, 999.0, -1000.0,
                             0.5, -0.5, 0.25},
                            at::kDouble)
                     .view({6, 3});
  for (at::ScalarType dt : {at::kFloat, at::kDouble, at::kHalf}) {
    T ops = {x.to(dt), at::zeros({1, 3}, dt)};
    CheckOpts o;
    o.exact = false;
    o.path = dt == at::kHalf ? "chunked" : "native";
    for (bool keepdim : {false, true}) {
      EXPECT_TRUE(checkExtra(kSum, sum2, ops, "logsumexp", std::vector<int64_t>{1}, keepdim, std::nullopt, o));
      EXPECT_TRUE(checkExtra(kSum, sum2, ops, "norm:2.0", std::vector<int64_t>{1}, keepdim, std::nullopt, o));
      EXPECT_TRUE(checkExtra(kSum, sum2, ops, "norm:inf", std::vector<int64_t>{-1}, keepdim, std::nullopt, o));
      EXPECT_TRUE(checkExtra(kSum, sum2, ops, "norm:-1.0", std::vector<int64_t>{-1}, keepdim, std::nullopt, o));
    }
  }
}

TEST(ReduceIndicesNormEpilogue, EmptyReductionsAndErrorsAsEager) {
  CheckOpts o;
  o.exact = false;
  T ops = {at::randn({3, 0}), at::randn({1, 0})};
  // Identity-less reductions over an empty dim raise eager's error; the others have identities.
  for (const std::string red : {"logsumexp", "norm:2.0", "norm:0.0", "norm:inf", "norm:-inf", "norm:-2.0"})
    EXPECT_TRUE(checkExtra(kSum, sum2, ops, red, std::vector<int64_t>{1}, false, std::nullopt, o)) << red;
  // Integer input: norm raises eager's dtype error, logsumexp computes in float32.
  T ints = {at::randint(-5, 5, {4, 3}, at::kInt), at::randint(-5, 5, {1, 3}, at::kInt)};
  EXPECT_TRUE(checkExtra(kSum, sum2, ints, "norm:2.0", std::vector<int64_t>{1}, false, std::nullopt, o));
  EXPECT_TRUE(checkExtra(kSum, sum2, ints, "logsumexp", std::vector<int64_t>{1}, false, std::nullopt, o));
  EXPECT_TRUE(checkExtra(kSum, sum2, ints, "norm:2.0", std::vector<int64_t>{1}, false, at::kFloat, o));
  // Bad dims raise eager's message.
  EXPECT_TRUE(checkExtra(kSum, sum2, ints, "logsumexp", std::vector<int64_t>{5}, false, std::nullopt, o));
  EXPECT_THROW(tsfuse::reduce(ints, kSum, "norm:abc"), c10::Error);
  EXPECT_THROW(tsfuse::reduce(ints, kSum, "sum:2"), c10::Error);
}

// Eager accumulates |x|^p of a float input in float: the sum overflows to inf exactly when it
// exceeds float's range, although each term and the root are finite (fuzzer program 1641).
TEST(ReduceIndicesNormEpilogue, FloatNormOverflowsLikeEager) {
  CheckOpts o;
  o.exact = false;
  for (double big : {3e19, 1e19, 2e38}) {
    T ops = {at::full({2, 1}, big, at::kFloat), at::zeros({1, 3}, at::kFloat)};
    for (const std::string red : {"norm:2.0", "norm:3.0", "norm:1.0", "norm:inf", "norm:-1.0"})
      for (int64_t d : {0, 1})
        EXPECT_TRUE(checkExtra(kSum, sum2, ops, red, std::vector<int64_t>{d}, false, std::nullopt, o))
            << red << " " << big;
    // In double the same sum is finite, as in eager.
    EXPECT_TRUE(checkExtra(kSum, sum2, ops, "norm:2.0", std::vector<int64_t>{0}, false, at::kDouble, o));
  }
  // Vertical plan (innermost kept dim >= 16) and a long split reduction take the same rule.
  T wide = {at::full({4, 1, 1}, 3e19, at::kFloat), at::zeros({1, 1, 20}, at::kFloat)};
  EXPECT_TRUE(checkExtra(kSum, sum2, wide, "norm:2.0", std::vector<int64_t>{0}, false, std::nullopt, o));
  T longer = {at::full({1, 700}, 3e18, at::kFloat), at::zeros({2, 1}, at::kFloat)};
  EXPECT_TRUE(checkExtra(kSum, sum2, longer, "norm:2.0", std::vector<int64_t>{1}, false, std::nullopt, o));
}

// ---- max/min with indices ----

::testing::AssertionResult checkIndices(const std::string& expr, const EagerFn& eager, const T& ops,
                                        const std::string& red, int64_t dim, bool keepdim, const char* path) {
  at::Tensor wv, wi, gv, gi;
  std::string want = errorOf(
      [&] { std::tie(wv, wi) = red == "max" ? at::max(eager(ops), dim, keepdim) : at::min(eager(ops), dim, keepdim); });
  std::string got = errorOf([&] { std::tie(gv, gi) = tsfuse::reduceWithIndices(ops, expr, red, dim, keepdim); });
  auto ctx = [&] {
    return "\n  " + red + "(" + expr + ", dim=" + std::to_string(dim) + ", keepdim=" + std::to_string(keepdim) +
           ") on " + describeOperands(ops);
  };
  if (!want.empty() || !got.empty()) {
    if (want == got) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "eager error \"" << want << "\" vs tsfuse \"" << got << "\"" << ctx();
  }
  auto r = sameTensor(wv, gv, /*exact=*/true);
  if (r) r = sameTensor(wi, gi, true);
  if (r && path && wv.numel() > 0 && std::string(tsfuse::lastPath()) != path)
    r = ::testing::AssertionFailure() << "path " << tsfuse::lastPath() << ", expected " << path;
  if (!r) r << ctx();
  return r;
}

TEST(ReduceIndicesNormEpilogue, MaxMinWithIndicesRandom) {
  Gen g(11);
  FailureLog log;
  for (const std::string red : {"max", "min"})
    for (at::ScalarType dt : allDtypes())
      for (int64_t dim : {0, 1, 2, -1, -2})
        for (int rep = 0; rep < 3; ++rep) {
          auto [s0, s1] = shapes(g);
          const int specials = at::isFloatingType(dt) && g.coin(0.5) ? kAllSpecials : 0;
          // Small integer ranges give ties: eager returns the first extremum's index.
          at::Tensor a = g.tensor(s0, dt, specials), b = g.tensor(s1, dt);
          if (!at::isFloatingType(dt) && dt != at::kBool)
            a = at::remainder(a, 3).to(dt), b = at::remainder(b, 2).to(dt);
          T ops = {g.layout(a, g.randint(0, 3)), g.layout(b, g.randint(0, 3))};
          const char* path = (dt == at::kHalf || dt == at::kBFloat16) ? "chunked" : "native";
          if (dt == at::kBool)
            log.add(checkIndices(
                "v1: logical_xor($0, $1)", [](const T& x) { return at::logical_xor(x[0], x[1]); }, ops, red, dim,
                g.coin(), path));
          else
            log.add(checkIndices(kSum, sum2, ops, red, dim, g.coin(), path));
        }
  EXPECT_TRUE(log.result());
  EXPECT_GT(log.cases, 100);
}

TEST(ReduceIndicesNormEpilogue, MaxMinNaNWinsAtItsFirstIndexAndEmptyDimRaises) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  at::Tensor x = at::tensor({1.0, nan, 5.0, nan, 5.0, 5.0, 2.0, 2.0, -1.0}, at::kFloat).view({3, 3});
  T ops = {x, at::zeros({1}, at::kFloat)};
  for (const std::string red : {"max", "min"})
    for (int64_t dim : {0, 1}) EXPECT_TRUE(checkIndices(kSum, sum2, ops, red, dim, false, "native"));
  T empty = {at::randn({2, 0, 3}), at::randn({1, 3})};
  EXPECT_TRUE(checkIndices(kSum, sum2, empty, "max", 1, false, nullptr));  // eager raises
  EXPECT_TRUE(checkIndices(kSum, sum2, empty, "min", 0, true, nullptr));   // empty output
  T scalar = {at::scalar_tensor(3.0), at::scalar_tensor(1.0)};
  EXPECT_TRUE(checkIndices(kSum, sum2, scalar, "max", 0, false, nullptr));
  EXPECT_TRUE(checkIndices(kSum, sum2, scalar, "max", 1, false, nullptr));  // dim out of range
  EXPECT_THROW(tsfuse::reduceWithIndices(ops, kSum, "sum", 0), c10::Error);
}

TEST(ReduceIndicesNormEpilogue, MaxWithIndicesChunkedSlabs) {
  // float16 has no native form: the exact chunked path, with several slabs (> 2^18 elements).
  Gen g(5);
  T ops = {g.tensor({300, 1, 40}, at::kHalf), g.tensor({1, 200, 40}, at::kHalf)};
  EXPECT_TRUE(checkIndices(kSum, sum2, ops, "max", -1, false, "chunked"));
  EXPECT_TRUE(checkIndices(kSum, sum2, ops, "min", 1, true, "chunked"));
}

// An epilogue over (values, indices[, its operands]) takes the indices' place: anchor matching's
// masked_fill form and the Matcher-style where/full_like form, with a per-row threshold operand,
// NaN rows and ties, on the native and the chunked path; the same values as eager's composition.
TEST(ReduceIndicesNormEpilogue, MaxMinWithIndicesEpilogue) {
  Gen g(12);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  struct Case {
    std::string epilogue;
    std::function<at::Tensor(const at::Tensor&, const at::Tensor&, const T&)> eager;
  };
  const std::vector<Case> cases = {
      {"v1: lt($0, 0.5); masked_fill($1, %0, -1)",
       [](const at::Tensor& v, const at::Tensor& i, const T&) { return i.masked_fill(v < 0.5, -1); }},
      {"v1: eq($1, $1); masked_fill($1, %0, -1); lt($0, 0.4); where(%2, %1, $1)",
       [](const at::Tensor& v, const at::Tensor& i, const T&) { return at::where(v < 0.4, at::full_like(i, -1), i); }},
      {"v1: ge($0, $2); mul($1, %0)",  // a threshold operand after the expression's own
       [](const at::Tensor& v, const at::Tensor& i, const T& extra) { return i * (v >= extra[0]); }},
      {"v1: mul($0, 2.0)", [](const at::Tensor& v, const at::Tensor&, const T&) { return v * 2.0; }},
  };
  FailureLog log;
  for (const std::string red : {"max", "min"})
    for (at::ScalarType dt : {at::kFloat, at::kDouble, at::kHalf})
      for (const Case& c : cases)
        for (int64_t dim : {0, 1}) {
          const bool keepdim = g.coin();
          at::Tensor a = at::remainder(g.tensor({13, 1}, dt, kAllSpecials), 1.0);
          a.index_put_({3}, nan);
          T ops = {a, at::round(g.tensor({1, 9}, dt) * 2) / 4};  // quarters: ties along each row
          at::Tensor t = g.tensor({1, 1}, dt).abs();
          at::Tensor value = sum2(ops), wv, wi;
          std::tie(wv, wi) = red == "max" ? at::max(value, dim, keepdim) : at::min(value, dim, keepdim);
          const bool extra = c.epilogue.find("$2") != std::string::npos;
          at::Tensor want = c.eager(wv, wi, {t});
          T all = ops;
          if (extra) all.push_back(t);
          auto [gv, gr] = tsfuse::reduceWithIndices(all, kSum, red, dim, keepdim, c.epilogue);
          const char* path = dt == at::kHalf ? "chunked" : "native";
          auto r = sameTensor(wv, gv, true);
          if (r) r = sameTensor(want, gr, true);
          if (r && std::string(tsfuse::lastPath()) != path)
            r = ::testing::AssertionFailure() << "path " << tsfuse::lastPath();
          // Laid out as the indices, in their dtype: the native path writes the matches over the
          // indices (the chunked path computes a slab before copying, into a fresh output).
          const bool inPlace = gr.scalar_type() == at::kLong && gr.sizes() == wi.sizes() && dt != at::kHalf;
          if (r && inPlace && tsfuse::lastDonatedMemory() != gr.data_ptr())
            r = ::testing::AssertionFailure() << "the epilogue's value did not take the indices' memory";
          log.add(r, red + " " + c.epilogue + " dim " + std::to_string(dim) + " " + c10::toString(dt) + ": ");
        }
  EXPECT_TRUE(log.result());
  // A wrong operand count is an error, not a silent misread.
  T ops = {at::rand({4, 1}), at::rand({1, 3})};
  EXPECT_THROW(tsfuse::reduceWithIndices(ops, kSum, "max", 1, false, std::string("v1: ge($0, $2); mul($1, %0)")),
               c10::Error);
}

// ---- epilogue ----

struct EpiCase {
  std::string red;
  Dims dim;
  bool keepdim;
  std::string epilogue;
  std::function<at::Tensor(const at::Tensor&, const T&)> eager;  // reduced value, epilogue operands
};

::testing::AssertionResult checkEpilogue(const T& ops, const T& epiOps, const EpiCase& c, const char* path) {
  T all = ops;
  all.insert(all.end(), epiOps.begin(), epiOps.end());
  Outcome want = runSide(
      [&] {
        at::Tensor r = c.red == "sum"      ? at::sum(diff2(ops), at::OptionalIntArrayRef(*c.dim), c.keepdim)
                       : c.red == "argmin" ? at::argmin(diff2(ops), (*c.dim)[0], c.keepdim)
                                           : eagerReduce(diff2(ops), c.red, c.dim, c.keepdim, std::nullopt);
        return c.eager(r, epiOps);
      },
      false);
  Outcome got =
      runSide([&] { return tsfuse::reduce(all, kDiff2, c.red, c.dim, c.keepdim, std::nullopt, c.epilogue); }, true);
  CheckOpts o;
  o.exact = false;
  o.path = path;
  auto r = compareOutcomes(want, got, o);
  if (!r) r << "\n  " << c.red << " |> " << c.epilogue << " on " << describeOperands(all);
  return r;
}

TEST(ReduceIndicesNormEpilogue, EpilogueRandomPromotionAndLayouts) {
  AnyReduceOrder anyOrder;
  Gen g(3);
  FailureLog log;
  const std::vector<EpiCase> cases = {
      {"sum", std::vector<int64_t>{-1}, false, "v1: sqrt($0); mul(%0, $1)",
       [](const at::Tensor& r, const T& e) { return at::mul(at::sqrt(r), e[0]); }},
      {"sum", std::vector<int64_t>{-1}, true, "v1: neg($0); div(%0, $1); exp(%1)",
       [](const at::Tensor& r, const T& e) { return at::exp(at::div(at::neg(r), e[0])); }},
      {"sum", std::vector<int64_t>{0}, false, "v1: mul($1, $0); add(%0, 2)",
       [](const at::Tensor& r, const T& e) { return at::add(at::mul(e[0], r), 2); }},
      {"norm:2.0", std::vector<int64_t>{-1}, false, "v1: lt($0, $1)",
       [](const at::Tensor& r, const T& e) { return at::lt(r, e[0]); }},
      {"logsumexp", std::vector<int64_t>{1}, false, "v1: sub($0, $1)",
       [](const at::Tensor& r, const T& e) { return at::sub(r, e[0]); }},
      {"argmin", std::vector<int64_t>{1}, false, "v1: add($0, $1)",
       [](const at::Tensor& r, const T& e) { return at::add(r, e[0]); }},
  };
  const std::vector<at::ScalarType> dts = {at::kFloat, at::kDouble, at::kInt, at::kLong, at::kBool, at::kHalf};
  for (const EpiCase& c : cases)
    for (at::ScalarType vdt : {at::kFloat, at::kDouble, at::kLong, at::kHalf})
      for (at::ScalarType wdt : dts)
        for (int rep = 0; rep < 2; ++rep) {
          const int64_t N = g.randint(0, 4), M = g.randint(1, 20), K = g.randint(1, 5);
          T ops = {g.layout(g.tensor({N, 1, K}, vdt), g.randint(0, 3)),
                   g.layout(g.tensor({1, M, K}, vdt), g.randint(0, 3))};
          if (c.red == "norm:2.0" && !at::isFloatingType(vdt)) continue;  // eager raises; covered above
          // The epilogue operand broadcasts to the reduced shape: per column, per row, full, 0-dim.
          at::Tensor red = c.red == "argmin"
                               ? at::argmin(diff2(ops), (*c.dim)[0], c.keepdim)
                               : eagerReduce(diff2(ops).to(at::kDouble), "logsumexp", c.dim, c.keepdim, std::nullopt);
          std::vector<int64_t> rs(red.sizes().begin(), red.sizes().end());
          std::vector<int64_t> ws;
          switch (g.randint(0, 3)) {
            case 0:
              ws = {rs.empty() ? 1 : rs.back()};
              break;
            case 1:
              ws = rs;
              break;
            case 2:
              ws = {};
              break;
            default:
              ws = rs;
              if (!ws.empty()) ws[0] = 1;
              break;
          }
          at::Tensor w = g.tensor(ws, wdt);
          if (at::isFloatingType(wdt)) w = w.abs() + 0.5;
          const char* path = (vdt == at::kHalf || wdt == at::kHalf) ? "chunked" : "native";
          if (red.numel() == 0) path = "empty";
          log.add(checkEpilogue(ops, {g.layout(w, g.randint(0, 3))}, c, path));
        }
  EXPECT_TRUE(log.result());
  EXPECT_GT(log.cases, 200);
}

TEST(ReduceIndicesNormEpilogue, EpilogueThatGrowsTheShapeRunsAfterTheReduction) {
  Gen g(9);
  T ops = {g.tensor({5, 1, 3}, at::kFloat), g.tensor({1, 4, 3}, at::kFloat)};
  EpiCase c{"sum", std::vector<int64_t>{-1}, false, "v1: mul($0, $1)",
            [](const at::Tensor& r, const T& e) { return at::mul(r, e[0]); }};
  EXPECT_TRUE(checkEpilogue(ops, {g.tensor({2, 5, 4}, at::kFloat)}, c, "native"));
  // A broadcasting error in the epilogue is eager's error.
  EXPECT_TRUE(checkEpilogue(ops, {g.tensor({3}, at::kFloat)}, c, nullptr));
  // Full reduction: the reduced value is 0-dim (a tensor, not a wrapped number) in promotion.
  EpiCase all{"sum", std::vector<int64_t>{0, 1, 2}, false, "v1: mul($0, $1)",
              [](const at::Tensor& r, const T& e) { return at::mul(r, e[0]); }};
  EXPECT_TRUE(checkEpilogue(ops, {at::arange(3, at::kLong)}, all, nullptr));
  EXPECT_TRUE(checkEpilogue(ops, {at::arange(3, at::kHalf)}, all, nullptr));
  // Wrong operand count.
  EXPECT_THROW(
      tsfuse::reduce(ops, kDiff2, "sum", std::vector<int64_t>{-1}, false, std::nullopt, std::string("v1: mul($0, $1)")),
      c10::Error);
}

TEST(ReduceIndicesNormEpilogue, EpilogueChunkedSlabs) {
  Gen g(4);
  T ops = {g.tensor({400, 1, 30}, at::kHalf), g.tensor({1, 300, 30}, at::kHalf)};
  for (bool keepdim : {false, true}) {
    EpiCase c{"sum", std::vector<int64_t>{-1}, keepdim, "v1: sqrt($0); mul(%0, $1)",
              [](const at::Tensor& r, const T& e) { return at::mul(at::sqrt(r), e[0]); }};
    at::Tensor w = keepdim ? g.tensor({300, 1}, at::kFloat) : g.tensor({300}, at::kFloat);
    EXPECT_TRUE(checkEpilogue(ops, {w}, c, "chunked"));
  }
}

TEST(ReduceIndicesNormEpilogue, AutogradFallsBackToEager) {
  at::Tensor a = at::randn({4, 1, 3}).requires_grad_(), b = at::randn({1, 5, 3});
  at::Tensor w = at::rand({5}).requires_grad_();
  at::Tensor y = tsfuse::reduce({a, b, w}, kDiff2, "sum", std::vector<int64_t>{-1}, false, std::nullopt,
                                std::string("v1: sqrt($0); mul(%0, $1)"));
  EXPECT_STREQ(tsfuse::lastPath(), "eager");
  y.sum().backward();
  at::Tensor a2 = a.detach().clone().requires_grad_(), w2 = w.detach().clone().requires_grad_();
  (at::sqrt(diff2({a2, b}).sum(-1)) * w2).sum().backward();
  EXPECT_TRUE(at::allclose(a.grad(), a2.grad()));
  EXPECT_TRUE(at::allclose(w.grad(), w2.grad()));

  at::Tensor a3 = a.detach().clone().requires_grad_();
  auto [v, i] = tsfuse::reduceWithIndices({a3, b}, kSum, "max", 1);
  EXPECT_STREQ(tsfuse::lastPath(), "eager");
  v.sum().backward();
  at::Tensor a4 = a.detach().clone().requires_grad_();
  std::get<0>(at::max(at::add(a4, b), 1)).sum().backward();
  EXPECT_TRUE(at::equal(a3.grad(), a4.grad()));
  at::Tensor a5 = a.detach().clone().requires_grad_();
  tsfuse::reduce({a5, b}, kSum, "logsumexp", std::vector<int64_t>{-1}).sum().backward();
  at::Tensor a6 = a.detach().clone().requires_grad_();
  at::logsumexp(at::add(a6, b), {-1}).sum().backward();
  EXPECT_TRUE(at::allclose(a5.grad(), a6.grad()));
}

TEST(ReduceIndicesNormEpilogue, MetaKernelsGiveEagerShapes) {
  T ops = {at::empty({4, 1, 3}, at::device(at::kMeta)), at::empty({1, 5, 3}, at::device(at::kMeta))};
  auto [v, i] = tsfuse::reduceWithIndices(ops, kSum, "min", 1, true);
  EXPECT_EQ(v.sizes(), (std::vector<int64_t>{4, 1, 3}));
  EXPECT_EQ(i.scalar_type(), at::kLong);
  at::Tensor n = tsfuse::reduce(ops, kSum, "norm:2.0", std::vector<int64_t>{-1}, false, at::kDouble);
  EXPECT_EQ(n.sizes(), (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(n.scalar_type(), at::kDouble);
}

}  // namespace

}  // namespace ops_reduce_indices_norm_epilogue_test
