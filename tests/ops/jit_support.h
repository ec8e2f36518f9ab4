// Helpers of the compiled-kernel tests (jit_test.cpp, jit_extremum_test.cpp): a fused op run with
// the compiled kernels and with the interpreter, and random tile programs over the ops the code
// generator emits.
#pragma once

#include "test_util.h"

#include "kernels/backends/cpu/jit/jit.h"

#include <functional>
#include <random>

namespace tsfuse_test {

namespace jit = tsfuse::cpu::jit;

// Under valgrind (the jit_memcheck ctest sets TSFUSE_MEMCHECK=1) ATen's own kernels do not give
// their native bits (its CPU-capability dispatch and valgrind's FP emulation differ from the
// CPU's), so the random-program tests there compare compiled with interpreted only: the point of
// that run is every load and store of the generated code.
inline bool underMemcheck() {
  const char* v = std::getenv("TSFUSE_MEMCHECK");
  return v && std::string(v) == "1";
}

inline bool haveJit() {
  JitOn on(true);
  return jit::enabled();
}

// Runs a fused op with the compiled kernels on, then with the interpreter: `check` (the op against
// eager; skipped where null) must hold both times and `run`'s two results must be the same bits.
// `ran`: whether the compiled kernels ran.
struct BothRuns {
  ::testing::AssertionResult result = ::testing::AssertionSuccess();
  bool ran = false;
};
inline BothRuns runBoth(const std::function<::testing::AssertionResult()>& check,
                        const std::function<at::Tensor()>& run, const std::string& what) {
  BothRuns b;
  at::Tensor withJit, without;
  {
    JitOn on(true);
    const int64_t before = jit::tilesRun();
    if (check && !(b.result = check())) {
      b.result << "\n  (compiled kernels on)";
      return b;
    }
    withJit = run();
    b.ran = jit::tilesRun() > before;
  }
  {
    JitOn off(false);
    if (check && !(b.result = check())) {
      b.result << "\n  (interpreter)";
      return b;
    }
    without = run();
  }
  b.result = sameTensor(without, withJit, true);
  if (!b.result) b.result << "\n  compiled vs interpreted: " << what;
  return b;
}

// runBoth, and the compiled kernels must have run (`compiled`) or not.
inline ::testing::AssertionResult expectBoth(const BothRuns& b, bool compiled, const std::string& what) {
  if (!b.result) return b.result;
  if (b.ran != compiled)
    return ::testing::AssertionFailure() << "compiled kernels " << (b.ran ? "ran" : "did not run") << " for " << what;
  return ::testing::AssertionSuccess();
}

// A reduction through both paths (runBoth), each against eager.
inline BothRuns reduceBoth(const std::string& expr, const std::vector<at::Tensor>& ops, const EagerFn& eager,
                           const ReduceArgs& a, CheckOpts o, const std::string& what) {
  return runBoth([&] { return checkReduce(expr, ops, eager, a, o); },
                 [&] { return tsfuse::reduce(ops, expr, a.reduction, a.dim, a.keepdim, a.dtype); }, what);
}

// reduceBoth, and the compiled kernels must have run (`compiled`) or not.
inline ::testing::AssertionResult checkBoth(const std::string& expr, const std::vector<at::Tensor>& ops,
                                            const EagerFn& eager, const ReduceArgs& a, bool compiled,
                                            CheckOpts o = {}) {
  const std::string what = expr + " on " + describeOperands(ops);
  return expectBoth(reduceBoth(expr, ops, eager, a, o, what), compiled, what);
}

// max/min with indices over `dim` through both paths (runBoth): the values and indices bit for bit
// against at::max/at::min over eager's value, and compiled against interpreted.
inline BothRuns extremaBoth(const std::string& expr, const std::vector<at::Tensor>& ops, const EagerFn& eager,
                            const std::string& red, int64_t dim, const std::string& what) {
  at::Tensor values, indices;
  auto run = [&] {
    std::tie(values, indices) = tsfuse::reduceWithIndices(ops, expr, red, dim);
    return at::cat({values.to(at::kDouble).flatten(), indices.to(at::kDouble).flatten()});
  };
  auto check = [&]() -> ::testing::AssertionResult {
    run();
    auto [wv, wi] = red == "max" ? at::max(eager(ops), dim) : at::min(eager(ops), dim);
    auto r = sameTensor(wv, values, /*exact=*/true);
    return r ? sameTensor(wi, indices, /*exact=*/true) : r;
  };
  return runBoth(check, run, what);
}

// Random programs: n instructions over numInputs float operands, a float or bool result.
struct ProgramGen {
  std::mt19937_64 rng;
  explicit ProgramGen(uint64_t seed) : rng(seed) {}
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); }

  std::string make(int numInputs, bool f64, bool boolResult) {
    std::vector<std::string> floats, bools, instrs;
    for (int i = 0; i < numInputs; ++i) floats.push_back("$" + std::to_string(i));
    const char* lits[] = {"0", "1", "-0.5", "2.5", "inf", "nan", "-3"};
    auto fv = [&] { return floats[pick(static_cast<int>(floats.size()))]; };    // a tensor value
    auto f = [&] { return pick(5) == 0 ? std::string(lits[pick(7)]) : fv(); };  // or a literal
    auto b = [&] { return bools[pick(static_cast<int>(bools.size()))]; };
    auto emit = [&](const std::string& ins, bool isBool) {
      (isBool ? bools : floats).push_back("%" + std::to_string(instrs.size()));
      instrs.push_back(ins);
    };
    const char* bin[] = {"add", "sub", "mul", "div", "minimum", "maximum"};
    const char* cmp[] = {"lt", "le", "gt", "ge", "eq", "ne"};
    const char* logic[] = {"logical_and", "logical_or", "logical_xor", "eq", "ne"};
    const int n = 2 + pick(9);
    for (int k = 0; k < n; ++k) {
      switch (bools.empty() ? pick(6) : pick(10)) {
        case 0:
        case 1:
        case 2:
          emit(std::string(bin[pick(6)]) + "(" + fv() + ", " + f() + ")", false);
          break;
        case 3:
          emit(std::string(pick(2) ? "abs(" : "neg(") + fv() + ")", false);
          break;
        case 4: {
          const bool lo = pick(2), hi = !lo || pick(2);
          emit("clamp(" + fv() + ", " + (lo ? "-1" : "None") + ", " + (hi ? "1.5" : "None") + ")", false);
          break;
        }
        case 5:
          emit(std::string(cmp[pick(6)]) + "(" + fv() + ", " + f() + ")", true);
          break;
        case 6:
          emit("where(" + b() + ", " + fv() + ", " + fv() + ")", false);
          break;
        case 7:
          emit(std::string(logic[pick(5)]) + "(" + b() + ", " + b() + ")", true);
          break;
        case 8:
          emit("logical_not(" + b() + ")", true);
          break;
        default:
          if (pick(2))
            emit("to(" + b() + (f64 ? ", float64)" : ", float32)"), false);
          else
            emit("to(" + fv() + ", bool)", true);
          break;
      }
    }
    // The result, of the requested kind, from the newest values (so most of the program is used).
    if (boolResult) {
      const std::string prev = bools.empty() ? "" : b();
      emit("gt(" + floats.back() + ", 0)", true);
      if (!prev.empty()) emit("logical_xor(" + prev + ", " + bools.back() + ")", true);
    } else {
      emit("add(" + floats.back() + ", " + fv() + ")", false);
    }
    std::string e = "v1: ";
    for (size_t k = 0; k < instrs.size(); ++k) e += (k ? "; " : "") + instrs[k];
    return e;
  }
};

