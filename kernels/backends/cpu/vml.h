// Eager's own vector routines for the float ops ATen computes with a vector math library.
//
// In MKL builds ATen's CPU exp, log, sqrt, atan, sin, cos and tanh (float, double) call MKL's VML
// in high-accuracy mode on contiguous chunks, and pow with a number exponent other than its special
// cases calls SLEEF's u10 pow on vectors of ATen's width (std::pow on the last few values of a
// chunk); calling the same routine on a tile gives eager's bits without a tensor, dispatch and
// TensorIterator per tile. Each routine (libtorch_cpu's exported symbols: VMSEXP_, ...,
// Sleef_powf8_u10) is checked once against the ATen op on probe values; where one is missing or any
// bit differs, the op keeps running through ATen. acosh and asinh (ATen: the C library's function
// on each value) are per-value routines, checked alike.
// TSFUSE_CPU_VML=0 turns them all off.
#pragma once

#include "kernels/ir/expr.h"

#include <c10/core/ScalarType.h>

#include <cstdint>

namespace tsfuse::cpu {

// MKL's Fortran interface (LP64): every argument by pointer.
using FortranVml = void (*)(const int32_t* n, const void* a, void* r, const int64_t* mode);

class VmlRoutine {
 public:
  // How a routine is called: its library function `fn` and number argument (pow's exponent).
  using Call = void (*)(const void* fn, double arg, int64_t n, const void* in, void* out);
  VmlRoutine() = default;
  VmlRoutine(Call call, const void* fn, double arg = 0.0) : call_(call), fn_(fn), arg_(arg) {}
  explicit operator bool() const { return call_ != nullptr && fn_ != nullptr; }
  // The same routine with its number argument set (pow's exponent).
  VmlRoutine withArg(double arg) const { return VmlRoutine(call_, fn_, arg); }
  // out[i] = op(in[i]) for i < n, as eager computes it; in and out may be the same buffer.
  void operator()(int64_t n, const void* in, void* out) const { call_(fn_, arg_, n, in, out); }
  // The same with the number argument given now (an exponent read at run time).
  void operator()(int64_t n, const void* in, void* out, double arg) const { call_(fn_, arg, n, in, out); }

 private:
  Call call_ = nullptr;
  const void* fn_ = nullptr;
  double arg_ = 0.0;
};

// While one is alive on a thread, MKL's thread-local thread count stays 1 there, so that each
// VmlRoutine call need not set and restore it (three TLS calls per tile otherwise). For loops that
// call the routines on many tiles; nested scopes are free.
class VmlSerialScope {
 public:
  VmlSerialScope();
  ~VmlSerialScope();
  VmlSerialScope(const VmlSerialScope&) = delete;
  VmlSerialScope& operator=(const VmlSerialScope&) = delete;

 private:
  bool owner_ = false;
  int previous_ = 0;
};

// The routine for `op` in dtype t, or an empty one (then the op runs through ATen). With fast
// numerics on, SLEEF's u10 routine (sqrt: u05) instead of eager's MKL one, where there is one.
VmlRoutine vmlRoutine(Op op, c10::ScalarType t);

// Opt-in fast numerics (TSFUSE_FAST_MATH=1 at load; docs/exactness.md, "Fast numerics"): exp, log,
// sqrt, atan, sin, cos and tanh through SLEEF's vector routines (within 1 ulp of the exact result,
// as Inductor's CPU code computes them) instead of eager's MKL ones: results within torch.testing's
// default tolerance of eager's, not its bits. Off by default.
bool fastMath();

// pow(x, exponent) for x of dtype t, where ATen's kernel for it is SLEEF's pow (float/double, an
// exponent none of 0, 1, +-0.5, -1, 2, 3, -2, and an AVX2 or AVX-512 build of ATen's kernels) or,
// for an exponent of 0.5, its sqrt (vmlRoutine); else an empty routine.
VmlRoutine powRoutine(c10::ScalarType t, double exponent);

// pow(x, e) for x of dtype t and e a one-value tensor of that dtype (ATen's tensor-tensor kernel:
// SLEEF's pow on vectors, std::pow in the dtype on the values left), or an empty routine. Called
// with e as its argument: routine(n, in, out, e).
VmlRoutine powTensorRoutine(c10::ScalarType t);

}  // namespace tsfuse::cpu
