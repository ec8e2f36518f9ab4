// Shared helpers of the op tests (tests/ops/*.cpp) and the IR tests (via tests/ir_util.h):
// compare a tsfuse result with the eager reference (same dtype, sizes, strides, values; NaN
// positions; bit patterns), compare error messages, and generate seeded random inputs.
#pragma once

#include "kernels/runtime/chain.h"
#include "kernels/backends/cpu/jit/jit.h"
#include "kernels/backends/slabs.h"
#include "kernels/runtime/eager_order.h"
#include "kernels/runtime/small_reduction.h"
#include "kernels/ir/expr.h"
#include "tsfuse/ops.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/CPUAllocator.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace tsfuse_test {

inline std::string firstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

// Message (first line, or `wholeMessage`, no backtrace) of the c10::Error that `f` throws; ""
// when it does not throw; "<non-c10 exception: ...>" for other exceptions.
inline std::string errorOf(const std::function<void()>& f, bool wholeMessage = false) {
  try {
    f();
  } catch (const c10::Error& e) {
    return wholeMessage ? e.what_without_backtrace() : firstLine(e.what_without_backtrace());
  } catch (const std::exception& e) {
    return std::string("<non-c10 exception: ") + e.what() + ">";
  }
  return "";
}

inline std::string describeTensor(const at::Tensor& t) {
  std::ostringstream os;
  os << t.scalar_type() << t.sizes() << " strides " << t.strides();
  return os.str();
}

// Up to `show` positions where mask is true, as "[i,j]: eager=... tsfuse=..." lines.
inline std::string mismatches(const at::Tensor& e, const at::Tensor& a, const at::Tensor& mask, int show = 5) {
  std::ostringstream os;
  at::Tensor idx = mask.nonzero();
  os << idx.size(0) << " of " << mask.numel() << " elements differ";
  at::Tensor ed = e.to(at::kDouble), ad = a.to(at::kDouble);
  for (int64_t k = 0; k < idx.size(0) && k < show; ++k) {
    std::vector<int64_t> pos;
    for (int64_t d = 0; d < idx.size(1); ++d) pos.push_back(idx[k][d].item<int64_t>());
    at::Tensor ev = ed, av = ad;
    for (int64_t p : pos) {
      ev = ev[p];
      av = av[p];
    }
    char buf[128];
    std::snprintf(buf, sizeof buf, "eager=%.9g tsfuse=%.9g", ev.item<double>(), av.item<double>());
    os << "\n    at " << at::IntArrayRef(pos) << ": " << buf;
  }
  return os.str();
}

// Same dtype, sizes, strides; values equal (NaN positions equal, NaN == NaN) for non-float
// outputs or when `exact` (then bit patterns, so -0.0 != 0.0), else allclose(rtol, atol).
inline ::testing::AssertionResult sameTensor(const at::Tensor& expected, const at::Tensor& actual, bool exact,
                                             double rtol = 1e-5, double atol = 1e-6) {
  if (expected.scalar_type() != actual.scalar_type())
    return ::testing::AssertionFailure() << "dtype: eager " << expected.scalar_type() << " vs tsfuse "
                                         << actual.scalar_type();
  if (expected.sizes() != actual.sizes())
    return ::testing::AssertionFailure() << "sizes: eager " << expected.sizes() << " vs tsfuse " << actual.sizes();
  if (expected.strides() != actual.strides())
    return ::testing::AssertionFailure() << "strides: eager " << expected.strides() << " vs tsfuse " << actual.strides()
                                         << " (sizes " << expected.sizes() << ")";
  if (expected.numel() == 0) return ::testing::AssertionSuccess();
  at::Tensor e = expected.contiguous(), a = actual.contiguous();
  if (at::isFloatingType(e.scalar_type())) {
    at::Tensor en = e.isnan(), an = a.isnan();
    if (!at::equal(en, an))
      return ::testing::AssertionFailure() << "NaN positions differ: " << mismatches(e, a, en != an);
    at::Tensor ez = at::where(en, at::zeros_like(e), e), az = at::where(an, at::zeros_like(a), a);
    if (exact) {
      // Bit patterns: distinguishes -0.0 from 0.0.
      at::ScalarType bits = e.element_size() == 4 ? at::kInt : e.element_size() == 8 ? at::kLong : at::kShort;
      at::Tensor diff = ez.view(bits) != az.view(bits);
      if (diff.any().item<bool>())
        return ::testing::AssertionFailure() << "values differ bitwise: " << mismatches(e, a, diff)
                                             << (at::equal(ez, az) ? " (only the sign of zero)" : "");
      return ::testing::AssertionSuccess();
    }
    at::Tensor ed = ez.to(at::kDouble), ad = az.to(at::kDouble);
    at::Tensor bad = at::isclose(ed, ad, rtol, atol, /*equal_nan=*/false).logical_not();
    if (bad.any().item<bool>())
      return ::testing::AssertionFailure() << "values differ beyond rtol=" << rtol << ": " << mismatches(e, a, bad);
    return ::testing::AssertionSuccess();
  }
  if (!at::equal(e, a)) return ::testing::AssertionFailure() << "values differ: " << mismatches(e, a, e != a);
  return ::testing::AssertionSuccess();
}

