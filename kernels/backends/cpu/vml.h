// Eager's own routine for the float transcendentals ATen computes with Intel MKL's vector math.
//
// ATen's CPU exp, log, sqrt, atan, sin, cos and tanh for float and double (aten/src/ATen/cpu/vml.h, in MKL
// builds such as the x86-64 PyPI wheels) call MKL's VML in high-accuracy mode on contiguous
// chunks, whatever the tensor's layout. The tile interpreter runs those ops "through ATen on the
// tile" for eager's bits; calling the same VML routine on the tile gives the same bits without a
// tensor, a dispatch and a TensorIterator per tile. The routines are the Fortran-interface
// symbols libtorch_cpu exports (VMSEXP_, VMDLN_, ...), looked up in the loaded library, and each
// is checked once against the ATen op on probe values (specials included) before it is used:
// where a symbol is missing or any bit differs (a build without MKL, another ATen kernel), the op
// keeps running through ATen. TSFUSE_CPU_VML=0 turns the routines off.
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
