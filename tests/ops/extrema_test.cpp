// tsfuse::extremum_values at run time (kernels/runtime/extrema.h): max/min(dim)'s values
// where no fused op took the reduction. Large float CPU tensors run the fused reduction kernels,
// the rest ATen's max/min(dim); both give max/min(dim)'s values bit for bit (NaN, signed zeros,
// infinities, every dim, keepdim, strided layouts) and its gradient (to the index it picks).
#include "test_util.h"

namespace ops_extremum_values_test {

namespace {

using namespace tsfuse_test;

torch::jit::Stack call(const char* op, const at::Tensor& x, int64_t dim, bool keepdim, bool max) {
  auto handle = c10::Dispatcher::singleton().findSchemaOrThrow(op, "");
  torch::jit::Stack s{x, dim, keepdim, max};
  handle.callBoxed(&s);
  return s;
}

at::Tensor extremumValues(const at::Tensor& x, int64_t dim, bool keepdim, bool max) {
  return call("tsfuse::extremum_values", x, dim, keepdim, max).at(0).toTensor();
}

at::Tensor eager(const at::Tensor& x, int64_t dim, bool keepdim, bool max) {
  return std::get<0>(max ? at::max(x, dim, keepdim) : at::min(x, dim, keepdim));
}

TEST(Extrema, MaxMinDimsValuesBitForBit) {
  Gen g(41);
  // [8, 64, 96] and [4, 8, 32, 40] take the fused kernels (>= 2^15 elements; contiguous, as
  // [before, extent, after]), [3, 5, 7] ATen's.
  for (std::vector<int64_t> sizes :
       {std::vector<int64_t>{8, 64, 96}, std::vector<int64_t>{4, 8, 32, 40}, std::vector<int64_t>{3, 5, 7}}) {
    for (at::ScalarType dt : {at::kFloat, at::kDouble, at::kInt}) {
      const at::Tensor v = g.tensor(sizes, dt, at::isFloatingType(dt) ? kNaNInf | kSignedZero : 0);
      // (rounded: ties, which decide the indices)
      for (int kind : {0, 1, 2, 4}) {
        const at::Tensor x = kind == 4 ? at::round(v) : g.layout(v, kind);
        for (int64_t dim : {0, 1, 2, -1})
          for (bool keepdim : {false, true})
            for (bool max : {false, true}) {
              const at::Tensor want = eager(x, dim, keepdim, max), got = extremumValues(x, dim, keepdim, max);
              if (sizes[0] != 3 && dt != at::kInt)
                EXPECT_STREQ(tsfuse::lastPath(), "native") << "the fused kernels ran";
              EXPECT_TRUE(sameTensor(want, got, /*exact=*/true))
                  << dt << " " << describeTensor(x) << " dim " << dim << " keepdim " << keepdim << " max " << max;
              EXPECT_TRUE(at::equal(at::signbit(want), at::signbit(got))) << "zeros' signs, dim " << dim;
              const auto both = call("tsfuse::extremum", x, dim, keepdim, max);
              const auto [values, indices] = max ? at::max(x, dim, keepdim) : at::min(x, dim, keepdim);
              EXPECT_TRUE(sameTensor(values, both.at(0).toTensor(), /*exact=*/true)) << "extremum, dim " << dim;
              EXPECT_TRUE(at::equal(at::signbit(values), at::signbit(both.at(0).toTensor())));
              EXPECT_TRUE(sameTensor(indices, both.at(1).toTensor(), /*exact=*/true)) << "extremum, dim " << dim;
              const at::Tensor arg = max ? at::argmax(x, dim, keepdim) : at::argmin(x, dim, keepdim);
              EXPECT_TRUE(sameTensor(arg, call("tsfuse::arg_extremum", x, dim, keepdim, max).at(0).toTensor(), true))
                  << "arg_extremum, dim " << dim;
            }
      }
    }
  }
}

// Rows of 256 to 511 contiguous values (a chain's [256, 500] slab) are read in place, one row per
// tile: no block the call allocates is larger than a tile's scratch (a packed copy of the rows is
// at least 256 KiB); the same values and indices.
TEST(Extrema, RowsOfAHalfTileAndMoreAreReadInPlace) {
  Gen g(43);
  for (int64_t n : {256, 300, 511}) {
    for (at::ScalarType dt : {at::kFloat, at::kDouble}) {
      const int64_t rows = (int64_t(1) << 16) / n + 1;
      const at::Tensor x = g.tensor({rows, n}, dt, kNaNInf | kSignedZero);
      for (bool max : {false, true}) {
        static CountingAllocator counting;
        counting.largest = 0;
        c10::Allocator* previous = c10::GetCPUAllocator();
        c10::SetCPUAllocator(&counting, /*priority=*/UINT8_MAX);
        const auto both = call("tsfuse::extremum", x, 1, false, max);
        c10::SetCPUAllocator(previous, /*priority=*/UINT8_MAX);
        EXPECT_STREQ(tsfuse::lastPath(), "native") << "the fused kernels ran";
        EXPECT_LE(counting.largest, size_t(16) << 10) << "n " << n << ": a copy of the rows";
        const auto [values, indices] = max ? at::max(x, 1) : at::min(x, 1);
        EXPECT_TRUE(sameTensor(values, both.at(0).toTensor(), /*exact=*/true)) << dt << " n " << n;
        EXPECT_TRUE(at::equal(at::signbit(values), at::signbit(both.at(0).toTensor())));
        EXPECT_TRUE(sameTensor(indices, both.at(1).toTensor(), /*exact=*/true)) << dt << " n " << n;
      }
    }
  }
}

TEST(Extrema, GradientGoesToMaxMinsIndex) {
  Gen g(42);
  // Ties (a few distinct values) decide which element takes the gradient.
  const at::Tensor v = at::round(g.tensor({6, 80, 90}, at::kFloat));
  for (int64_t dim : {0, 1, 2})
    for (bool max : {false, true}) {
      const at::Tensor a = v.clone().requires_grad_(), b = v.clone().requires_grad_();
      const at::Tensor w = g.tensor(eager(v, dim, false, max).sizes(), at::kFloat);
      const at::Tensor ga = torch::autograd::grad({(extremumValues(a, dim, false, max) * w).sum()}, {a})[0];
      const at::Tensor gb = torch::autograd::grad({(eager(b, dim, false, max) * w).sum()}, {b})[0];
      EXPECT_TRUE(sameTensor(gb, ga, /*exact=*/true)) << "dim " << dim << " max " << max;
      const at::Tensor c = v.clone().requires_grad_();
      const at::Tensor gc =
          torch::autograd::grad({(call("tsfuse::extremum", c, dim, false, max).at(0).toTensor() * w).sum()}, {c})[0];
      EXPECT_TRUE(sameTensor(gb, gc, /*exact=*/true)) << "extremum, dim " << dim << " max " << max;
    }
}

TEST(Extrema, EagersErrors) {
  const at::Tensor empty = at::zeros({0, 40000}, at::kFloat);
  EXPECT_EQ(errorOf([&] { extremumValues(empty, 0, false, true); }), errorOf([&] { eager(empty, 0, false, true); }));
  EXPECT_EQ(errorOf([&] { call("tsfuse::extremum", empty, 0, false, true); }),
            errorOf([&] { at::max(empty, 0, false); }));
  EXPECT_EQ(errorOf([&] { call("tsfuse::arg_extremum", empty, 0, false, true); }),
            errorOf([&] { at::argmax(empty, 0, false); }));
  const at::Tensor flags = at::zeros({4, 5}, at::kBool);  // argmax of bools raises; max(dim) does not
  EXPECT_EQ(errorOf([&] { call("tsfuse::arg_extremum", flags, 0, false, true); }),
            errorOf([&] { at::argmax(flags, 0, false); }));
  const at::Tensor cube = at::zeros({40, 40, 40}, at::kFloat);
  for (const char* op : {"tsfuse::extremum_values", "tsfuse::extremum", "tsfuse::arg_extremum"})
    EXPECT_EQ(errorOf([&] { call(op, cube, 3, false, true); }), errorOf([&] { at::max(cube, 3, false); })) << op;
  const at::Tensor big = at::zeros({200, 200}, at::kFloat);
  EXPECT_EQ(errorOf([&] { extremumValues(big, 2, false, false); }), errorOf([&] { eager(big, 2, false, false); }));
}

}  // namespace

}  // namespace ops_extremum_values_test
