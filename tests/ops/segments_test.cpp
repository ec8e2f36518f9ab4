// Epilogues run as compiled runs between their MKL routine calls and interpreted instructions
// (kernels/backends/cpu/jit/segments.h), behind a compiled vertical reduction: bit for bit the
// interpreter's and eager's, for runs before, between and after routines, a run cut where a later
// step reads its inner value, an ATen op with no routine, uniform and contiguous operands, several
// routines, NaN/inf inputs; and the named case it declines (nothing compiled), which keeps the
// interpreter's bits.
#include "jit_support.h"

#include "kernels/backends/cpu/jit/segments.h"
#include "kernels/backends/cpu/tile_eval.h"

#include <ATen/Parallel.h>
#include "tsfuse/ops.h"

namespace ops_segments_test {

namespace {

using tsfuse_test::Gen;
using tsfuse_test::JitOn;
using tsfuse_test::sameTensor;

struct Case {
  const char* name;
  std::string epilogue;
  // eager: the reduced value r [N, M] and the operands b [M], c [1] (uniform)
  std::function<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&)> eager;
  bool segmented;
  bool readsB, readsC;  // the epilogue's $1, $2: b then c, those it reads
};

TEST(Segments, EpiloguesAroundRoutinesAreEagersBits) {
  tsfuse_test::ReductionsNotUnrolled paths;  // (a few values per output)
  Gen g(21);
  const std::vector<Case> cases = {
      {"run, routine, run", "v1: mul($0, -2.0); exp(%0); mul(%1, $1)",
       [](auto& r, auto& b, auto&) { return at::exp(r * -2.0) * b; }, true, true, false},
      {"a routine first and last", "v1: sqrt($0); add(%0, $1); log(%1)",
       [](auto& r, auto&, auto& c) { return at::log(at::sqrt(r) + c); }, true, false, true},
      {"two routines in a row, then a run over both and a uniform operand",
       "v1: exp($0); tanh(%0); add(%1, %0); mul(%2, $1)",
       [](auto& r, auto&, auto& c) {
         at::Tensor e = at::exp(r);
         return (at::tanh(e) + e) * c;
       },
       true, false, true},
      {"native only", "v1: mul($0, $1); add(%0, $2); neg(%1)", [](auto& r, auto& b, auto& c) { return -(r * b + c); },
       true, true, true},
      {"a run's inner value read after a routine: the run is cut there",
       "v1: mul($0, 0.5); add(%0, $1); exp(%1); mul(%2, %0)",
       [](auto& r, auto&, auto& c) {
         at::Tensor h = r * 0.5;
         return at::exp(h + c) * h;
       },
       true, false, true},
      {"an ATen op without a routine, through the interpreter between runs",
       "v1: mul($0, 0.5); hypot(%0, $1); add(%1, %0); sqrt(%2)",
       [](auto& r, auto& b, auto&) {
         at::Tensor h = r * 0.5;
         return at::sqrt(at::hypot(h, b) + h);
       },
       true, true, false},
      {"a routine alone", "v1: exp($0)", [](auto& r, auto&, auto&) { return at::exp(r); }, true, false, false},
      {"declined: neither a routine nor a run that compiles", "v1: hypot($0, $1)",
       [](auto& r, auto& b, auto&) { return at::hypot(r, b); }, false, true, false},
  };
  for (const Case& k : cases)
    for (auto [n, m] : std::vector<std::pair<int64_t, int64_t>>{{7, 16}, {33, 700}, {4, 1500}}) {
      at::Tensor x = g.tensor({n, 1, 3}, at::kFloat, tsfuse_test::kNaNInf), y = g.tensor({m, 3}, at::kFloat);
      at::Tensor b = g.tensor({m}, at::kFloat), c = g.tensor({1}, at::kFloat);
      std::vector<at::Tensor> ops{x, y};
      if (k.readsB) ops.push_back(b);
      if (k.readsC) ops.push_back(c);
      const at::Tensor r = ((x - y) * (x - y)).sum(2);
      const at::Tensor want = k.eager(r, b, c);
      const std::string what = std::string(k.name) + ", " + std::to_string(n) + " x " + std::to_string(m);
      auto fused = [&] {
        return tsfuse::reduce(ops, "v1: sub($0, $1); mul(%0, %0)", "sum", std::vector<int64_t>{2}, false, std::nullopt,
                              k.epilogue);
      };
      const int64_t before = tsfuse::cpu::jit::segmentedProgramsMade();
      at::Tensor compiled, interpreted;
      {
        JitOn on(true);
        compiled = fused();
      }
      EXPECT_EQ(tsfuse::cpu::jit::segmentedProgramsMade() > before, k.segmented && tsfuse_test::haveJit()) << what;
      {
        JitOn off(false);
        interpreted = fused();
      }
      EXPECT_TRUE(sameTensor(want, compiled, /*exact=*/true)) << what;
      EXPECT_TRUE(sameTensor(interpreted, compiled, /*exact=*/true)) << what;
    }
}

// A map whose last step is a routine over a compiled run's value (a distance's sqrt, a kernel's
// exp) calls it once over runs of tiles, in place in the output: eager's bits on row tiles (a row
// of several tiles, rows that end a run early), linear tiles (rows shorter than a row tile),
// NaN/inf and underflowing exp arguments, one thread and two. A routine with a run after it is
// not deferred, and gives the same bits.
TEST(Segments, MapsDeferTheirTrailingRoutineWithEagersBits) {
  Gen g(22);
  struct MapCase {
    const char* expr;
    std::function<at::Tensor(const at::Tensor&, const at::Tensor&)> eager;
    bool deferred;
  };
  const std::vector<MapCase> cases = {
      {"v1: sub($0, $1); mul(%0, %0); clamp(%1, 1e-12, None); sqrt(%2)",
       [](auto& x, auto& y) { return at::sqrt(at::clamp((x - y) * (x - y), 1e-12)); }, true},
      {"v1: sub($0, $1); mul(%0, -40.0); exp(%1)", [](auto& x, auto& y) { return at::exp((x - y) * -40.0); }, true},
      {"v1: sub($0, $1); exp(%0); mul(%1, $1)", [](auto& x, auto& y) { return at::exp(x - y) * y; }, false},
  };
  const int threads = at::get_num_threads();
  for (const MapCase& k : cases)
    for (auto [n, m] : std::vector<std::pair<int64_t, int64_t>>{{3, 1500}, {70, 700}, {300, 9}, {1, 1}})
      for (int t : {1, 2}) {
        at::set_num_threads(t);
        at::Tensor x = g.tensor({n, 1}, at::kFloat, tsfuse_test::kNaNInf), y = g.tensor({m}, at::kFloat);
        const std::string what = std::string(k.expr) + ", " + std::to_string(n) + " x " + std::to_string(m) +
                                 ", threads " + std::to_string(t);
        const int64_t before = tsfuse::cpu::deferredRoutineRuns();
        at::Tensor got;
        {
          JitOn on(true);
          got = tsfuse::pairwise({x, y}, k.expr);
        }
        EXPECT_TRUE(sameTensor(k.eager(x, y), got, /*exact=*/true)) << what;
        EXPECT_EQ(tsfuse::cpu::deferredRoutineRuns() > before, k.deferred && tsfuse_test::haveJit()) << what;
      }
  at::set_num_threads(threads);
}

}  // namespace

}  // namespace ops_segments_test