// The eager reference of an expression: its instructions evaluated one by one with the ATen ops
// they name, written out by each test; this helper only checks the fused op against it.
inline at::Tensor eagerReduce(const at::Tensor& v, const std::string& reduction,
                              std::optional<std::vector<int64_t>> dim, bool keepdim,
                              std::optional<c10::ScalarType> dtype) {
  at::OptionalIntArrayRef d;
  if (dim) d = at::IntArrayRef(*dim);
  if (reduction == "sum") return at::sum(v, d, keepdim, dtype);
  if (reduction == "mean") return at::mean(v, d, keepdim, dtype);
  if (reduction == "prod") {
    if (!dim) return at::prod(v, dtype);
    TORCH_CHECK(dim->size() == 1, "test: prod takes one dim");
    return at::prod(v, (*dim)[0], keepdim, dtype);
  }
  if (reduction == "amax:index" || reduction == "amin:index") {  // max/min(dim)'s values
    TORCH_CHECK(dim && dim->size() == 1, "test: max/min(dim) take one dim");
    return std::get<0>(reduction == "amax:index" ? at::max(v, (*dim)[0], keepdim) : at::min(v, (*dim)[0], keepdim));
  }
  if (reduction == "amax") return at::amax(v, dim ? at::IntArrayRef(*dim) : at::IntArrayRef{}, keepdim);
  if (reduction == "amin") return at::amin(v, dim ? at::IntArrayRef(*dim) : at::IntArrayRef{}, keepdim);
  if (reduction == "any") return at::any(v, d, keepdim);
  if (reduction == "all") return at::all(v, d, keepdim);
  if (reduction == "argmax" || reduction == "argmin") {
    std::optional<int64_t> one;
    if (dim) {
      TORCH_CHECK(dim->size() == 1, "test: arg reductions take one dim");
      one = (*dim)[0];
    }
    return reduction == "argmax" ? at::argmax(v, one, keepdim) : at::argmin(v, one, keepdim);
  }
  if (reduction == "logsumexp") {
    std::vector<int64_t> all(static_cast<size_t>(v.dim()));
    for (int64_t k = 0; k < v.dim(); ++k) all[static_cast<size_t>(k)] = k;
    return at::logsumexp(v, dim ? at::IntArrayRef(*dim) : at::IntArrayRef(all), keepdim);
  }
  // "<name>:<number>": a norm's order, var/std's correction.
  const size_t colon = reduction.find(':');
  const std::string name = reduction.substr(0, colon);
  TORCH_CHECK(colon != std::string::npos && (name == "norm" || name == "var" || name == "std"),
              "test: unknown reduction ", reduction);
  const double p = std::stod(reduction.substr(colon + 1));
  if (name == "norm") return at::linalg_vector_norm(v, p, d, keepdim, dtype);
  return name == "var" ? at::var(v, d, c10::Scalar(p), keepdim) : at::std(v, d, c10::Scalar(p), keepdim);
}

enum Special : int { kNaN = 1, kInf = 2, kSignedZero = 4, kNaNInf = 3, kAllSpecials = 7 };

// Seeded random tensors of any dtype, with optional specials (NaN, +-inf, -0.0) for floats.
struct Gen {
  explicit Gen(uint64_t seed) : gen(at::make_generator<at::CPUGeneratorImpl>(seed)), rng(seed) {}
  at::Generator gen;
  std::mt19937_64 rng;

