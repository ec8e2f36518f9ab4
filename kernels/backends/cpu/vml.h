// Eager's own routine for the float transcendentals ATen computes with Intel MKL's vector math.
//
// In MKL builds ATen's CPU exp, log, sqrt, atan, sin, cos and tanh (float, double) call MKL's VML
// in high-accuracy mode on contiguous chunks; calling the same routine on a tile gives eager's bits
// without a tensor, dispatch and TensorIterator per tile. Each routine (libtorch_cpu's exported
// Fortran symbols, VMSEXP_, ...) is checked once against the ATen op on probe values; where one is
// missing or any bit differs, the op keeps running through ATen. TSFUSE_CPU_VML=0 turns them off.
#pragma once

#include "kernels/ir/expr.h"

#include <c10/core/ScalarType.h>

#include <cstdint>

namespace tsfuse::cpu {

// MKL's Fortran interface (LP64): every argument by pointer.
using FortranVml = void (*)(const int32_t* n, const void* a, void* r, const int64_t* mode);

class VmlRoutine {
 public:
  VmlRoutine() = default;
  VmlRoutine(FortranVml fn, bool isDouble) : fn_(fn), double_(isDouble) {}
  explicit operator bool() const { return fn_ != nullptr; }
  // out[i] = op(in[i]) for i < n, as eager computes it; in and out may be the same buffer.
  void operator()(int64_t n, const void* in, void* out) const;

 private:
  FortranVml fn_ = nullptr;
  bool double_ = false;
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

// The routine for `op` in dtype t, or an empty one (then the op runs through ATen).
VmlRoutine vmlRoutine(Op op, c10::ScalarType t);

}  // namespace tsfuse::cpu
