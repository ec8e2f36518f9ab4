// cpu::firstExtremumOfRows (kernels/backends/cpu/row_extremum.h) against ATen's min/max(dim) indices, and
// firstExtremumValue against its values, bit for bit: rows of every length around the vector widths (8, 32), values with ties, -0.0 next to 0.0,
// ±inf, one NaN or several, all NaN; and through a chain's later stage (max/min with values).
#include "test_util.h"

#include "kernels/backends/cpu/row_extremum.h"
#include "kernels/backends/cpu/tile_program.h"

namespace ops_row_extremum_test {

namespace {

using tsfuse_test::Gen;

// n values per row with few distinct magnitudes (ties), signed zeros, infinities and NaNs.
at::Tensor hostileRows(Gen& g, int64_t rows, int64_t n, bool nans) {
  at::Tensor x = at::randint(-3, 4, {rows, n}, g.gen, at::kLong).to(at::kFloat);
  at::Tensor pick = at::randint(0, 16, {rows, n}, g.gen, at::kLong);
  const float inf = std::numeric_limits<float>::infinity();
  x = at::where(pick == 0, at::scalar_tensor(-0.0f), x);
  x = at::where(pick == 1, at::scalar_tensor(inf), x);
  x = at::where(pick == 2, at::scalar_tensor(-inf), x);
  if (nans) x = at::where(pick == 3, at::scalar_tensor(std::numeric_limits<float>::quiet_NaN()), x);
  return x.contiguous();
}

TEST(RowExtremum, FirstIndexAsAtensMinMax) {
  if (!tsfuse::cpu::usingAvx2()) GTEST_SKIP() << "needs AVX2";
  Gen g(61);
  int64_t checked = 0;
  // Rows of fewer than 24 go eight at a time (a row a lane): 61 rows leave a tail of 5.
  for (int64_t rows : {64, 61})
    for (int64_t n : {1, 2, 3, 7, 8, 9, 16, 23, 24, 31, 32, 33, 40, 63, 64, 65, 100, 500})
      for (bool nans : {false, true})
        for (bool isMax : {false, true}) {
          at::Tensor x = hostileRows(g, rows, n, nans);
          if (n > 3) x[5].fill_(std::numeric_limits<float>::quiet_NaN()), x[6].fill_(-0.0f), x[6][n - 1] = 0.0f;
          at::Tensor idx = at::empty({rows}, at::kLong);
          ASSERT_TRUE(
              tsfuse::cpu::firstExtremumOfRows(x.const_data_ptr<float>(), rows, n, isMax, idx.data_ptr<int64_t>()));
          at::Tensor want = std::get<1>(isMax ? at::max(x, 1) : at::min(x, 1));
          EXPECT_TRUE(at::equal(idx, want))
              << rows << " rows of " << n << (isMax ? " max" : " min") << (nans ? " with NaN" : "");
          checked += rows;
        }
  EXPECT_EQ(checked, 18 * 4 * (64 + 61));
}

TEST(RowExtremum, FirstValueAsAtensMinMaxValues) {
  // firstExtremumValue: the value max/min(dim) returns, bits included (the first zero's sign among
  // -0.0 and 0.0, the first NaN's payload), from one pass where the extremum is neither.
  if (!tsfuse::cpu::usingAvx2()) GTEST_SKIP() << "needs AVX2";
  Gen g(63);
  for (int64_t n : {1, 2, 7, 8, 9, 31, 32, 33, 64, 65, 500})
    for (bool nans : {false, true})
      for (bool isMax : {false, true}) {
        at::Tensor x = hostileRows(g, 40, n, nans);
        x[0].fill_(-0.0f), x[0][n - 1] = 0.0f;  // zeros only: the first one's sign, -0.0
        x[1].fill_(0.0f), x[1][n - 1] = -0.0f;  // 0.0
        if (n > 1) x[2].fill_(std::numeric_limits<float>::quiet_NaN()), x[2][0] = 1.0f;
        x[3] = at::randn({n}, g.gen);  // no tie, no special: one pass
        at::Tensor got = at::empty({40});
        for (int64_t r = 0; r < 40; ++r)
          ASSERT_TRUE(
              tsfuse::cpu::firstExtremumValue(x[r].const_data_ptr<float>(), n, isMax, got.data_ptr<float>() + r));
        at::Tensor want = std::get<0>(isMax ? at::max(x, 1) : at::min(x, 1));
        EXPECT_TRUE(at::equal(got.view(at::kInt), want.view(at::kInt)))
            << n << (isMax ? " max" : " min") << (nans ? " with NaN" : "");
      }
}

TEST(RowExtremum, AChainsLaterMinWithValuesIsEagers) {
  // The reference: ATen's min/max(dim) over stage 0's stored value (tsfuse::reduce), values and
  // indices, bit for bit (a -0.0 first among zeros stays -0.0; a NaN keeps its bits).
  Gen g(62);
  at::Tensor x = hostileRows(g, 300, 2, true).unsqueeze(1), y = hostileRows(g, 70, 2, false);
  const std::string expr = "v1: sub($0, $1); mul(%0, %0); neg(%1)";
  at::Tensor value = tsfuse::reduce({x, y}, expr, "amax", std::vector<int64_t>{2}, false, std::nullopt);
  for (const char* stage : {"min(dim=[1], keepdim=False)", "max(dim=[1], keepdim=True)"}) {
    auto [v, i] = tsfuse::reduceChainWithIndices({x, y}, expr, {"amax(dim=[2], keepdim=False)", stage});
    auto [wv, wi] = std::string(stage).rfind("min", 0) == 0 ? at::min(value, 1) : at::max(value, 1, true);
    EXPECT_TRUE(at::equal(i, wi)) << stage;
    EXPECT_TRUE(at::equal(v.view(at::kInt), wv.view(at::kInt))) << stage;  // bits, NaN payloads and zero signs
  }
}

}  // namespace

}  // namespace ops_row_extremum_test
