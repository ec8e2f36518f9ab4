// Operand tiles gathered from strided and broadcast tensors (kernels/backends/cpu/gather.h):
// every element size, dims merged where one walk reads them as one, short contiguous runs, and
// runs the dim above repeats (stride 0), from any start, against ATen's copy of the same view.
// Then the map and reduce drivers over spaces of a short inner dim (x[:, None, :] - y[None]),
// where every tile is gathered, against eager. Then the transpose a vertical reduction packs rows
// with (transposeRows), and the row reductions that take it.
#include "kernels/backends/cpu/gather.h"
#include "test_util.h"

namespace ops_gather_test {

namespace {

using namespace tsfuse_test;

// A walk over `sizes` of a base buffer with element strides `strides` (0: broadcast).
struct Walk {
  std::vector<int64_t> sizes, strides;
};

::testing::AssertionResult gathersAsAtenCopies(const Walk& w, at::ScalarType dt, int64_t start, int64_t n) {
  int64_t extent = 1;
  for (size_t j = 0; j < w.sizes.size(); ++j) extent += (w.sizes[j] - 1) * w.strides[j];
  const at::Tensor base = at::randint(0, 120, {extent}, at::TensorOptions(dt));
  const at::Tensor want = base.as_strided(w.sizes, w.strides).contiguous().view(-1).narrow(0, start, n);
  at::Tensor got = at::empty({n}, base.options());
  const int64_t esz = base.element_size();
  std::vector<int64_t> bytes;
  for (int64_t s : w.strides) bytes.push_back(s * esz);
  tsfuse::cpu::gather(static_cast<const char*>(base.data_ptr()), esz, w.sizes.data(), bytes.data(),
                      static_cast<int>(w.sizes.size()), start, n, static_cast<char*>(got.data_ptr()));
  if (at::equal(want, got)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "sizes " << c10::IntArrayRef(w.sizes) << " strides "
                                       << c10::IntArrayRef(w.strides) << " " << dt << " start " << start << " n " << n;
}

TEST(Gather, EveryWalkFromEveryStartAsAtenCopies) {
  const std::vector<Walk> walks = {
      {{5, 7, 4}, {4, 0, 1}},        // x[:, None, :] in an [N, M, 4] space: runs the dim above repeats
      {{5, 7, 4}, {0, 4, 1}},        // y[None]: contiguous across the space's last two dims
      {{5, 7, 3}, {3, 0, 1}},        // an odd run
      {{3, 5, 7, 2}, {2, 0, 0, 1}},  // repeated by two dims
      {{6, 9}, {1, 6}},              // transposed: every run one element
      {{7, 9}, {2, 0}},              // wh1[:, None] over short rows: each row one value
      {{7, 9}, {0, 2}},              // the rows repeat (stride 0 above)
      {{4, 1, 6}, {6, 6, 1}},        // a size-1 dim between contiguous ones
      {{4, 5}, {0, 0}},              // one value
      {{2, 3, 40}, {0, 40, 1}},      // runs longer than the inline copy
      {{3, 4, 5}, {40, 10, 2}},      // strided innermost
      {{1}, {0}},
  };
  for (at::ScalarType dt : {at::kByte, at::kShort, at::kFloat, at::kDouble}) {
    for (const Walk& w : walks) {
      int64_t numel = 1;
      for (int64_t s : w.sizes) numel *= s;
      for (int64_t start : {int64_t{0}, int64_t{1}, int64_t{3}, numel / 2, numel - 1})
        for (int64_t n : {int64_t{1}, int64_t{5}, numel - start})
          if (start + n <= numel && n > 0) EXPECT_TRUE(gathersAsAtenCopies(w, dt, start, n));
    }
  }
}

TEST(Gather, ShortInnerDimsThroughTheDrivers) {
  // Linear tiles of kTile elements cross rows of 1-9 coordinates; the operands' rows repeat
  // (x[:, None, :]) or run on across the space's rows (y[None]).
  Gen g(31);
  for (int64_t d : {1, 2, 3, 4, 8, 9}) {
    for (at::ScalarType dt : {at::kFloat, at::kDouble, at::kInt}) {
      const at::Tensor x = g.tensor({37, d}, dt, dt == at::kInt ? 0 : kNaNInf);
      const at::Tensor y = g.tensor({53, d}, dt, dt == at::kInt ? 0 : kNaNInf);
      const std::vector<at::Tensor> ops = {x.unsqueeze(1), y.unsqueeze(0)};
      EXPECT_TRUE(checkPairwise("v1: sub($0, $1); abs(%0)", ops,
                                [](const std::vector<at::Tensor>& o) { return (o[0] - o[1]).abs(); }))
          << "d=" << d;
      EXPECT_TRUE(checkReduce("v1: sub($0, $1); abs(%0)", ops,
                              [](const std::vector<at::Tensor>& o) { return (o[0] - o[1]).abs(); },
                              {"amax", std::vector<int64_t>{0}, false, std::nullopt}))
          << "d=" << d;
    }
  }
}

TEST(Gather, TransposeRowsAsAtenTransposes) {
  // Rows and columns padded apart (srcRow, dstRow longer than the block): the padding stays as it is.
  for (at::ScalarType dt : {at::kByte, at::kShort, at::kInt, at::kLong}) {
    for (int64_t n : {1, 3, 4, 5, 8, 13, 16, 17})
      for (int64_t cols : {1, 3, 4, 7, 8, 9, 16, 17}) {
        const at::Tensor src = at::randint(0, 120, {n, cols + 2}, at::TensorOptions(dt));
        at::Tensor dst = at::full({cols, n + 3}, -1, src.options());
        const int64_t esz = src.element_size();
        tsfuse::cpu::transposeRows(static_cast<const char*>(src.data_ptr()), (cols + 2) * esz, n, cols, esz,
                                   static_cast<char*>(dst.data_ptr()), (n + 3) * esz);
        EXPECT_TRUE(at::equal(dst.narrow(1, 0, n), src.narrow(1, 0, cols).t())) << dt << " " << n << "x" << cols;
        EXPECT_TRUE(at::equal(dst.narrow(1, n, 3), at::full({cols, 3}, -1, src.options()))) << "padding written";
      }
  }
}

TEST(Gather, RowReductionsOfPackedTransposes) {
  // Contiguous rows of d values reduced along them: vertical tiles pack them transposed (rows of
  // 4 lanes, the last 1-3 alone); sums in eager's order, so bit for bit.
  Gen g(32);
  for (int64_t d : {3, 4, 5, 16, 63, 64, 130}) {
    for (at::ScalarType dt : {at::kFloat, at::kDouble}) {
      const at::Tensor x = g.tensor({1001, d}, dt, kNaNInf);
      for (const char* kind : {"sum", "amax"})
        EXPECT_TRUE(checkReduce("v1: mul($0, $0)", {x}, [](const std::vector<at::Tensor>& o) { return o[0] * o[0]; },
                                {kind, std::vector<int64_t>{1}, false, std::nullopt}))
            << kind << " d=" << d << " " << dt;
    }
  }
}

}  // namespace

}  // namespace ops_gather_test