  int64_t randint(int64_t lo, int64_t hiInclusive) {
    return std::uniform_int_distribution<int64_t>(lo, hiInclusive)(rng);
  }
  bool coin(double p = 0.5) { return std::bernoulli_distribution(p)(rng); }

  // specials (floats only): a mask of kNaN, kInf, kSignedZero; each kind replaces ~1/8 of the values.
  at::Tensor tensor(at::IntArrayRef sizes, at::ScalarType t, int specials = 0) {
    at::Tensor x;
    if (t == at::kBool) {
      x = at::randint(0, 2, sizes, gen, at::kLong).to(at::kBool);
    } else if (at::isFloatingType(t)) {
      x = (at::randn(sizes, gen, at::kDouble) * 3).to(t);
      if (specials && x.numel() > 0) {
        at::Tensor pick = at::randint(0, 8, sizes, gen, at::kLong);
        double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
        auto put = [&](int64_t k, double v) { x = at::where(pick == k, at::scalar_tensor(v, t), x); };
        if (specials & kNaN) put(0, nan);
        if (specials & kInf) {
          put(1, inf);
          put(2, -inf);
        }
        if (specials & kSignedZero) {
          put(3, -0.0);
          put(4, 0.0);
        }
      }
    } else if (t == at::kByte) {
      x = at::randint(0, 256, sizes, gen, at::kLong).to(t);
    } else {
      x = at::randint(-50, 50, sizes, gen, at::kLong).to(t);
    }
    return x;
  }

  // The same values laid out non-contiguously: a transposed copy, a step-2 slice of a larger
  // tensor, or (for size-1 dims) an expanded stride-0 view. Values are unchanged.
  at::Tensor layout(const at::Tensor& x, int kind) {
    if (x.dim() == 0 || x.numel() == 0) return x;
    switch (kind % 4) {
      case 0:
        return x;
      case 1: {  // transposed storage
        if (x.dim() < 2) return layout(x, 2);
        at::Tensor s = x.transpose(0, x.dim() - 1).contiguous();
        at::Tensor v = s.transpose(0, x.dim() - 1);
        return v;
      }
      case 2: {  // step-2 slice along dim 0
        std::vector<int64_t> big(x.sizes().begin(), x.sizes().end());
        big[0] = big[0] * 2;
        at::Tensor b = at::empty(big, x.options());
        b.fill_(0);
        at::Tensor v = b.slice(0, 0, big[0], 2);
        v.copy_(x);
        return v;
      }
      default: {  // expanded: size-1 dims get stride 0 (same sizes, same values)
        std::vector<int64_t> sizes(x.sizes().begin(), x.sizes().end());
        std::vector<int64_t> idx;
        at::Tensor base = x;
        for (int64_t d = 0; d < x.dim(); ++d)
          if (x.size(d) == 1) return x.select(d, 0).unsqueeze(d).expand(x.sizes());
        // No size-1 dim: slice with step along the last dim instead.
        return layout(x, 2);
      }
    }
  }
};

inline std::vector<at::ScalarType> allDtypes() {
  return {at::kFloat, at::kDouble, at::kInt, at::kLong, at::kByte, at::kBool, at::kHalf, at::kBFloat16};
}

// The eager reference of a fused op: the same expression written with ATen ops directly.
using EagerFn = std::function<at::Tensor(const std::vector<at::Tensor>&)>;

// Kernel tests cover every layout, so they let the fused kernels fold float sums of values that
// broadcast nothing too (production runs those with ATen: kernels/runtime/eager_order.h, keepsEagerOrder).
struct AnyReduceOrder {
  bool was = tsfuse::keepsEagerOrder();
  AnyReduceOrder() { tsfuse::setKeepEagerOrder(false); }
  ~AnyReduceOrder() { tsfuse::setKeepEagerOrder(was); }
};

// The compiled CPU kernels (kernels/backends/cpu/jit/jit.h) on or off for a scope.
struct JitOn {
  bool was = tsfuse::cpu::jit::enabled();
  explicit JitOn(bool on) { tsfuse::cpu::jit::setEnabled(on); }
  ~JitOn() { tsfuse::cpu::jit::setEnabled(was); }
};

// The reduction kernels' own paths for a sum or product of a few values per output, not the map
// that folds them (kernels/runtime/small_reduction.h), while it lives.
struct ReductionsNotUnrolled {
  bool was = tsfuse::unrollsSmallReductions();
  ReductionsNotUnrolled() { tsfuse::setUnrollSmallReductions(false); }
  ~ReductionsNotUnrolled() { tsfuse::setUnrollSmallReductions(was); }
};

