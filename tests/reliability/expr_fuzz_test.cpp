// Bounded, deterministic fuzzing of the expression decoder (kernels/ir/expr.cpp) and of the fused ops
// on the expressions it accepts. The property is in tests/expr_fuzz.h (shared with the libFuzzer
// target fuzz/expr_fuzzer.cpp). Seeds are fixed: a failure reproduces with the printed input.
#include "expr_fuzz.h"
#include "test_util.h"

#include "kernels/reference/aten_eval.h"

#include <cstdlib>

namespace reliability_expr_fuzz_test {

namespace {

using namespace tsfuse_test;

// TSFUSE_FUZZ_ITERATIONS overrides the count (docs/reliability.md quotes the default).
int64_t iterations(int64_t dflt) {
  const char* v = std::getenv("TSFUSE_FUZZ_ITERATIONS");
  return v && *v ? std::atoll(v) : dflt;
}

std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 32 && c < 127) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

TEST(ExprFuzz, SeedsAreValid) {
  for (const std::string& s : tsfuse_fuzz::seedExpressions()) {
    bool accepted = false;
    EXPECT_EQ(tsfuse_fuzz::checkExprText(s, &accepted), "") << s;
    EXPECT_TRUE(accepted) << s;
  }
}

// Regressions found by this fuzzer.
TEST(ExprFuzz, HugeReferencesAreRejected) {
  // $4294967296 used to wrap to $0 when counting operands: a one-operand call then read
  // operands[4294967296].
  for (const char* e : {"v1: abs($4294967296)", "v1: abs($2147483647)", "v1: add($0, $4294967297)",
                        "v1: abs($0); abs(%4294967296)", "v1: abs($9223372036854775807)"}) {
    SCOPED_TRACE(e);
    EXPECT_THROW(tsfuse::Expr::parse(e), c10::Error);
    EXPECT_EQ(tsfuse_fuzz::checkExprText(e), "");
    EXPECT_NE(errorOf([&] { tsfuse::pairwise({at::ones({2})}, e); }).find("tsfuse expr"), std::string::npos);
  }
  // Expressions built in code are validated too.
  tsfuse::Expr e;
  e.numInputs = 1;
  e.instrs.push_back({tsfuse::Op::Abs, {tsfuse::Arg::input(int64_t(1) << 32)}});
  EXPECT_THROW(e.validate(), c10::Error);
  e.instrs[0].args[0] = tsfuse::Arg::input(-1);
  EXPECT_THROW(e.validate(), c10::Error);
}

TEST(ExprFuzz, DecoderHoldsOnMutatedInputs) {
  const int64_t n = iterations(100000);
  std::mt19937_64 rng(20261122);
  int64_t accepted = 0;
  for (int64_t k = 0; k < n; ++k) {
    std::string text = tsfuse_fuzz::mutate(rng);
    bool ok = false;
    std::string failure = tsfuse_fuzz::checkExprText(text, &ok);
    ASSERT_EQ(failure, "") << "input #" << k << ": '" << printable(text) << "'";
    accepted += ok;
  }
  // The mutator must reach both outcomes, or the test proves little.
  EXPECT_GT(accepted, n / 100);
  EXPECT_LT(accepted, n - n / 100);
  std::printf("[ fuzz ] %lld inputs, %lld accepted\n", static_cast<long long>(n), static_cast<long long>(accepted));
}

// The fused ops on accepted mutants with small random operands: a result with eager's dtype and
// shape, or a c10::Error — exactly when eager raises. Never a crash (the ASan build runs this).
TEST(ExprFuzz, FusedOpsHoldOnAcceptedMutants) {
  const int64_t want = iterations(100000) / 50;  // accepted expressions to run
  std::mt19937_64 rng(20261123);
  Gen g(77);
  const std::vector<at::ScalarType> dtypes = {at::kFloat, at::kDouble, at::kLong, at::kInt, at::kBool, at::kByte};
  int64_t ran = 0, raised = 0;
  for (int64_t k = 0; ran < want && k < want * 1000; ++k) {
    std::string text = tsfuse_fuzz::mutate(rng);
    tsfuse::Expr e;
    try {
      e = tsfuse::Expr::parse(text);
    } catch (const c10::Error&) {
      continue;
    }
    if (e.numInputs > 4) continue;
    ++ran;
    std::vector<at::Tensor> ops;
    for (int i = 0; i < e.numInputs; ++i) {
      std::vector<int64_t> sizes;
      int rank = static_cast<int>(g.randint(0, 3));
      for (int d = 0; d < rank; ++d) sizes.push_back(g.coin(0.3) ? 1 : g.randint(0, 5));
      ops.push_back(g.tensor(sizes, dtypes[g.randint(0, dtypes.size() - 1)], kAllSpecials));
    }
    SCOPED_TRACE("input #" + std::to_string(k) + ": '" + printable(text) + "'");
    std::string eagerErr, fusedErr;
    at::Tensor ref, got;
    try {
      ref = tsfuse::evalAten(e, ops);
    } catch (const std::exception& err) {
      eagerErr = firstLine(err.what());
    }
    const bool reduce = g.coin(0.3);
    if (reduce && ref.defined()) {
      try {
        ref = at::sum(ref);
      } catch (const std::exception& err) {
        eagerErr = firstLine(err.what());
        ref = at::Tensor();
      }
    }
    fusedErr = errorOf([&] { got = reduce ? tsfuse::reduce(ops, text, "sum") : tsfuse::pairwise(ops, text); });
    // Non-c10 exceptions only where eager raises the same (ATen's scalar conversion check does).
    if (fusedErr.find("<non-c10") == 0) EXPECT_EQ(fusedErr, "<non-c10 exception: " + eagerErr + ">");
    EXPECT_EQ(eagerErr.empty(), fusedErr.empty()) << "eager: " << eagerErr << " | tsfuse: " << fusedErr;
    if (!eagerErr.empty()) {
      ++raised;
      continue;
    }
    if (ref.defined() && got.defined()) {
      EXPECT_EQ(ref.scalar_type(), got.scalar_type());
      EXPECT_EQ(ref.sizes(), got.sizes());
    }
  }
  EXPECT_EQ(ran, want);
  std::printf("[ fuzz ] %lld accepted expressions run, %lld raised in eager and in tsfuse\n",
              static_cast<long long>(ran), static_cast<long long>(raised));
}

}  // namespace

}  // namespace reliability_expr_fuzz_test