// Operands of a random fold over dim 0 for `expr` (numInputs of them drawn): [R, N, 1] (uniform
// along the lanes), [R, 1, M] / [R, N, M] (contiguous) or [] (0-dim); operand 0 is [R, 1, M], so
// the lanes run along M (a vertical fold); operands past the last one `expr` reads are dropped.
inline std::vector<at::Tensor> verticalFoldOperands(ProgramGen& pg, Gen& g, int numInputs, at::ScalarType dt,
                                                    const std::string& expr) {
  const int64_t rows = 1 + pg.pick(40), nOut = 1 + pg.pick(9), m = 16 + pg.pick(60);
  std::vector<at::Tensor> ops;
  for (int k = 0; k < numInputs; ++k) {
    switch (pg.pick(4)) {
      case 0:
        ops.push_back(g.tensor({rows, nOut, 1}, dt, kAllSpecials));
        break;
      case 1:
        ops.push_back(g.tensor({rows, 1, m}, dt, kAllSpecials));
        break;
      case 2:
        ops.push_back(g.tensor({rows, nOut, m}, dt, kAllSpecials));
        break;
      default:
        ops.push_back(g.tensor({}, dt, kAllSpecials));
        break;
    }
  }
  ops[0] = g.tensor({rows, 1, m}, dt, kAllSpecials);
  ops.resize(tsfuse::Expr::parse(expr).numInputs);
  return ops;
}

// $0 - $1 + ($2 - $3) + ... over `pairs` pairs of operands, negated, or compared with 0: an
// expression reading 2 * pairs operands (past the pointer registers from 12 on).
inline std::string sumOfDifferences(int pairs, bool compare) {
  auto sub = [](int i) { return "sub($" + std::to_string(2 * i) + ", $" + std::to_string(2 * i + 1) + "); "; };
  std::string e = "v1: " + sub(0);
  int sum = 0, next = 1;  // instruction indices: the running sum, the next result
  for (int i = 1; i < pairs; ++i) {
    e += sub(i) + "add(%" + std::to_string(sum) + ", %" + std::to_string(next) + "); ";
    sum = next + 1;
    next += 2;
  }
  return e + (compare ? "gt(%" : "neg(%") + std::to_string(sum) + (compare ? ", 0)" : ")");
}
inline at::Tensor sumOfDifferencesEager(const std::vector<at::Tensor>& o, bool compare) {
  at::Tensor s = o[0] - o[1];
  for (size_t i = 1; 2 * i < o.size(); ++i) s = s + (o[2 * i] - o[2 * i + 1]);
  return compare ? s > 0 : -s;
}

}  // namespace tsfuse_test
