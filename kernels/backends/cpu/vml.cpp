#include "kernels/backends/cpu/vml.h"

#include "kernels/reference/aten_eval.h"
#include "tsfuse/log.h"

#include <ATen/ATen.h>
#include <ATen/Version.h>
#include <dlfcn.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <type_traits>
#include <mutex>
#include <string>

namespace tsfuse::cpu {
namespace {

// The mode ATen passes: VML_HA | VML_FTZDAZ_OFF | VML_ERRMODE_IGNORE (mkl_vml_defines.h).
constexpr int64_t kAtenMode = 0x2 | 0x140000 | 0x100;

// The smallest argument whose exp is not +0 (ln 2^-150 in float, ln 2^-1075 in double: the
// correctly rounded boundary, where MKL's exp has it; the probes check both sides).
template <typename T>
constexpr T kExpZeroBelow = 0;
template <>
constexpr float kExpZeroBelow<float> = -0x1.9fe368p+6f;
template <>
constexpr double kExpZeroBelow<double> = -0x1.74910d52d3051p+9;
// The smallest float argument whose exp is a normal number (MKL's, and the correctly rounded one).
template <typename T>
constexpr T kExpNormalFrom = kExpZeroBelow<T>;
template <>
constexpr float kExpNormalFrom<float> = -0x1.5d589ep+6f;

struct Entry {
  Op op;
  const char* name;  // MKL's function, after the VMS / VMD prefix
};
// The ops whose ATen CPU kernel is at::vml::v<op>, specialised to MKL for float and double.
constexpr Entry kRoutines[] = {{Op::Exp, "EXP_"},   {Op::Log, "LN_"},   {Op::Sqrt, "SQRT_"}, {Op::Atan, "ATAN_"},
                               {Op::Sin, "SIN_"},   {Op::Cos, "COS_"},  {Op::Tanh, "TANH_"}, {Op::Acos, "ACOS_"},
                               {Op::Asin, "ASIN_"}, {Op::Tan, "TAN_"},  {Op::Log2, "LOG2_"}, {Op::Log10, "LOG10_"},
                               {Op::Erf, "ERF_"},   {Op::Erfc, "ERFC_"}};

// The loaded libtorch_cpu: the library that defines ATen's own functions.
void* torchCpu() {
  static void* handle = []() -> void* {
    Dl_info info{};
    if (!dladdr(reinterpret_cast<void*>(&at::_ops::exp::call), &info) || !info.dli_fname) return nullptr;
    return dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  }();
  return handle;
}

bool enabledByEnvironment() {
  const char* v = std::getenv("TSFUSE_CPU_VML");
  return !(v && (std::string(v) == "0" || std::string(v) == "off" || std::string(v) == "false"));
}

// Probe values: a spread of magnitudes of both signs, the edges of exp's range, subnormals,
// zeros of both signs, infinities and NaN.
at::Tensor probes(c10::ScalarType t) {
  at::Tensor spread =
      at::cat({at::linspace(-120, 120, 4801, at::kDouble), at::exp(at::linspace(-750, 710, 2921, at::kDouble)),
               -at::exp(at::linspace(-750, 710, 2921, at::kDouble))});
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  at::Tensor special =
      at::tensor({0.0,     -0.0,   inf,    -inf,   nan,     1e-45, -1e-45, 1e-38, 1e-310, 88.72, 88.73,
                  -103.97, -87.34, 709.78, 709.79, -745.13, 1.0,   2.0,    42.0,  0.5,    1e30,  -1e30},
                 at::kDouble);
  // exp's +0 boundary (callMklExp) and its neighbours, interleaved with values MKL computes.
  const bool dbl = t == c10::ScalarType::Double;
  const double zeroBelow = dbl ? kExpZeroBelow<double> : kExpZeroBelow<float>;
  at::Tensor edge = at::full({64}, zeroBelow, at::kDouble).to(t);
  for (int64_t i = 1; i < 64; ++i) edge[i] = at::nextafter(edge[i - 1], at::full({}, -1e300, at::kDouble).to(t));
  edge = at::stack({edge, at::full({64}, 0.5, t), -edge.flip(0)}, 1).flatten();
  return at::cat({spread.to(t), special.to(t), edge, -at::exp(at::linspace(-3, 30, 700, at::kDouble)).to(t)})
      .contiguous();
}

// The row of a routine table for `op`, or -1.
template <size_t N>
int indexOf(const Entry (&table)[N], Op op) {
  for (size_t i = 0; i < N; ++i)
    if (table[i].op == op) return static_cast<int>(i);
  return -1;
}

// op(x) as ATen computes it.
at::Tensor atenOf(Op op, const at::Tensor& x) {
  Expr e;
  e.instrs.push_back(Instr{op, {Arg::input(0)}});
  e.numInputs = 1;
  return evalAten(e, {x});
}

// Same bits, NaNs included.
bool sameBits(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() &&
         std::memcmp(a.const_data_ptr(), b.const_data_ptr(), a.numel() * a.element_size()) == 0;
}

// MKL's thread-local thread count (MKL_Set_Num_Threads_Local, by value: it returns the previous
// count, 0 meaning the global one; mkl_set_num_threads_local is the Fortran form, by pointer),
// set to 1 around each call. Inside a parallel region VML would otherwise enter its own OpenMP
// region on every call (mkl_vml_serv_threader: a GOMP_parallel and its futex wake-ups per tile,
// costing more than the tile's work); the elements are independent, so the bits are the same.
using SetLocalThreads = int (*)(int);
SetLocalThreads setLocalThreads() {
  static const SetLocalThreads fn =
      torchCpu() ? reinterpret_cast<SetLocalThreads>(dlsym(torchCpu(), "MKL_Set_Num_Threads_Local")) : nullptr;
  return fn;
}

template <typename T>
void callFortran(FortranVml f, int64_t n, const void* in, void* out) {
  const auto* a = static_cast<const T*>(in);
  auto* r = static_cast<T*>(out);
  for (int64_t done = 0; done < n;) {  // ATen splits the same way beyond INT32_MAX
    const int32_t k = static_cast<int32_t>(std::min<int64_t>(n - done, std::numeric_limits<int32_t>::max()));
    f(&k, a + done, r + done, &kAtenMode);
    done += k;
  }
}

thread_local bool tlsSerial = false;  // a VmlSerialScope holds MKL's count at 1

template <typename T>
void callMkl(const void* fn, double, int64_t n, const void* in, void* out) {
  const SetLocalThreads setLocal = tlsSerial ? nullptr : setLocalThreads();
  const int previous = setLocal ? setLocal(1) : 0;
  callFortran<T>(reinterpret_cast<FortranVml>(const_cast<void*>(fn)), n, in, out);
  if (setLocal) setLocal(previous);
}

// MKL's exp takes its slow path for every argument whose result is not a normal number: 13x a
// normal argument's time where the result is +0, 40x where it is subnormal (a Gaussian kernel's
// far pairs). Below kExpZeroBelow the result is +0 without the call. In float, a subnormal
// result is MKL's double exp of the argument rounded to float (the same bits on every float of
// that band: tests/ops/vml_test.cpp), on MKL's fast double path. A block of arguments where a
// sample finds such arguments is classified in full; its other arguments go to MKL in one call,
// the replaced ones as 0 (its fast path) and overwritten after it. Other blocks go to MKL as they
// are, in runs of a few blocks.
FortranVml mklDoubleExp() {
  static const auto fn = torchCpu() ? reinterpret_cast<FortranVml>(dlsym(torchCpu(), "VMDEXP_")) : nullptr;
  return fn;
}

// SSE2 lanes of T (the x86-64 baseline): the classification of a block's arguments.
template <typename T>
struct Lanes;
#define TSFUSE_SSE_LANES(T, Vec, N, Suffix)                                               \
  template <>                                                                             \
  struct Lanes<T> {                                                                       \
    using V = Vec;                                                                        \
    static constexpr int kN = N;                                                          \
    static V load(const T* p) { return _mm_loadu_##Suffix(p); }                           \
    static V set1(T v) { return _mm_set1_##Suffix(v); }                                   \
    static V less(V a, V b) { return _mm_cmplt_##Suffix(a, b); }                          \
    static V notLess(V a, V b) { return _mm_cmpnlt_##Suffix(a, b); }                      \
    static V both(V a, V b) { return _mm_and_##Suffix(a, b); }                            \
    static uint64_t bits(V m) { return static_cast<uint64_t>(_mm_movemask_##Suffix(m)); } \
  };
TSFUSE_SSE_LANES(float, __m128, 4, ps)
TSFUSE_SSE_LANES(double, __m128d, 2, pd)
#undef TSFUSE_SSE_LANES

// Whether some x[i] (i < k) sampled every kSampleStride-th is below `bound`. A rare argument the
// sample misses goes to MKL with the others (its slow path, the same bits); the far pairs of a
// Gaussian kernel come in runs, which the sample finds at an eighth of a full check's loads.
constexpr int64_t kSampleStride = 8;
template <typename T>
bool sampledBelow(const T* x, int64_t k, T bound) {
  int64_t below = 0;
  for (int64_t i = 0; i < k; i += kSampleStride) below += x[i] < bound;
  return below > 0;
}

template <typename T>
void callMklExp(const void* fn, double arg, int64_t n, const void* in, void* out) {
  using L = Lanes<T>;
  const bool band = std::is_same_v<T, float> && mklDoubleExp();
  const T rare = band ? kExpNormalFrom<T> : kExpZeroBelow<T>;  // arguments below it skip MKL
  const auto rareV = L::set1(rare), zeroV = L::set1(kExpZeroBelow<T>);
  const T* a = static_cast<const T*>(in);
  T* r = static_cast<T*>(out);
  constexpr int64_t kBlock = 512, kWords = kBlock / 64, kRun = 8 * kBlock;
  T args[kBlock];
  uint64_t rareBits[kWords], subBits[kWords];  // bit i: argument i skips MKL / has a subnormal result
  double sub[kBlock];
  int32_t at[kBlock];
  VmlSerialScope serial;  // (MKL's thread count set once, not per block)
  int64_t clean = 0;      // the blocks from `clean` to `start` have no rare argument: one MKL call
  for (int64_t start = 0; start < n; start += kBlock) {
    const int64_t k = std::min(kBlock, n - start);
    const T* x = a + start;
    T* y = r + start;
    if (!sampledBelow(x, k, rare)) {
      if (start + k - clean >= kRun) {  // (its lines are still in cache from the sample)
        callMkl<T>(fn, arg, start + k - clean, a + clean, r + clean);
        clean = start + k;
      }
      continue;
    }
    std::fill(rareBits, rareBits + kWords, 0);
    std::fill(subBits, subBits + kWords, 0);
    int64_t i = 0;
    for (; i + L::kN <= k; i += L::kN) {
      const auto v = L::load(x + i), lt = L::less(v, rareV);
      rareBits[i / 64] |= L::bits(lt) << (i % 64);
      if (band) subBits[i / 64] |= L::bits(L::both(lt, L::notLess(v, zeroV))) << (i % 64);
    }
    for (; i < k; ++i) {
      rareBits[i / 64] |= uint64_t{x[i] < rare} << (i % 64);
      subBits[i / 64] |= uint64_t{band && x[i] < rare && x[i] >= kExpZeroBelow<T>} << (i % 64);
    }
    int64_t rares = 0;
    for (int64_t w = 0; w < kWords; ++w) rares += __builtin_popcountll(rareBits[w]);
    if (clean < start) callMkl<T>(fn, arg, start - clean, a + clean, r + clean);
    clean = start + k;
    // (in and out may be one buffer: everything read from x is read before MKL writes y)
    for (i = 0; i < k; ++i) args[i] = x[i] < rare ? T(0) : x[i];
    int64_t count = 0;
    for (int64_t w = 0; w < kWords; ++w)
      for (uint64_t bitsLeft = subBits[w]; bitsLeft != 0; bitsLeft &= bitsLeft - 1) {
        const int32_t j = static_cast<int32_t>(w * 64 + __builtin_ctzll(bitsLeft));
        sub[count] = static_cast<double>(x[j]);
        at[count++] = j;
      }
    if (rares < k) callMkl<T>(fn, arg, k, args, y);
    for (int64_t w = 0; w < kWords; ++w)
      for (uint64_t bitsLeft = rareBits[w]; bitsLeft != 0; bitsLeft &= bitsLeft - 1)
        y[w * 64 + __builtin_ctzll(bitsLeft)] = T(0);
    if (count == 0) continue;
    // A float subnormal: MKL's double exp rounded to float.
    callMkl<double>(reinterpret_cast<const void*>(mklDoubleExp()), 0.0, count, sub, sub);
    for (int64_t j = 0; j < count; ++j) y[at[j]] = static_cast<T>(sub[j]);
  }
  if (clean < n) callMkl<T>(fn, arg, n - clean, a + clean, r + clean);
}

VmlRoutine mklRoutine(Op op, FortranVml f, bool dbl) {
  if (op == Op::Exp)
    return VmlRoutine(dbl ? &callMklExp<double> : &callMklExp<float>, reinterpret_cast<const void*>(f));
  return VmlRoutine(dbl ? &callMkl<double> : &callMkl<float>, reinterpret_cast<const void*>(f));
}

// ATen's pow for a number exponent e (PowKernel.cpp, pow_tensor_scalar_optimized_kernel through
// cpu_kernel_vec's vectorized loop over a contiguous chunk): SLEEF's pow on two vectors of ATen's
// width per step, e converted to the dtype; then std::pow(x, e) in double on the values left,
// converted back. For a one-value exponent tensor (pow_tensor_tensor_kernel, the exponent
// broadcast into a vector) the same vectors, then std::pow(x, e) in the dtype. One function per
// vector type (V: float/double lanes, under its ISA) and tail.
template <typename T>
T powInDouble(T x, double e) {
  return static_cast<T>(std::pow(static_cast<double>(x), e));
}
template <typename T>
T powInDtype(T x, double e) {
  return std::pow(x, static_cast<T>(e));
}
#define TSFUSE_SLEEF_POW(Name, Isa, T, V, Lanes, LOAD, STORE, SET1, TAIL)                                  \
  __attribute__((target(Isa))) void Name(const void* fn, double e, int64_t n, const void* in, void* out) { \
    using Fn = V (*)(V, V);                                                                                \
    const Fn pow = reinterpret_cast<Fn>(const_cast<void*>(fn));                                            \
    const T* a = static_cast<const T*>(in);                                                                \
    T* r = static_cast<T*>(out);                                                                           \
    const V ev = SET1(static_cast<T>(e));                                                                  \
    int64_t i = 0;                                                                                         \
    for (; i + 2 * (Lanes) <= n; i += 2 * (Lanes)) {                                                       \
      const V lo = pow(LOAD(a + i), ev), hi = pow(LOAD(a + i + (Lanes)), ev);                              \
      STORE(r + i, lo);                                                                                    \
      STORE(r + i + (Lanes), hi);                                                                          \
    }                                                                                                      \
    for (; i < n; ++i) r[i] = TAIL<T>(a[i], e);                                                            \
  }
#define TSFUSE_SLEEF_POWS(Suffix, Isa, T, V, Lanes, LOAD, STORE, SET1)            \
  TSFUSE_SLEEF_POW(pow##Suffix, Isa, T, V, Lanes, LOAD, STORE, SET1, powInDouble) \
  TSFUSE_SLEEF_POW(powTensor##Suffix, Isa, T, V, Lanes, LOAD, STORE, SET1, powInDtype)
TSFUSE_SLEEF_POWS(Float8, "avx2", float, __m256, 8, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_set1_ps)
TSFUSE_SLEEF_POWS(Double4, "avx2", double, __m256d, 4, _mm256_loadu_pd, _mm256_storeu_pd, _mm256_set1_pd)
TSFUSE_SLEEF_POWS(Float16, "avx512f", float, __m512, 16, _mm512_loadu_ps, _mm512_storeu_ps, _mm512_set1_ps)
TSFUSE_SLEEF_POWS(Double8, "avx512f", double, __m512d, 8, _mm512_loadu_pd, _mm512_storeu_pd, _mm512_set1_pd)
#undef TSFUSE_SLEEF_POWS
#undef TSFUSE_SLEEF_POW

// A SLEEF vector function over n values (opt-in fast numerics): whole vectors, then the values
// left in one zero-padded vector, so every value goes through the same code wherever it lies.
#define TSFUSE_SLEEF_UNARY(Name, Isa, T, V, Lanes, LOAD, STORE)                                          \
  __attribute__((target(Isa))) void Name(const void* fn, double, int64_t n, const void* in, void* out) { \
    using Fn = V (*)(V);                                                                                 \
    const Fn f = reinterpret_cast<Fn>(const_cast<void*>(fn));                                            \
    const T* a = static_cast<const T*>(in);                                                              \
    T* r = static_cast<T*>(out);                                                                         \
    int64_t i = 0;                                                                                       \
    for (; i + (Lanes) <= n; i += (Lanes)) STORE(r + i, f(LOAD(a + i)));                                 \
    if (i == n) return;                                                                                  \
    alignas(64) T pad[Lanes] = {};                                                                       \
    std::memcpy(pad, a + i, (n - i) * sizeof(T));                                                        \
    STORE(pad, f(LOAD(pad)));                                                                            \
    std::memcpy(r + i, pad, (n - i) * sizeof(T));                                                        \
  }
TSFUSE_SLEEF_UNARY(sleefFloat8, "avx2", float, __m256, 8, _mm256_loadu_ps, _mm256_storeu_ps)
TSFUSE_SLEEF_UNARY(sleefDouble4, "avx2", double, __m256d, 4, _mm256_loadu_pd, _mm256_storeu_pd)
TSFUSE_SLEEF_UNARY(sleefFloat16, "avx512f", float, __m512, 16, _mm512_loadu_ps, _mm512_storeu_ps)
TSFUSE_SLEEF_UNARY(sleefDouble8, "avx512f", double, __m512d, 8, _mm512_loadu_pd, _mm512_storeu_pd)
#undef TSFUSE_SLEEF_UNARY

// The SLEEF function for each op of kRoutines, sinh, cosh, atanh and expm1 in fast numerics: u10
// (1.0 ulp), sqrt u05. (SLEEF's asinh and acosh leave 4 ulp of ATen's on the probes' large values.)
constexpr Entry kSleefRoutines[] = {{Op::Exp, "exp"},    {Op::Log, "log"},   {Op::Sqrt, "sqrt"}, {Op::Atan, "atan"},
                                    {Op::Sin, "sin"},    {Op::Cos, "cos"},   {Op::Tanh, "tanh"}, {Op::Acos, "acos"},
                                    {Op::Asin, "asin"},  {Op::Tan, "tan"},   {Op::Log2, "log2"}, {Op::Log10, "log10"},
                                    {Op::Erf, "erf"},    {Op::Sinh, "sinh"}, {Op::Cosh, "cosh"}, {Op::Atanh, "atanh"},
                                    {Op::Expm1, "expm1"}};

// SLEEF's routine for `op` in dtype t where fast numerics are on and libtorch_cpu exports it for
// the CPU's width, checked once against the ATen op within 4 ulp (NaN for NaN); else empty.
VmlRoutine sleefRoutine(Op op, c10::ScalarType t) {
  const int index = indexOf(kSleefRoutines, op);
  if (index < 0) return {};
  const bool dbl = t == c10::ScalarType::Double;
  static std::once_flag once[std::size(kSleefRoutines)][2];
  static VmlRoutine routines[std::size(kSleefRoutines)][2];
  std::call_once(once[index][dbl], [&] {
    if (!torchCpu()) return;
    const std::string isa = at::get_cpu_capability();
    if (isa != "AVX2" && isa != "AVX512") return;
    const bool wide = isa == "AVX512";
    const std::string name = std::string("Sleef_") + kSleefRoutines[index].name +
                             (dbl ? (wide ? "d8" : "d4") : (wide ? "f16" : "f8")) + (op == Op::Sqrt ? "_u05" : "_u10");
    const void* f = dlsym(torchCpu(), name.c_str());
    if (!f) {
      TSFUSE_LOG(kernel, info, name, " not in libtorch_cpu: fast numerics keep eager's ", opName(op));
      return;
    }
    const VmlRoutine r(dbl ? (wide ? &sleefDouble8 : &sleefDouble4) : (wide ? &sleefFloat16 : &sleefFloat8), f);
    const at::Tensor x = probes(t);
    at::Tensor got = at::empty_like(x);
    r(x.numel(), x.const_data_ptr(), got.data_ptr());
    const at::Tensor want = atenOf(op, x);
    const double eps = dbl ? std::numeric_limits<double>::epsilon() : std::numeric_limits<float>::epsilon();
    const double tiny = dbl ? std::numeric_limits<double>::min() : std::numeric_limits<float>::min();
    if (!at::isclose(got, want, 4 * eps, tiny, /*equal_nan=*/true).all().item<bool>()) {
      TSFUSE_LOG(kernel, warn, name, " is not within 4 ulp of ATen's ", opName(op), ": fast numerics keep eager's");
      return;
    }
    routines[index][dbl] = r;
  });
  return routines[index][dbl];
}

// Ops whose ATen CPU kernel computes each value with the C library's function (acosh, asinh:
// cpu_kernel over std::acosh / std::asinh, no vector form): the same function per value gives
// eager's bits wherever the value lies. (The roundings are primitives: kernels/ir/prims.def.)
template <typename T, T (*F)(T)>
void callEach(const void*, double, int64_t n, const void* in, void* out) {
  const T* a = static_cast<const T*>(in);
  T* r = static_cast<T*>(out);
  for (int64_t i = 0; i < n; ++i) r[i] = F(a[i]);
}
// (std:: overload sets as functions of T)
#define TSFUSE_PER_VALUE(Name, Fn) \
  template <typename T>            \
  T Name(T x) {                    \
    return Fn(x);                  \
  }
TSFUSE_PER_VALUE(acoshOf, std::acosh)
TSFUSE_PER_VALUE(asinhOf, std::asinh)
#undef TSFUSE_PER_VALUE
struct EachEntry {
  Op op;
  VmlRoutine::Call call[2];  // float, double
  const void* fn[2];         // the per-value function each call inlines (what the routine names)
};
template <typename T>
const void* address(T (*f)(T)) {
  return reinterpret_cast<const void*>(f);
}
#define TSFUSE_EACH(Id, F)                                                                                            \
  {                                                                                                                   \
    Op::Id, {&callEach<float, &F<float>>, &callEach<double, &F<double>>}, { address(&F<float>), address(&F<double>) } \
  }
const EachEntry kEachRoutines[] = {TSFUSE_EACH(Acosh, acoshOf), TSFUSE_EACH(Asinh, asinhOf)};
#undef TSFUSE_EACH

// The per-value routine for `op` in dtype t, checked once against the ATen op on the probe values;
// empty where there is none or a bit differs.
VmlRoutine eachRoutine(Op op, c10::ScalarType t) {
  const auto* end = std::end(kEachRoutines);
  const auto* it = std::find_if(std::begin(kEachRoutines), end, [&](const EachEntry& e) { return e.op == op; });
  if (it == end) return {};
  const bool dbl = t == c10::ScalarType::Double;
  const size_t index = static_cast<size_t>(it - std::begin(kEachRoutines));
  static std::once_flag once[std::size(kEachRoutines)][2];
  static VmlRoutine routines[std::size(kEachRoutines)][2];
  std::call_once(once[index][dbl], [&] {
    const VmlRoutine r(it->call[dbl], it->fn[dbl]);
    const at::Tensor x = probes(t);
    at::Tensor got = at::empty_like(x);
    r(x.numel(), x.const_data_ptr(), got.data_ptr());
    if (!sameBits(atenOf(op, x), got)) {
      TSFUSE_LOG(kernel, info, "the C library's ", opName(op), " differs from ATen's: ", opName(op),
                 " runs through ATen on tiles");
      return;
    }
    routines[index][dbl] = r;
  });
  return routines[index][dbl];
}

// Exponents ATen computes otherwise: fill/copy (Pow.cpp), sqrt, rsqrt, reciprocal, products.
bool powSpecialCase(double e) {
  for (double special : {0.0, 1.0, 0.5, -0.5, -1.0, 2.0, 3.0, -2.0})
    if (e == special) return true;
  return false;
}

}  // namespace

VmlSerialScope::VmlSerialScope() {
  if (tlsSerial) return;
  const SetLocalThreads setLocal = setLocalThreads();
  if (!setLocal) return;
  previous_ = setLocal(1);
  owner_ = tlsSerial = true;
}

VmlSerialScope::~VmlSerialScope() {
  if (!owner_) return;
  setLocalThreads()(previous_);
  tlsSerial = false;
}

bool fastMath() {
  static const bool on = [] {
    const char* v = std::getenv("TSFUSE_FAST_MATH");
    return v && (std::string(v) == "1" || std::string(v) == "on" || std::string(v) == "true");
  }();
  return on;
}

// Resolved and verified once per (routine, dtype), at first use.
VmlRoutine vmlRoutine(Op op, c10::ScalarType t) {
  if (t != c10::ScalarType::Float && t != c10::ScalarType::Double) return {};
  if (fastMath() && enabledByEnvironment())
    if (VmlRoutine fast = sleefRoutine(op, t)) return fast;
  if (!enabledByEnvironment()) return {};
  if (VmlRoutine each = eachRoutine(op, t)) return each;
  const int index = indexOf(kRoutines, op);
  if (index < 0) return {};
  const bool dbl = t == c10::ScalarType::Double;
  static std::once_flag once[std::size(kRoutines)][2];
  static FortranVml fns[std::size(kRoutines)][2];
  std::call_once(once[index][dbl], [&] {
    if (!enabledByEnvironment() || !torchCpu()) return;
    const std::string name = std::string(dbl ? "VMD" : "VMS") + kRoutines[index].name;
    auto f = reinterpret_cast<FortranVml>(dlsym(torchCpu(), name.c_str()));
    if (!f) {
      TSFUSE_LOG(kernel, info, name, " not in libtorch_cpu: ", opName(op), " runs through ATen on tiles");
      return;
    }
    at::Tensor x = probes(t), got = at::empty_like(x);
    mklRoutine(op, f, dbl)(x.numel(), x.const_data_ptr(), got.data_ptr());
    if (!sameBits(atenOf(op, x), got)) {
      TSFUSE_LOG(kernel, info, name, " differs from ATen's ", opName(op), ": ", opName(op),
                 " runs through ATen on tiles");
      return;
    }
    fns[index][dbl] = f;
  });
  return mklRoutine(op, fns[index][dbl], dbl);
}

namespace {

// SLEEF's pow as ATen's kernel for x of dtype t calls it (an AVX2 or AVX-512 build), resolved and
// verified once per (dtype, exponent kind) at first use on exponents of each kind; tensorExponent:
// the exponent is a one-value tensor, else a number.
VmlRoutine sleefPow(c10::ScalarType t, bool tensorExponent) {
  if (t != c10::ScalarType::Float && t != c10::ScalarType::Double) return {};
  const bool dbl = t == c10::ScalarType::Double;
  static std::once_flag once[2][2];
  static VmlRoutine::Call calls[2][2];
  static const void* fns[2][2];
  std::call_once(once[dbl][tensorExponent], [&] {
    if (!enabledByEnvironment() || !torchCpu()) return;
    const std::string isa = at::get_cpu_capability();  // the build of ATen's kernels this process runs
    if (isa != "AVX2" && isa != "AVX512") return;
    const bool wide = isa == "AVX512";
    const char* name =
        dbl ? (wide ? "Sleef_powd8_u10" : "Sleef_powd4_u10") : (wide ? "Sleef_powf16_u10" : "Sleef_powf8_u10");
    const VmlRoutine::Call byNumber[2][2] = {{&powFloat8, &powFloat16}, {&powDouble4, &powDouble8}};
    const VmlRoutine::Call byTensor[2][2] = {{&powTensorFloat8, &powTensorFloat16},
                                             {&powTensorDouble4, &powTensorDouble8}};
    const VmlRoutine::Call call = (tensorExponent ? byTensor : byNumber)[dbl][wide];
    const void* f = dlsym(torchCpu(), name);
    if (!f) {
      TSFUSE_LOG(kernel, info, name, " not in libtorch_cpu: pow runs through ATen on tiles");
      return;
    }
    const at::Tensor x = probes(t);
    for (double e : {1.5, -1.7, 1.0 / 3.0, 2.5, 7.0, -3.0, 4.0, 1e-3, 0.7, 2.0, 0.5, -1.0})
      for (int64_t n : {x.numel(), int64_t{1}, int64_t{15}, int64_t{33}, int64_t{100}}) {
        if (!tensorExponent && powSpecialCase(e)) continue;
        const at::Tensor in = x.slice(0, 0, n);
        at::Tensor got = at::empty_like(in);
        call(f, e, n, in.const_data_ptr(), got.data_ptr());
        const bool same = tensorExponent ? sameBits(at::pow(in, at::full({1}, e, in.options())), got) &&
                                               sameBits(at::pow(in, at::scalar_tensor(e, in.options())), got)
                                         : sameBits(at::pow(in, e), got);
        if (!same) {
          TSFUSE_LOG(kernel, info, name, " differs from ATen's pow (", tensorExponent ? "tensor" : "number",
                     " exponent ", e, ", ", n, " values): pow runs through ATen on tiles");
          return;
        }
      }
    calls[dbl][tensorExponent] = call;
    fns[dbl][tensorExponent] = f;
  });
  return VmlRoutine(calls[dbl][tensorExponent], fns[dbl][tensorExponent]);
}

}  // namespace

VmlRoutine powRoutine(c10::ScalarType t, double exponent) {
  if (exponent == 0.5) return vmlRoutine(Op::Sqrt, t);  // ATen's pow kernel calls its sqrt kernel
  if (powSpecialCase(exponent)) return {};
  return sleefPow(t, false).withArg(exponent);
}

VmlRoutine powTensorRoutine(c10::ScalarType t) { return sleefPow(t, true); }

}  // namespace tsfuse::cpu