// Chains and sweeps in slabs of at most 64 stored elements, so every small case runs in many.
class ManySlabs : public ::testing::Test {
 protected:
  void SetUp() override { tsfuse::setChainSlabElements(64); }
  void TearDown() override { tsfuse::setChainSlabElements(tsfuse::kSlabElements / 2); }
};

struct CheckOpts {
  bool exact = true;  // float results bit-identical (else allclose)
  double rtol = 1e-5;
  double atol = 1e-6;
  const char* path = nullptr;  // expected tsfuse::lastPath() after a successful call
};

// The outcome of running one side: a tensor, or the first line of its c10::Error.
struct Outcome {
  at::Tensor value;
  std::string error;
  std::string path;
};

inline Outcome runSide(const std::function<at::Tensor()>& f, bool readPath) {
  Outcome o;
  o.error = errorOf([&] { o.value = f(); });
  if (readPath) o.path = tsfuse::lastPath();
  return o;
}

// Compares tsfuse's outcome with eager's: when eager raises, tsfuse must raise the same message;
// otherwise the same dtype/sizes/strides/values (and, if requested, the expected path).
inline ::testing::AssertionResult compareOutcomes(const Outcome& want, const Outcome& got, const CheckOpts& o) {
  if (!want.error.empty()) {
    if (got.error == want.error) return ::testing::AssertionSuccess();
    auto f = ::testing::AssertionFailure() << "eager raises \"" << want.error << "\" but tsfuse ";
    if (got.error.empty()) return f << "returned " << describeTensor(got.value) << ":\n" << got.value;
    return f << "raises \"" << got.error << "\"";
  }
  if (!got.error.empty())
    return ::testing::AssertionFailure() << "tsfuse raises \"" << got.error << "\" but eager returns "
                                         << describeTensor(want.value);
  auto r = sameTensor(want.value, got.value, o.exact, o.rtol, o.atol);
  if (!r) return r;
  if (o.path && got.path != o.path)
    return ::testing::AssertionFailure() << "tsfuse took the '" << got.path << "' path, expected '" << o.path << "'";
  return ::testing::AssertionSuccess();
}

inline std::string describeOperands(const std::vector<at::Tensor>& ops) {
  std::ostringstream os;
  for (size_t i = 0; i < ops.size(); ++i) os << (i ? ", " : "") << "$" << i << "=" << describeTensor(ops[i]);
  return os.str();
}

// A fused op called as the interpreter calls it: boxed, the operand list moved into the call and
// holding the only handle of each operand (moved in), then the other arguments.
template <class... Args>
at::Tensor callBoxed(const char* op, std::vector<at::Tensor> operands, Args&&... rest) {
  auto handle = c10::Dispatcher::singleton().findSchemaOrThrow(op, "");
  torch::jit::Stack s;
  s.emplace_back(std::move(operands));
  (s.emplace_back(std::forward<Args>(rest)), ...);
  handle.callBoxed(&s);
  return s.at(0).toTensor();
}

// tsfuse::pairwise called boxed, with `donated` operands: `ops` is the list's only holder where the
// caller moves it in (an initializer list would keep a copy of each operand alive).
inline at::Tensor pairwiseBoxed(std::vector<at::Tensor> ops, const std::string& expr,
                                std::vector<int64_t> donated = {}) {
  return callBoxed("tsfuse::pairwise", std::move(ops), expr, std::move(donated));
}

// Whether an operand may take an elementwise result like `out` (kernels/runtime/donation.h, takeDonated).
inline bool donatable(const at::Tensor& t, const at::Tensor& out) {
  return t.defined() && (t.is_cpu() || t.is_cuda()) && !t.is_conj() && !t.is_neg() && !t.requires_grad() &&
         t.scalar_type() == out.scalar_type() && t.sizes() == out.sizes() && t.strides() == out.strides() &&
         t.is_non_overlapping_and_dense();
}

// tsfuse::pairwise with operand i donated (a copy of it, so `ops` is kept). Returns the result and
// whether it was written over the operand's memory.
inline std::pair<at::Tensor, bool> pairwiseDonating(std::vector<at::Tensor> ops, const std::string& expr, size_t i) {
  ops[i] = ops[i].clone();  // preserves a dense layout
  const void* memory = ops[i].data_ptr();
  at::Tensor out = pairwiseBoxed(std::move(ops), expr, {static_cast<int64_t>(i)});
  return {out, out.data_ptr() == memory};
}

