// The map path's row tiles (rows of >= 128 elements, tiles never crossing a row) and the vertical
// reduction's in-place reads, against eager: every way an operand's tile is sourced (read in place
// from a contiguous row, packed once from a strided row-invariant operand, gathered from a strided
// or broadcast one), the result written in place into the output or copied, rows of several tiles
// with odd tails, all native dtypes and special values. The same tests run a second time with
// TSFUSE_CPU_ISA=baseline (ctest tsfuse_row_tiles_sse2), so the AVX2 and SSE2 loops both give
// eager's exact bits.
#include "test_util.h"

namespace ops_row_tile_test {

namespace {

using namespace tsfuse_test;
using T = std::vector<at::Tensor>;

// The seed's intersection: box columns [N, 1] against transposed columns [1, M] (strided).
const char* kIntersection =
    "v1: minimum($0, $1); maximum($2, $3); sub(%0, %1); clamp(%2, 0, None); minimum($4, $5); "
    "maximum($6, $7); sub(%4, %5); clamp(%6, 0, None); mul(%3, %7)";

at::Tensor intersectionEager(const T& o) {
  at::Tensor h = at::clamp(at::minimum(o[0], o[1]) - at::maximum(o[2], o[3]), 0);
  at::Tensor w = at::clamp(at::minimum(o[4], o[5]) - at::maximum(o[6], o[7]), 0);
  return h * w;
}

TEST(RowTile, SeedIntersectionPackedAndBroadcastOperands) {
  Gen g(11);
  for (int64_t m : {128, 500, 512, 513, 1100}) {
    for (at::ScalarType dt : {at::kFloat, at::kDouble, at::kInt}) {
      // NaN/inf, not signed zeros: min/max ties of 0 and -0 follow eager's kernel choice (a known
      // gap, see PairwiseSpecial), which is not what this test is about.
      at::Tensor b1 = g.tensor({7, 4}, dt, dt == at::kInt ? 0 : kNaNInf);
      at::Tensor b2 = g.tensor({m, 4}, dt, dt == at::kInt ? 0 : kNaNInf);
      auto c1 = b1.chunk(4, 1), c2 = b2.chunk(4, 1);
      T ops = {c1[3], c2[3].t(), c1[1], c2[1].t(), c1[2], c2[2].t(), c1[0], c2[0].t()};
      EXPECT_TRUE(checkPairwise(kIntersection, ops, intersectionEager, {})) << "m=" << m;
    }
  }
}

struct Case {
  std::string expr;
  EagerFn eager;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"v1: sub($0, $1); abs(%0); lt(%1, 1)", [](const T& x) { return at::lt(at::abs(at::sub(x[0], x[1])), 1); }},
      {"v1: minimum($0, $1); maximum(%0, $0)", [](const T& x) { return at::maximum(at::minimum(x[0], x[1]), x[0]); }},
      {"v1: gt($0, $1); where(%0, $0, $1)", [](const T& x) { return at::where(at::gt(x[0], x[1]), x[0], x[1]); }},
      {"v1: mul($0, 2.5); add(%0, 1); sub(%1, $1)",
       [](const T& x) { return at::sub(at::add(at::mul(x[0], 2.5), 1), x[1]); }},
      // the result is a cast of the last value, then an ATen tile op: not written last in place
      {"v1: to($0, float64); div(%0, $1)", [](const T& x) { return at::div(x[0].to(at::kDouble), x[1]); }},
      {"v1: exp($0); add(%0, $1)", [](const T& x) { return at::add(at::exp(x[0]), x[1]); }},
  };
  return c;
}

// Shapes whose coalesced inner dim is >= 128, with every operand source.
TEST(RowTile, EverySourceLayoutAndDtype) {
  Gen g(12);
  FailureLog log;
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> shapes = {
      {{5, 1}, {1, 700}},       // broadcast column x contiguous row (in place)
      {{3, 1, 200}, {4, 200}},  // 3-d, row-invariant second operand
      {{6, 300}, {300}},        // contiguous rows, a row-invariant operand
      {{2, 1030}, {2, 1030}},   // full-size operands, tails of 6
  };
  for (size_t ci = 0; ci < cases().size(); ++ci) {
    const Case& c = cases()[ci];
    for (at::ScalarType dt :
         {at::kFloat, at::kDouble, at::kInt, at::kLong, at::kShort, at::kByte, at::kChar, at::kBool}) {
      if (c.expr.find("exp") != std::string::npos && !at::isFloatingType(dt)) continue;
      for (const auto& [s0, s1] : shapes) {
        for (int l0 = 0; l0 < 4; ++l0) {
          const int l1 = g.randint(0, 3);
          int specials = at::isFloatingType(dt) ? kAllSpecials : 0;
          T ops = {g.layout(g.tensor(s0, dt, specials), l0), g.layout(g.tensor(s1, dt, specials), l1)};
          CheckOpts o;
          o.exact = c.expr.find("exp") == std::string::npos;
          log.add(checkPairwise(c.expr, ops, c.eager, o), "case " + std::to_string(ci) + " ");
        }
      }
    }
  }
  EXPECT_TRUE(log.result());
}

// Vertical reduction (the seed similarity): the second operand contiguous along the output's inner
// dim (read in place) or transposed (gathered).
TEST(RowTile, SimilarityVerticalReduceInPlaceAndGathered) {
  Gen g(13);
  const Case& c = cases()[0];
  for (int64_t d : {16, 130, 600}) {
    at::Tensor x = g.tensor({9, d}, at::kFloat), y = g.tensor({9, d}, at::kFloat);
    at::Tensor yt = y.t().contiguous().t();
    for (const at::Tensor& yy : {y, yt}) {
      ReduceArgs a{"sum", std::vector<int64_t>{0}};
      EXPECT_TRUE(checkReduce(c.expr, {x.unsqueeze(2), yy.unsqueeze(1)}, c.eager, a)) << "d=" << d;
    }
  }
}

}  // namespace

}  // namespace ops_row_tile_test
