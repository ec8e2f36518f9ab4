// pow's number exponents that ATen computes without its pow kernel (Pow.cpp: 0 fills 1, 1 copies the
// base, in every dtype) lower to a literal and to the base (kernels/lower/lower.cpp, PowForm): no
// ATen call on the tiles, and eager's bits, NaN and integers included. (A gradient of x ** 2 holds
// pow(x, 1): the Gaussian kernel's backward ran an ATen pow per tile before.)
#include "test_util.h"

#include "tsfuse/ops.h"

namespace ops_pow_forms_test {

namespace {

using namespace tsfuse_test;
using T = std::vector<at::Tensor>;

TEST(PowForms, ExponentsZeroAndOneRunNoAtenOpOnTheTiles) {
  Gen g(64);
  for (at::ScalarType dt : {at::kFloat, at::kDouble, at::kInt})
    for (const char* e : {"0", "1", "1.0", "0.0"}) {
      const std::string expr = std::string("v1: sub($0, $1); pow(%0, ") + e + ")";
      const double p = std::stod(e);
      const bool integral = std::string(e).find('.') == std::string::npos;
      auto eager = [&](const T& o) {
        return integral ? at::pow(o[0] - o[1], static_cast<int64_t>(p)) : at::pow(o[0] - o[1], p);
      };
      const T ops = {g.tensor({40, 1}, dt, at::isFloatingType(dt) ? kNaNInf : 0), g.tensor({1, 700}, dt)};
      const int64_t before = tsfuse::pathCounts().atenTileOps;
      EXPECT_TRUE(checkPairwise(expr, ops, eager)) << expr << " " << c10::toString(dt);
      EXPECT_EQ(tsfuse::pathCounts().atenTileOps, before) << expr << " " << c10::toString(dt);
    }
}

}  // namespace

}  // namespace ops_pow_forms_test