// Compares tsfuse::pairwise with eager; where eager's result is laid out like an operand, once more
// with that operand donated, which must then hold the same result.
inline ::testing::AssertionResult checkPairwise(const std::string& expr, const std::vector<at::Tensor>& ops,
                                                const EagerFn& eager, const CheckOpts& o = {}) {
  Outcome want = runSide([&] { return eager(ops); }, false);
  Outcome got = runSide([&] { return tsfuse::pairwise(ops, expr); }, true);
  auto r = compareOutcomes(want, got, o);
  if (r && want.error.empty() && got.value.numel() > 0) {
    for (size_t i = 0; i < ops.size(); ++i) {
      if (!donatable(ops[i], want.value)) continue;
      auto [out, tookIt] = pairwiseDonating(ops, expr, i);
      r = sameTensor(want.value, out, o.exact, o.rtol, o.atol);
      // The native path always takes it (the chunked path's single slab computes a new tensor).
      if (r && !tookIt && got.path == "native")
        r = ::testing::AssertionFailure() << "donated operand " << i << " did not take the native result";
      if (!r) r << " (operand " << i << " donated)";
      break;
    }
  }
  if (!r) r << "\n  pairwise(" << expr << ") on " << describeOperands(ops);
  return r;
}

struct ReduceArgs {
  std::string reduction;
  std::optional<std::vector<int64_t>> dim;
  bool keepdim = false;
  std::optional<c10::ScalarType> dtype;
};

inline std::string describeReduce(const ReduceArgs& a) {
  std::ostringstream os;
  os << a.reduction << "(dim=";
  if (a.dim) {
    os << "[";
    for (size_t i = 0; i < a.dim->size(); ++i) os << (i ? ", " : "") << (*a.dim)[i];
    os << "]";
  } else {
    os << "None";
  }
  os << ", keepdim=" << a.keepdim;
  if (a.dtype) os << ", dtype=" << *a.dtype;
  return os.str() + ")";
}

// Eager: the expression's value (eager(ops)), then the ATen reduction.
inline ::testing::AssertionResult checkReduce(const std::string& expr, const std::vector<at::Tensor>& ops,
                                              const EagerFn& eager, const ReduceArgs& a, CheckOpts o = {}) {
  Outcome want = runSide([&] { return eagerReduce(eager(ops), a.reduction, a.dim, a.keepdim, a.dtype); }, false);
  Outcome got = runSide([&] { return tsfuse::reduce(ops, expr, a.reduction, a.dim, a.keepdim, a.dtype); }, true);
  auto r = compareOutcomes(want, got, o);
  if (!r) r << "\n  reduce(" << expr << ") |> " << describeReduce(a) << " on " << describeOperands(ops);
  return r;
}

// Collects failures of many randomized cases and reports a bounded number of them.
struct FailureLog {
  int cases = 0;
  std::vector<std::string> failures;
  void add(const ::testing::AssertionResult& r, const std::string& context = "") {
    ++cases;
    if (!r) failures.push_back(context + r.message());
  }
  ::testing::AssertionResult result(size_t show = 8) const {
    if (failures.empty()) return ::testing::AssertionSuccess() << cases << " cases";
    auto f = ::testing::AssertionFailure()
             << failures.size() << " of " << cases << " cases failed; first " << std::min(show, failures.size()) << ":";
    for (size_t i = 0; i < failures.size() && i < show; ++i) f << "\n[" << i << "] " << failures[i];
    return f;
  }
};

// Counts what it allocates, through c10's default allocator (as a memory profiler would).
struct CountingAllocator final : c10::Allocator {
  int64_t blocks = 0;
  size_t largest = 0;  // the largest block's bytes
  c10::DataPtr allocate(size_t n) override {
    ++blocks;
    largest = std::max(largest, n);
    return c10::GetDefaultCPUAllocator()->allocate(n);
  }
  c10::DeleterFnPtr raw_deleter() const override { return c10::GetDefaultCPUAllocator()->raw_deleter(); }
  void copy_data(void* dest, const void* src, std::size_t count) const override { default_copy_data(dest, src, count); }
};

}  // namespace tsfuse_test
